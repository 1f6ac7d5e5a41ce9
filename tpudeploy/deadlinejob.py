"""The deadline job as both platforms' commands meet it, the same way whether it deletes a TPU
VM's node or a GKE cluster: `make status` reads it.

tpudeploy.deadline holds the deadline's lifecycle (standard library only: the GitOps helper
reads it under a bare python3); this module adds what the commands need around it: the config's
job and the job as Cloud Scheduler shows it. The Cloud Scheduler client comes from the caller (a
`Jobs`): each Platform hands over the one client the project has, so neither platform package
imports the other's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from tpudeploy import deadline
from tpudeploy.config import DeployConfig
from tpudeploy.errors import UserError


class Jobs(Protocol):
    """Cloud Scheduler's jobs.get, as the project's client makes it."""

    def get_job(self, name: str) -> dict[str, Any] | None:
        """The job as the API shows it; None when there is none."""
        ...


def job_name(cfg: DeployConfig, project: str) -> str:
    """The deployment's deadline job, as Cloud Scheduler names it."""
    return deadline.job_name(project, cfg.deadline_region, cfg.deadline_job_name)


def read(cfg: DeployConfig, project: str, jobs: Jobs, now: datetime) -> deadline.JobView:
    """The deadline as the job in the cloud shows it (pending, fired, paused or missing)."""
    return deadline.job_view(jobs.get_job(job_name(cfg, project)), now)


# ---- make status -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What the job deletes, in `make status`'s words."""

    name: str  # what bills without an end: "spot", "the cluster"
    url: str  # the DELETE the job sends
    exists: bool  # whether it is there now: when not, and no job is pending, nothing bills
    bills: str  # what bills without a job: "it bills $0.5779/chip-hour until `make destroy`"
    stop_now: str  # how to stop the billing before the deadline
    absent: str  # the missing target, as "no node" or "no cluster gemma4-gke"


def status_lines(
    cfg: DeployConfig,
    project: str,
    jobs: Callable[[], Jobs],
    target: Target,
    *,
    now: datetime | None = None,
) -> list[str]:
    """What `make status` says about the deadline: when it comes, what enforces it, what to do.
    `jobs` is called here, so a client that cannot be built (no credentials) is one line."""
    now = now or datetime.now(UTC)
    if cfg.deadline_seconds is None:
        return [
            f'WARNING: {target.name} has no end time (max_run_duration = "none"): {target.bills}.'
        ]
    try:
        view = read(cfg, project, jobs(), now)
    except UserError as exc:
        return [f"deadline: could not read Cloud Scheduler job {cfg.deadline_job_name}: {exc}"]
    what = cfg.deadline_target
    if view.pending:
        return [
            f"billing stops: {view.describe(now, what)}",
            f"  enforced by Cloud Scheduler job {cfg.deadline_job_name} ({cfg.deadline_region}): "
            f"DELETE {target.url} as {cfg.stop_account_id}",
            f"  extend it with `make extend BY=2h`; {target.stop_now}",
        ]
    if view.status == "fired":
        return [
            f"billing stopped: {view.describe(now, what)}; `make deploy` starts a new run "
            f"(deadline: deploy time + {cfg.deadline_seconds / 3600:g} h)"
        ]
    if not target.exists:
        return [
            f"nothing is billing: {target.absent} ({view.describe(now, what)}); `make deploy` "
            "creates both"
        ]
    return [
        f"WARNING: {view.describe(now, what)}: {target.bills}; `make deploy` puts the deadline "
        "job back"
    ]
