"""The watch's hard budget: its worst-case cost from the planner's flex-start rate, refused above
`[watch] budget_usd`, and what stops the billing (what `make check` prints for a `[watch]` table).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tpudeploy import names
from tpudeploy.config import DeployConfig
from tpudeploy.planner import (
    FLEX_START,
    NoPricesError,
    hourly_cost,
    lookup_accelerator,
    price_table,
)
from tpudeploy.timefmt import format_seconds

WATCH_SUFFIX = "-watch"
# names.DEPLOYMENT_NAME: 3-24 characters.
NAME_MAX = 24


def watch_name(cfg: DeployConfig) -> str:
    """The watch's own deployment: its node, accounts, secrets and state prefix never touch the
    watched one's (one project, one VPC, two deployments)."""
    return f"{cfg.name}{WATCH_SUFFIX}"


def name_problem(cfg: DeployConfig) -> str | None:
    """Why `<name>-watch` cannot be a deployment name (it prefixes the node, accounts and
    secrets, so it must pass the same rule as `name`), or None."""
    name = watch_name(cfg)
    if names.DEPLOYMENT_NAME_RE.fullmatch(name):
        return None
    return (
        f"name = {cfg.name!r}: the watch's deployment would be {name!r}, not a usable deployment "
        f"name; fix: shorten name to at most {NAME_MAX - len(WATCH_SUFFIX)} characters, or "
        "leave [watch] enabled = false"
    )


def watch_data(base: Mapping[str, Any], cfg: DeployConfig, image: str) -> dict[str, Any]:
    """The watch deployment's whole config: the deployment's own serving config with `image`,
    under its own name, on flex-start, its node's max_run_duration the run's time limit (the
    TPU API deletes the VM then: billing stops even if nobody destroys it)."""
    data: dict[str, Any] = json.loads(json.dumps(dict(base), default=str))  # a deep copy
    data.pop("watch", None)  # the watch deployment is not itself watched
    data["name"] = watch_name(cfg)
    data["provisioning"] = "flex-start"
    data["max_run_duration"] = cfg.watch.time_limit
    # A flex-start node needs no deadline job and no auto-recovery.
    data.pop("auto_recover", None)
    vllm = dict(data.get("vllm", {}))
    vllm["image"] = image
    data["vllm"] = vllm
    return data


@dataclass(frozen=True)
class Budget:
    rate: float | None  # $/hour of the watch's node (flex-start, the deployment's chips)
    rate_note: str
    time_limit_s: int
    worst_case_s: int  # chip-billed seconds at worst: see worst_case_seconds
    budget_usd: float

    @property
    def worst_case_usd(self) -> float | None:
        return None if self.rate is None else self.rate * self.worst_case_s / 3600

    @property
    def refusal(self) -> str | None:
        """Why a run may not start, or None: an unknown rate is refused too (never guessed)."""
        worst = self.worst_case_usd
        if worst is None:
            return (
                f"watch.budget_usd: no flex-start rate to price the run ({self.rate_note}); add "
                "the region's [prices.REGION] flex-start rate"
            )
        if worst > self.budget_usd:
            return (
                f"watch.budget_usd = {self.budget_usd:g}: the run's worst case is "
                f"${worst:,.2f} ({format_seconds(self.worst_case_s)} of flex-start at "
                f"${self.rate:,.2f}/h); fix: raise budget_usd to at least {worst:,.2f}, or "
                "shorten watch.time_limit"
            )
        return None


# The workflow job's timeout is the time limit plus this (tpudeploy/upstream/gate.py): room for
# the run's own destroy after its last paid step.
JOB_MARGIN_S = 20 * 60


def worst_case_seconds(time_limit_s: int) -> int:
    """GitHub cancels the job at time_limit + JOB_MARGIN_S; a node it created in its last second
    is left to its own flex-start max_run_duration (= time_limit: "When the requested run
    duration ends, the TPU VM is deleted", docs.cloud.google.com/tpu/docs/request-using-flex-start).
    One node at a time (the runner destroys a node before it deploys the next, and the next run
    destroys a leftover first), so this is the most that bills."""
    return 2 * time_limit_s + JOB_MARGIN_S


def budget(cfg: DeployConfig) -> Budget:
    limit = cfg.watch.time_limit_seconds
    try:
        chips = lookup_accelerator(cfg.accelerator_type).chips
        rate: float | None = hourly_cost(FLEX_START, chips=chips, prices=price_table(cfg))
        note = f"flex-start, {chips} chip(s) in {cfg.effective_region}"
    except (NoPricesError, KeyError, ValueError) as exc:
        rate, note = None, f"no flex-start rate for {cfg.effective_region}: {exc}"
    return Budget(rate, note, limit, worst_case_seconds(limit), cfg.watch.budget_usd)


def check_lines(cfg: DeployConfig, *, unsupported: str | None = None) -> list[str]:
    """What `make check` prints for a config with a `[watch]` table: on or off, the schedule, the
    budget against the worst case, the time limit and what stops the billing. `unsupported`: why
    the platform has no `make tune`, whose harness the watch runs (None: it has)."""
    if "watch" not in cfg.model_fields_set:
        return []
    w = cfg.watch
    b = budget(cfg)
    state = "ON" if w.enabled else "off (enabled = false: the workflow's first step stops)"
    worst = b.worst_case_usd
    lines = [
        f"upstream watch: {state}; schedule {w.schedule!r} (UTC), deployment "
        f"{watch_name(cfg)!r} (flex-start, its own node, accounts, secrets and state prefix)",
        f"  budget ${w.budget_usd:,.2f}; worst case "
        + ("unknown" if worst is None else f"${worst:,.2f}")
        + f" ({b.rate_note}"
        + ("" if b.rate is None else f" at ${b.rate:,.2f}/h")
        + f" x {format_seconds(b.worst_case_s)})",
        f"  time limit {format_seconds(b.time_limit_s)}: the job's timeout; billing stops at "
        "each watch node's flex-start max_run_duration (= the time limit: the TPU API deletes "
        "the VM), and the next run destroys whatever a killed run left first",
        "  paid job: "
        + (
            f"the self-hosted runner {list(w.runner)} (it must reach the node's front door and "
            "its IAP SSH)"
            if w.runner
            else "none ([watch] runner is empty): the workflow reports a new build and the "
            "command that judges it; a GitHub-hosted runner cannot reach the node"
        ),
    ]
    platform = f"[watch] enabled = true: the watch runs make tune's harness, and {unsupported}"
    for problem in (
        b.refusal,
        name_problem(cfg) if w.enabled else None,
        platform if w.enabled and unsupported else None,
    ):
        if problem:
            lines.append(f"  REFUSED: {problem}")
    return lines
