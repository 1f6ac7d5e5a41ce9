"""`make status` for spot and on-demand: what ends the billing, what a preemption costs."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from tpudeploy import deadline, planner
from tpudeploy.config import DeployConfig
from tpudeploy.tpuvm import guestattributes
from tpudeploy.tpuvm import queued_resource as qr
from tpudeploy.tpuvm.deadline_target import node_url
from tpudeploy.tpuvm.scheduler import SchedulerApi, job_name
from tpudeploy.tpuvm.warmpath import StorageApi, cache_saved


def status(cfg: DeployConfig, project: str) -> int:
    """`make status` on a TPU VM: the queued resource or node, its IPs, what ends its billing,
    and what the node says it runs."""
    from tpudeploy.terminal import printable
    from tpudeploy.tpuvm.flex import queued_resource_spec

    spec = queued_resource_spec(cfg, project)
    try:
        report = qr.status(spec)
    except qr.QueuedResourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    # What the API reports about the node passes through printable() like every node-sourced
    # text (tpudeploy/terminal.py).
    if cfg.provisioning == "flex-start":
        print("\n".join(printable(line) for line in qr.format_status(report).split("\n")))
    else:
        # A VM path has no queued resource; show the node, then what ends its billing.
        state = printable(report["node_state"])
        print(f"node {spec.node_name}: {state}")
        ext, internal = report["external_ip"] or "-", report["internal_ip"] or "-"
        print(printable(f"  external IP {ext}, internal IP {internal}"))
        print("\n".join(printable(line) for line in lines(cfg, project, state)))
    if report["node_state"] != "NOT_FOUND":
        # What the node says it runs, and how its boot compared with the planner.
        print("\n".join(printable(line) for line in guestattributes.status_lines(cfg, project)))
    return 0


def lines(
    cfg: DeployConfig,
    project: str,
    node_state: str,
    *,
    scheduler: SchedulerApi | None = None,
    storage: StorageApi | None = None,
    now: datetime | None = None,
) -> list[str]:
    now = now or datetime.now(UTC)
    out = _deadline_lines(cfg, project, scheduler, now, node_state)
    if cfg.provisioning == "spot":
        out.append(_preemption(cfg, project, storage))
    if node_state in ("PREEMPTED", "TERMINATED"):
        out.append(
            f"the node is {node_state} and cannot restart: `make recover` (or `make deploy`) "
            "replaces it with the same spec"
            + ("; auto_recover: the recover workflow does it" if cfg.auto_recover else "")
        )
    return out


def _deadline_lines(
    cfg: DeployConfig,
    project: str,
    scheduler: SchedulerApi | None,
    now: datetime,
    node_state: str,
) -> list[str]:
    rate = planner.rate_text(cfg)
    if cfg.deadline_seconds is None:
        return [
            f'WARNING: {cfg.provisioning} has no end time (max_run_duration = "none"): it '
            f"bills {rate} until `make destroy`."
        ]
    name = job_name(project, cfg.deadline_region, cfg.deadline_job_name)
    try:
        job = (scheduler or SchedulerApi(log=sys.stderr)).get_job(name)
    except qr.QueuedResourceError as exc:
        return [f"deadline: could not read Cloud Scheduler job {cfg.deadline_job_name}: {exc}"]
    view = deadline.job_view(job, now)
    enforced = (
        f"enforced by Cloud Scheduler job {cfg.deadline_job_name} ({cfg.deadline_region}): "
        f"DELETE {node_url(project, cfg.zone, cfg.node_id)} as {cfg.stop_account_id}"
    )
    if view.pending:
        return [
            f"billing stops: {view.describe(now)}",
            f"  {enforced}",
            "  extend it with `make extend BY=2h`; `make destroy` stops the billing now",
        ]
    if view.status == "fired":
        return [
            f"billing stopped: {view.describe(now)}; `make deploy` starts a new run "
            f"(deadline: deploy time + {cfg.deadline_seconds / 3600:g} h)"
        ]
    if node_state == "NOT_FOUND":
        return [f"nothing is billing: no node ({view.describe(now)}); `make deploy` creates both"]
    return [
        f"WARNING: {view.describe(now)}: it bills {rate} until `make destroy`; "
        "`make deploy` puts the deadline job back"
    ]


def _preemption(cfg: DeployConfig, project: str, storage: StorageApi | None) -> str:
    chips = planner.lookup_accelerator(cfg.accelerator_type).chips
    try:
        prices = planner.price_table(cfg)
    except planner.NoPricesError as exc:
        return f"preemption cost: not estimated: {exc}"
    try:
        warm = cache_saved(cfg, project, storage or StorageApi(log=sys.stderr))
    except qr.QueuedResourceError as exc:
        return planner.preemption_line(chips=chips, prices=prices) + f" (cache unreadable: {exc})"
    return planner.preemption_line(warm=warm, chips=chips, prices=prices)
