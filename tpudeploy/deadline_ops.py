"""The deadline job as both platforms' commands meet it, the same way whether it deletes a TPU
VM's node or a GKE cluster: `make status` reads it, `make extend` moves it.

tpudeploy.deadline holds the deadline's lifecycle (standard library only: the GitOps helper
reads it under a bare python3); this module adds what the commands need around it: the config's
job, the job as Cloud Scheduler shows it, and the narrow Terraform apply. The Cloud Scheduler
client comes from the caller (a `Jobs`): each Platform hands over the one client the project
has, so neither platform package imports the other's.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TextIO

from tpudeploy import deadline
from tpudeploy.config import DeployConfig
from tpudeploy.durations import parse_duration
from tpudeploy.errors import UserError
from tpudeploy.tfrun import Terraform, TerraformError

ExtendError = deadline.ExtendError
# What `make extend` may change: the deadline (replaced with the new value), its job (its
# schedule patched in place), the stop account's grant and, with [idle], the node's own grant,
# whose conditions end with the deadline (replaced: a condition is not updated in place), and
# the warning ahead of it.
# Anything else its -target pulls in must plan no change. A pipeline deployment has no such
# grant (the bootstrap's): -target on an address the configuration lacks plans nothing for it.
EXTEND_ADDRESSES = (
    deadline.DEADLINE_ADDRESS,
    deadline.DEADLINE_JOB_ADDRESS,
    deadline.DEADLINE_GRANT_ADDRESS,
    deadline.IDLE_GRANT_ADDRESS,
    # The "stops soon" warning: its job's schedule and its alert's time bound follow the
    # deadline (both updated in place).
    deadline.WARN_JOB_ADDRESS,
    deadline.WARN_ALERT_ADDRESS,
)


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
    if view.pending and not target.exists:
        # Gone before its deadline (the idle stop, [idle]; or a delete by hand): nothing bills,
        # and the job still fires then (its DELETE then finds nothing).
        return [
            f"nothing is billing: {target.absent} before its {view.describe(now, what)}; "
            "`make deploy` creates it again with this deadline"
        ]
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


# ---- make extend -----------------------------------------------------------------------------


def extension_seconds(cfg: DeployConfig, by: str) -> int:
    """`BY` in seconds, or why extending does not apply: checked from the config and the
    argument alone, before any credential or API is asked for."""
    if cfg.flex_start_node:
        raise ExtendError(
            "provisioning = 'flex-start': the TPU API fixes a run's end when the queued resource "
            "is created and cannot move it; raise max_run_duration and `make deploy` after this "
            "run ends (a new run), or use spot or on-demand, whose deadline `make extend` moves"
        )
    if cfg.deadline_seconds is None:
        raise ExtendError(
            f'max_run_duration = "none": {cfg.deadline_target} has no deadline to extend '
            "(nothing deletes it: it bills until you destroy it); set max_run_duration and "
            "`make deploy` to give it one"
        )
    try:
        return parse_duration(by, name="BY")
    except ValueError as exc:
        raise ExtendError(str(exc)) from None


def extend(
    cfg: DeployConfig,
    project: str,
    by: str,
    *,
    jobs: Jobs,
    stack_dir: Callable[[], Path],
    terraform: str = "terraform",
    out: TextIO | None = None,
    now: datetime | None = None,
) -> datetime:
    """`make extend BY=2h`: read the pending deadline from its job, add `by`, and apply the new
    value to the deadline and its job only. Terraform replaces terraform_data.deadline-time with
    the `extended_deadline` variable and patches the job's schedule in place (Cloud Scheduler's
    jobs.patch: "Updates a job", cloud.google.com/scheduler/docs/reference/rest/v1/
    projects.locations.jobs/patch); later deploys keep it (its input is ignored after create).

    -target also plans what the two depend on: on GKE the deadline hangs on the cluster's id, so
    a cluster change the checkout holds and no deploy has applied would ride along (a changed
    zone replaces the cluster). The plan is saved and read first, and applied only when nothing
    but the deadline and its job changes: what is applied is what was checked."""
    out = out if out is not None else sys.stdout
    now = now or datetime.now(UTC)
    seconds = extension_seconds(cfg, by)
    view = read(cfg, project, jobs, now)
    new = deadline.extended(view, seconds, now, what=cfg.deadline_target)
    old = deadline.format_time(view.at) if view.at else "?"
    print(f"tpudeploy: moving the deadline from {old} to {deadline.format_time(new)}", file=out)
    tf = Terraform(stack_dir(), binary=terraform)
    try:
        tf.init()
        # The plan file holds the stack's state: a private folder, removed afterwards.
        with tempfile.TemporaryDirectory(prefix="tpudeploy-extend-") as folder:
            plan = Path(folder) / "extend.tfplan"
            changes = tf.plan(
                plan,
                targets=EXTEND_ADDRESSES,
                replace=(deadline.DEADLINE_ADDRESS,),
                variables={deadline.VARIABLE: deadline.format_time(new)},
            )
            others = [c for c in changes if c.address not in EXTEND_ADDRESSES]
            if others:
                pending = ", ".join(f"{c.address} ({'/'.join(c.actions)})" for c in others)
                raise ExtendError(
                    f"make extend BY={by} would also change {pending}: stack "
                    f"{cfg.deadline_stack_name} holds changes no deploy has applied, and "
                    f"make extend applies the deadline and its job only. Run `make deploy` "
                    f"first (it keeps the deadline), then `make extend BY={by}`; the deadline "
                    f"is still {old}"
                )
            tf.apply_plan(plan)
    except TerraformError as exc:
        raise ExtendError(f"{exc}; the deadline is still {old}") from None
    print(
        f"tpudeploy: deadline {deadline.format_time(new)} "
        f"({deadline.remaining_text((new - now).total_seconds())}): Cloud Scheduler job "
        f"{cfg.deadline_job_name} deletes {cfg.deadline_target} then "
        f"(cron '{deadline.cron_of(new)}' UTC)",
        file=out,
    )
    return new
