"""`make extend BY=2h`: move a spot or on-demand node's deadline (GKE: the cluster's) later, and
nothing else. The deadline's ids are the same in both stacks (tpudeploy.deadline)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from tpudeploy import deadline
from tpudeploy.config import DeployConfig
from tpudeploy.durations import parse_duration
from tpudeploy.tfrun import Terraform, TerraformError
from tpudeploy.tpuvm.addresses import DEADLINE_ADDRESS, DEADLINE_JOB_ADDRESS
from tpudeploy.tpuvm.recover import RecoverError
from tpudeploy.tpuvm.scheduler import SchedulerApi


def extension_seconds(cfg: DeployConfig, by: str) -> int:
    """`BY` in seconds, or why extending does not apply: checked from the config and the
    argument alone, before any credential or API is asked for."""
    if cfg.flex_start_node:
        raise RecoverError(
            "provisioning = 'flex-start': the TPU API fixes a run's end when the queued resource "
            "is created and cannot move it; raise max_run_duration and `make deploy` after this "
            "run ends (a new run), or use spot or on-demand, whose deadline `make extend` moves"
        )
    if cfg.deadline_seconds is None:
        raise RecoverError(
            f'max_run_duration = "none": {cfg.deadline_target} has no deadline to extend (it '
            "bills until `make destroy`)"
        )
    try:
        return parse_duration(by, name="BY")
    except ValueError as exc:
        raise RecoverError(str(exc)) from None


def extend(
    cfg: DeployConfig,
    project: str,
    by: str,
    *,
    scheduler: SchedulerApi,
    stack_dir: Callable[[], Path],
    terraform: str = "terraform",
    out: TextIO | None = None,
    now: datetime | None = None,
) -> datetime:
    """Read the pending deadline from its job, add `by`, and apply the new value to the deadline
    and its job only (-target): Terraform replaces terraform_data.deadline-time with the
    `extended_deadline` variable, and later deploys keep it (its input is ignored after create)."""
    out = out if out is not None else sys.stdout
    now = now or datetime.now(UTC)
    seconds = extension_seconds(cfg, by)
    view = deadline.job_view(
        scheduler.get_job(deadline.job_name(project, cfg.deadline_region, cfg.deadline_job_name)),
        now,
    )
    try:
        new = deadline.extended(view, seconds, now, what=cfg.deadline_target)
    except deadline.ExtendError as exc:
        raise RecoverError(str(exc)) from None
    old = deadline.format_time(view.at) if view.at else "?"
    print(f"tpudeploy: moving the deadline from {old} to {deadline.format_time(new)}", file=out)
    tf = Terraform(stack_dir(), binary=terraform)
    try:
        tf.init()
        tf.apply(
            targets=(DEADLINE_ADDRESS, DEADLINE_JOB_ADDRESS),
            replace=(DEADLINE_ADDRESS,),
            variables={deadline.VARIABLE: deadline.format_time(new)},
        )
    except TerraformError as exc:
        raise RecoverError(f"{exc}; the deadline is still {old}") from None
    print(
        f"tpudeploy: deadline {deadline.format_time(new)} "
        f"({deadline.remaining_text((new - now).total_seconds())}): Cloud Scheduler job "
        f"{cfg.deadline_job_name} deletes {cfg.deadline_target} then "
        f"(cron '{deadline.cron_of(new)}' UTC)",
        file=out,
    )
    return new
