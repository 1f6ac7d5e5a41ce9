"""Bring back a node that only comes back by being created again, and renew a passed deadline.

Terraform plans nothing for a preempted spot VM (the provider only records the state), for a
flex-start queued resource whose run ended (SUSPENDED: the spec did not change) or for a spot
or on-demand deployment whose deadline job already fired, so `make deploy` would leave a dead
endpoint. This looks at the live node (or queued resource) and the deadline job first, then:

- `make deploy` (mode "deploy") marks what is dead for replacement (`terraform taint`) and, after
  the deadline passed, the deadline too: a deploy is a deliberate new run;
- `make recover` (mode "recover", what the schedule runs) replaces only what died before its
  time (a PREEMPTED or TERMINATED VM, a FAILED queued resource, a node missing while its run is
  not over) with Terraform's `-replace` of that one resource, and never restarts a run that
  ended on purpose (the deadline fired, a flex-start run SUSPENDED): that end is the billing stop.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from tpudeploy import deadline, deadline_ops, facts
from tpudeploy.config import DeployConfig
from tpudeploy.errors import UserError
from tpudeploy.gcp.scheduler import SchedulerApi
from tpudeploy.tfrun import Terraform, TerraformError
from tpudeploy.tpuvm import deployedspec
from tpudeploy.tpuvm import queued_resource as qr
from tpudeploy.tpuvm.addresses import (
    DEADLINE_ADDRESS,
    DENY_ALL_ADDRESS,
    QUEUED_RESOURCE_ADDRESS,
    VM_ADDRESS,
)
from tpudeploy.tpuvm.flex import queued_resource_spec
from tpudeploy.tpuvm.queued_resource.states import state_of
from tpudeploy.tpuvm.warmpath import StorageApi, cache_saved

# A spot VM that was preempted cannot be restarted; it must be deleted and created again
# (Cloud TPU documentation), and it holds quota until then.
DEAD_NODE_STATES = frozenset({"PREEMPTED", "TERMINATED"})
NOT_FOUND = "NOT_FOUND"
DEPLOY, RECOVER = "deploy", "recover"

__all__ = ["DEAD_NODE_STATES", "Decision", "Live", "RecoverError", "Terraform", "decide"]


class RecoverError(UserError):
    """A failure with a message meant for the user."""


@dataclass(frozen=True)
class Live:
    """The deployment as the APIs show it."""

    what: str  # "spot node gemma4-v5e", "queued resource gemma4-v5e-qr"
    state: str  # the node's or queued resource's state, or NOT_FOUND
    deadline: deadline.JobView | None = None  # spot and on-demand with a deadline


@dataclass(frozen=True)
class Decision:
    """What to do: taint (deploy) or replace (recover) `replace`, create `create` (recover),
    each only when the node stack is deployed (its state holds `when_in_state`)."""

    summary: str
    replace: tuple[str, ...] = ()
    create: tuple[str, ...] = ()
    when_in_state: str | None = None

    @property
    def acts(self) -> bool:
        return bool(self.replace or self.create)


def inspect(
    cfg: DeployConfig,
    project: str,
    api: qr.TpuApi,
    scheduler: Callable[[], SchedulerApi] | None = None,
    *,
    now: datetime | None = None,
) -> Live:
    """Look at the deployment's live node or queued resource, and at its deadline job."""
    now = now or datetime.now(UTC)
    spec = queued_resource_spec(cfg, project)
    try:
        if cfg.provisioning == "flex-start":
            found = api.get_queued_resource(spec.name)
            state = state_of(found) if found is not None else NOT_FOUND
            return Live(f"queued resource {spec.queued_resource_id}", state)
        node = api.get_node(spec.node_name)
    except qr.ApiError as exc:
        # Before the first deploy the secrets stack has not enabled the TPU API yet: then
        # nothing of this deployment can exist, and there is nothing to replace.
        if exc.status == 403 and "disabled" in exc.api_message.lower():
            return Live("TPU API", "not enabled yet (first deploy)")
        raise
    state = str(node.get("state", "STATE_UNSPECIFIED")) if node is not None else NOT_FOUND
    view = None
    if cfg.deadline_seconds is not None and scheduler is not None:
        name = deadline_ops.job_name(cfg, project)
        try:
            job = scheduler().get_job(name)
        except qr.ApiError as exc:
            if exc.status == 403 and "disabled" in exc.api_message.lower():
                job = None
            else:
                raise
        view = deadline.job_view(job, now)
    return Live(f"{cfg.provisioning} node {spec.node_id}", state, view)


