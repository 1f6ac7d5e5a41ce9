"""The build log's guard rails, applied only by commands that create or change billable resources.

Loading a config validates its shape (tpudeploy.config); policy is a separate step run by synth,
diff and deploy. Status, destroy and cleanup never depend on it: a config that a guard rail
refuses (say gpu_memory_utilization = 0.95) must still let its user look at and stop what runs.

The findings come from both platforms' shared rules (shared_findings, the planner's) and each
platform's own (its Platform.findings adds them); tpudeploy.platform.guard_rails asks the right
one, and the functions below apply a list of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tpudeploy import planner
from tpudeploy.config import ConfigError, DeployConfig
from tpudeploy.planner import clients


def shared_findings(cfg: DeployConfig) -> list[planner.Finding]:
    """The guard rails every platform applies (the build log's, tpudeploy.planner.guards)."""
    # An accelerator without chip data is itself a finding (check_settings), never an exception.
    # The clients' stream caps against the same KV wall (tpudeploy/planner/clients.py).
    return planner.check_settings(cfg) + clients.check_access(cfg)


def warnings(found: Sequence[planner.Finding]) -> list[str]:
    """What creating commands print (never refuse): warnings and notes."""
    return [str(f) for f in found if f.severity != "error"]


def refusals(found: Sequence[planner.Finding]) -> list[str]:
    """The guard-rail errors: each names the key, the value, the build-log reason and the fix."""
    return [str(f) for f in found if f.severity == "error"]


def enforce(cfg: DeployConfig, found: Sequence[planner.Finding], *, source: str) -> DeployConfig:
    """Raise ConfigError when a guard rail refuses `cfg` (`found`: its findings); return it
    unchanged otherwise."""
    problems = refusals(found)
    if problems:
        raise ConfigError(source, problems)
    return cfg
