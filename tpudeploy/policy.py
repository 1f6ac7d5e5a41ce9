"""The build log's guard rails, applied only by commands that create or change billable resources.

Loading a config validates its shape (tpudeploy.config); policy is a separate step run by synth,
diff and deploy. Status, destroy and cleanup never depend on it: a config that a guard rail
refuses (say gpu_memory_utilization = 0.95) must still let its user look at and stop what runs.
"""

from __future__ import annotations

from tpudeploy import planner
from tpudeploy.config import ConfigError, DeployConfig


def findings(cfg: DeployConfig) -> list[planner.Finding]:
    """Every guard-rail finding on `cfg`: errors first, then warnings and notes."""
    from tpudeploy.platform import platform_for

    return platform_for(cfg).findings(cfg)


def warnings(cfg: DeployConfig) -> list[str]:
    """What creating commands print (never refuse): warnings and notes."""
    return [str(f) for f in findings(cfg) if f.severity != "error"]


def refusals(cfg: DeployConfig) -> list[str]:
    """The guard-rail errors: each names the key, the value, the build-log reason and the fix."""
    # An accelerator without chip data is itself a finding (check_settings), never an exception.
    return [str(f) for f in findings(cfg) if f.severity == "error"]


def enforce(cfg: DeployConfig, *, source: str) -> DeployConfig:
    """Raise ConfigError when a guard rail refuses `cfg`; return it unchanged otherwise."""
    problems = refusals(cfg)
    if problems:
        raise ConfigError(source, problems)
    return cfg