def decide(cfg: DeployConfig, live: Live, mode: str, now: datetime) -> Decision:
    """The pure decision, for every state either API can report."""
    if cfg.provisioning == "flex-start":
        return _decide_queued(cfg, live, mode)
    return _decide_vm(cfg, live, mode, now)


def _decide_queued(cfg: DeployConfig, live: Live, mode: str) -> Decision:
    head = f"{live.what}: {live.state}"
    if live.state == NOT_FOUND and mode == RECOVER and cfg.idle.seconds is not None:
        # The idle node deletes its queued resource ([idle], tpudeploy/node/idlewatch.py): a
        # gone one is most likely that stop, on purpose, and creating it again would bill with
        # no one asking. Only a deliberate `make deploy` brings it back.
        return Decision(
            f"{head}; with [idle] stop_after = {cfg.idle.stop_after!r} the node deletes its "
            "queued resource when no request came for that long: not recreated; `make deploy` "
            "brings it back (a new run of max_run_duration)"
        )
    if live.state == NOT_FOUND:
        return Decision(
            f"{head}; creating it again if Terraform's state still has it",
            replace=(QUEUED_RESOURCE_ADDRESS,),
            when_in_state=QUEUED_RESOURCE_ADDRESS,
        )
    if live.state in ("SUSPENDED", "SUSPENDING") and mode == RECOVER:
        return Decision(
            f"{head}: its run ended (max_run_duration), which is the billing stop; not "
            "restarted. `make deploy` starts a new run"
        )
    if live.state in qr.DEAD_STATES:
        return Decision(
            f"{head}; it cannot come back by itself: replacing it with the same spec",
            replace=(QUEUED_RESOURCE_ADDRESS,),
            when_in_state=QUEUED_RESOURCE_ADDRESS,
        )
    return Decision(f"{head}; nothing to replace")


def _decide_vm(cfg: DeployConfig, live: Live, mode: str, now: datetime) -> Decision:
    head = f"{live.what}: {live.state}"
    view = live.deadline
    if view is not None:
        head += f"; {view.describe(now)}"
    ended = view is not None and view.status == "fired"
    if mode == RECOVER:
        if ended:
            return Decision(
                f"{head}. The run ended at its deadline: not recreated; `make deploy` starts a "
                "new run with a fresh deadline"
            )
        if live.state in DEAD_NODE_STATES:
            return Decision(
                f"{head}; it cannot restart: replacing it with the same spec",
                replace=(VM_ADDRESS,),
                when_in_state=VM_ADDRESS,
            )
        if live.state == NOT_FOUND and cfg.idle.seconds is not None:
            # The node deletes itself when idle ([idle], tpudeploy/node/idlewatch.py): a gone
            # node is most likely that stop, on purpose, and recreating it would bill again
            # with no one asking. Only a deliberate `make deploy` brings it back.
            return Decision(
                f"{head}; with [idle] stop_after = {cfg.idle.stop_after!r} the node deletes "
                "itself when no request came for that long: not recreated; `make deploy` "
                "brings it back"
            )
        if live.state == NOT_FOUND:
            return Decision(
                f"{head}; its run is not over (a replacement that failed, or a delete by hand): "
                "creating it again if the node stack is deployed",
                create=(VM_ADDRESS,),
                when_in_state=DENY_ALL_ADDRESS,
            )
        return Decision(f"{head}; nothing to replace")
    replace: list[str] = []
    notes = []
    if live.state in DEAD_NODE_STATES:
        replace.append(VM_ADDRESS)
        notes.append("it cannot restart: replacing it with the same spec")
    if view is not None and view.status in ("fired", "missing"):
        # A deploy after the deadline is a new run: the deadline restarts from now. A job that
        # vanished is renewed the same way rather than trusting a deadline that may be past.
        replace.append(DEADLINE_ADDRESS)
        seconds = cfg.deadline_seconds or 0
        notes.append(f"this deploy sets a new deadline, deploy time + {seconds / 3600:g} h")
    elif view is not None and view.status == "paused":
        notes.append("this deploy enables the deadline job again")
    if live.state == NOT_FOUND and view is not None and view.pending:
        # An idle stop (or a delete by hand) before the deadline: Terraform's refresh finds
        # the node gone and creates it; the run and its deadline go on.
        gone = "the idle stop ended its billing" if cfg.idle.seconds else "it was deleted"
        return Decision(f"{head}; {gone}: this deploy creates it again, same deadline")
    if not notes:
        return Decision(f"{head}; nothing to replace")
    return Decision(f"{head}; " + "; ".join(notes), replace=tuple(replace))


