"""The deployment's typed configuration: one TOML file, every default the build log's value.

`schema` (with `base`, `network`, `geometry`) holds the pydantic models and nothing else;
`loading` reads and validates a file. Neither imports a feature module of the package.
"""

from tpudeploy.config.geometry import LayerType, ModelGeometry
from tpudeploy.config.loading import (
    CONFIG_ENV,
    DEFAULT_CONFIG_PATH,
    ConfigError,
    config_path,
    cross_check,
    load_config,
    parse_config,
    require_project,
)
from tpudeploy.config.network import MEDIA_URLS_DISABLED, NetworkConfig, media_domain_problem
from tpudeploy.config.schema import (
    PRICE_KEYS,
    PROVISIONING_MODELS,
    RESERVED_LABEL_KEYS,
    BenchConfig,
    BenchTable,
    DeployConfig,
    LoadConfig,
    VllmConfig,
    normalize_provisioning,
)
from tpudeploy.facts import IAP_SSH_RANGE

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_PATH",
    "IAP_SSH_RANGE",
    "MEDIA_URLS_DISABLED",
    "PRICE_KEYS",
    "PROVISIONING_MODELS",
    "RESERVED_LABEL_KEYS",
    "BenchConfig",
    "BenchTable",
    "ConfigError",
    "DeployConfig",
    "LayerType",
    "LoadConfig",
    "ModelGeometry",
    "NetworkConfig",
    "VllmConfig",
    "config_path",
    "cross_check",
    "load_config",
    "media_domain_problem",
    "normalize_provisioning",
    "parse_config",
    "require_project",
]
