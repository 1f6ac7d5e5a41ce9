"""`make status` for spot and on-demand: what ends the billing, what a preemption costs."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from tpudeploy import deadline_ops, planner
from tpudeploy.config import DeployConfig
from tpudeploy.gcp.scheduler import SchedulerApi
from tpudeploy.tpuvm import guestattributes
from tpudeploy.tpuvm import queued_resource as qr
from tpudeploy.tpuvm.deadline_target import node_url
from tpudeploy.tpuvm.rungstatus import rung_lines
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
    # A capacity ladder: which rung runs (tpuvm/rungstatus.py).
    for line in rung_lines(cfg, labels=report.get("node_labels")):
        print(printable(line))
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
    target = deadline_ops.Target(
        name=cfg.provisioning,
        url=node_url(project, cfg.zone, cfg.node_id),
        exists=node_state != "NOT_FOUND",
        bills=f"it bills {planner.rate_text(cfg)} until `make destroy`",
        stop_now="`make destroy` stops the billing now",
        absent="no node",
    )
    return deadline_ops.status_lines(
        cfg, project, lambda: scheduler or SchedulerApi(log=sys.stderr), target, now=now
    )


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