def recover(
    cfg: DeployConfig,
    project: str,
    *,
    api: qr.TpuApi,
    stack_dir: Callable[[], Path],
    scheduler: Callable[[], SchedulerApi] | None = None,
    mode: str = DEPLOY,
    terraform: str = "terraform",
    out: TextIO | None = None,
    now: datetime | None = None,
) -> Decision:
    """Inspect, decide, then taint (deploy) or replace and create (recover) through Terraform.

    `stack_dir` synthesizes (when needed) and returns the node stack's folder; it is called only
    when something must change, so a healthy deploy pays for no extra synth.
    """
    out = out if out is not None else sys.stderr
    now = now or datetime.now(UTC)
    try:
        live = inspect(cfg, project, api, scheduler, now=now)
    except qr.ApiError as exc:
        raise qr.QueuedResourceError(str(exc)) from None
    decision = decide(cfg, live, mode, now)
    _say(out, decision.summary)
    # A node the idle stop ended comes back with this deploy (a flex-start one as a new run):
    # say how long its boot takes.
    pending = live.deadline is not None and live.deadline.pending
    if mode == DEPLOY and live.state == NOT_FOUND and (pending or cfg.flex_start_node):
        _say(out, boot_note(cfg, project))
    if not decision.acts:
        return decision
    folder = stack_dir()
    tf = Terraform(folder, binary=terraform)
    try:
        tf.init()
        in_state = set(tf.state_list())
        if decision.when_in_state and decision.when_in_state not in in_state:
            then = "the deploy creates it" if mode == DEPLOY else "nothing to recover"
            _say(out, f"{decision.when_in_state} is not in Terraform's state; {then}")
            return Decision(decision.summary)
        if mode == DEPLOY:
            for address in decision.replace:
                if address in in_state:
                    tf.taint(address)
                    _say(out, f"marked {address} for replacement: the deploy creates it again")
            return decision
        replace = tuple(a for a in decision.replace if a in in_state)
        targets = (*replace, *decision.create)
        _refuse_undeployed_changes(cfg, tf, folder, [a for a in targets if a in in_state])
        _say(out, "applying " + ", ".join(targets) + " (and nothing else)")
        tf.apply(targets=targets, replace=replace)
    except TerraformError as exc:
        raise RecoverError(f"{exc}; the next attempt (make recover) tries again") from None
    _say(out, f"recovered: {', '.join(targets)} created again with the same spec")
    return decision


def _refuse_undeployed_changes(
    cfg: DeployConfig, tf: Terraform, folder: Path, addresses: list[str]
) -> None:
    """Recover brings back what was deployed, never a change that has not been: the state's
    record of each node resource must match what the checkout would create (issue 22: a change
    refused at the environment gate reached the node at the next preemption)."""
    if not addresses:
        return
    shown = tf.show_json()
    for address in addresses:
        deployed = deployedspec.deployed_values(shown, address)
        try:
            planned = deployedspec.planned_block(folder, address)
        except LookupError as exc:
            raise RecoverError(f"cannot compare with what was deployed: {exc}") from None
        if deployed is None:
            raise RecoverError(
                f"{address} is in Terraform's state but `terraform show` has no values for it; "
                "recover does not guess what was deployed: run `make deploy` instead"
            )
        changed = deployedspec.differences(planned, deployed)
        if changed:
            raise RecoverError(
                f"{address}: the checkout would deploy a different node than the one deployed "
                f"({', '.join(changed[:6])}{', ...' if len(changed) > 6 else ''} differ from "
                "Terraform's state). Recover re-creates only what was deployed: deploy the change "
                f"first (`make deploy` of {cfg.name}, or merge it through the deploy workflow and "
                "its environment gate), or run `make recover` from the commit that was deployed"
            )


def boot_note(cfg: DeployConfig, project: str, storage: StorageApi | None = None) -> str:
    """How the node created again boots: warm when its predecessor saved the compile cache."""
    try:
        warm = cache_saved(cfg, project, storage or StorageApi(log=sys.stderr))
    except (UserError, qr.ApiError) as exc:
        return (
            f"the new node boots in {facts.WARM_BOOT_S:.0f} s (warm) to {facts.COLD_BOOT_S:.0f} s "
            f"(cold): the compile cache is unreadable ({exc})"
        )
    if warm:
        return (
            "warm boot: the compile cache holds this config, so the new node is ready in about "
            f"{facts.WARM_BOOT_S:.0f} s (cold: {facts.COLD_BOOT_S:.0f} s)"
        )
    return f"cold boot: no compile cache for this config yet, about {facts.COLD_BOOT_S:.0f} s"


def _say(out: TextIO, text: str) -> None:
    print(f"tpudeploy: {text}", file=out, flush=True)
