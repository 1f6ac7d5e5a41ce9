"""The deployment's typed configuration: one TOML file, every default the build log's value.

`schema` (with `base`, `network`, `proxy`, `workload`, `geometry`) holds the pydantic models;
their field checks are plain functions (`checks`, and `network`, `prices`, `serveflags`,
`containers` for theirs); `loading` reads and validates a file, `messages` words its problems.
None imports a feature module of the package.
"""

from tpudeploy.config.checks import RESERVED_LABEL_KEYS
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
from tpudeploy.config.model_geometry import LayerType, ModelGeometry
from tpudeploy.config.network import (
    MEDIA_URLS_DISABLED,
    NetworkConfig,
    media_domain_problem,
    public_addresses,
)
from tpudeploy.config.prices import PRICE_KEYS, normalize_provisioning
from tpudeploy.config.proxy import ProxyConfig
from tpudeploy.config.schema import (
    PROVISIONING_MODELS,
    DeployConfig,
)
from tpudeploy.config.serveflags import DENIED_SERVE_FLAGS, MODELLED_SERVE_FLAGS
from tpudeploy.config.vllm_table import VllmConfig
from tpudeploy.config.workload import BenchConfig, BenchTable, LoadConfig
from tpudeploy.facts import IAP_SSH_RANGE

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG_PATH",
    "DENIED_SERVE_FLAGS",
    "IAP_SSH_RANGE",
    "MEDIA_URLS_DISABLED",
    "MODELLED_SERVE_FLAGS",
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
    "ProxyConfig",
    "VllmConfig",
    "config_path",
    "cross_check",
    "load_config",
    "media_domain_problem",
    "normalize_provisioning",
    "parse_config",
    "public_addresses",
    "require_project",
]
