"""`make dashboard`: the deployment's dashboard in the console, and the gcloud command that
shows its JSON (a screenshot cannot be made offline)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from tpudeploy import errors
from tpudeploy.config import DeployConfig
from tpudeploy.dashboard import console_url, display_name
from tpudeploy.platform import load_config
from tpudeploy.terraform import REPO_ROOT, local_state_path


def dashboard_name(cfg: DeployConfig, root: Path = REPO_ROOT) -> str | None:
    """projects/P/dashboards/ID from the secrets stack's local state, None without one (remote
    state, or not deployed yet)."""
    try:
        state = json.loads(local_state_path(cfg.secrets_stack_name, root).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    for resource in state.get("resources") or []:
        if resource.get("type") == "google_monitoring_dashboard" and resource.get("instances"):
            name = resource["instances"][0].get("attributes", {}).get("id")
            return str(name) if name else None
    return None


def lines(cfg: DeployConfig, root: Path = REPO_ROOT) -> list[str]:
    project = cfg.project or "PROJECT"
    if cfg.gitops_managed:
        return [
            f"{cfg.name}: a pipeline deployment declares no dashboard (its deploy identity holds "
            "no Cloud Monitoring permissions; docs/see-it-running.md)"
        ]
    name = dashboard_name(cfg, root)
    if name is None:
        title = display_name(cfg)
        find = (
            f"gcloud monitoring dashboards list --project={shlex.quote(project)} "
            f"--filter={shlex.quote(f'displayName={json.dumps(title)}')} --format='value(name)'"
        )
        return [
            f"{cfg.name}: no dashboard in local state (not deployed yet, or its state is in the "
            "state bucket); find it with:",
            f"  {find}",
        ]
    dashboard_id = name.rsplit("/", 1)[-1]
    return [
        f"dashboard of {cfg.name}: {console_url(project, dashboard_id)}",
        f"its JSON: gcloud monitoring dashboards describe {shlex.quote(name)} "
        f"--project={shlex.quote(project)} --format=json",
    ]


def main() -> int:
    print("\n".join(lines(load_config())))
    return 0


if __name__ == "__main__":
    sys.exit(errors.run(main))
