"""What bills with no end time: declared by the deployment files, or listed by gcloud."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tpudeploy.gitops.deployments import (
    KEY_MAX_RUN_DURATION,
    KEY_PROVISIONING,
    NO_END,
    NO_END_MODELS,
    Deployment,
)

# Provisioning models whose node bills until deleted, unless its deadline job deletes it;
# flex-start ends with its run duration.
NO_END_TIME = NO_END_MODELS
# A deadline job retries for a few minutes; past this margin a node outlived its deadline.
DEADLINE_GRACE_HOURS = 1.0

# Nodes in these states no longer run a workload but still hold quota until deleted (seed:
# a preempted spot TPU VM cannot be restarted; it must be deleted and created again).
DEAD_NODE_STATES = frozenset({"PREEMPTED", "TERMINATED"})
# A flex-start queued resource whose run ended (or never got capacity) holds quota too.
DEAD_QUEUED_STATES = frozenset({"SUSPENDED", "FAILED"})
ALIVE_NODE_STATES = frozenset({"CREATING", "READY", "RESTARTING", "REPAIRING", "STARTING"})


# A notice says what ends a deployment's billing and fails nothing, not even --strict.
NOTICE = "notice"


@dataclass(frozen=True)
class Finding:
    level: str  # "notice", "warning" or "error": a GitHub annotation level
    message: str


def static_billing(deployments: Sequence[Deployment]) -> list[Finding]:
    """Deployments whose node (GKE: cluster), once deployed, bills until someone destroys it:
    spot or on-demand that opted out of the deadline job, a GKE file with no cluster deadline;
    and for every GKE deployment, what ends its billing (the cloud check sees TPU VMs only)."""
    findings = []
    for dep in deployments:
        if dep.gke:
            findings.append(_gke_billing(dep))
        elif dep.bills_forever:
            findings.append(
                Finding(
                    "warning",
                    f"{dep.config}: {dep.name} uses {KEY_PROVISIONING} = {dep.provisioning!r} "
                    f"with {KEY_MAX_RUN_DURATION} = {NO_END!r}: once deployed its node bills with "
                    "no end time until `make destroy` (or the destroy workflow); a deadline (the "
                    "default, 8h) or flex-start stops it",
                )
            )
    return findings


# What a GKE deployment's billing is, either way (tpudeploy/gke/summary.py's "billing stops"):
# the chips stop when the serving stack goes (the autoscaler removes idle TPU nodes), the
# cluster and its idle floor when the cluster goes; [gke] max_run_duration recycles a flex-start
# node, which the pool replaces while a replica wants it, so it ends nothing.
_GKE_RECYCLE = (
    "([gke] max_run_duration only recycles a flex-start node, which is replaced while a "
    "replica wants it, so it ends nothing)"
)
_GKE_DESTROY = (
    "the destroy workflow stops the chips (the serving stack; idle TPU nodes go within 10 "
    "minutes) and then deletes the cluster"
)
_GKE_NOT_CHECKED = "the cloud check lists TPU VMs, not GKE clusters, so it cannot see this one"


def _gke_billing(dep: Deployment) -> Finding:
    if dep.deadline_seconds is None:
        return Finding(
            "warning",
            f"{dep.config}: {dep.name} runs on GKE with {KEY_MAX_RUN_DURATION} = {NO_END!r}: "
            "nothing deletes its cluster, so once deployed its idle floor and its replicas' TPU "
            f"nodes bill with no end time {_GKE_RECYCLE}; {_GKE_DESTROY}; a deadline (the "
            f"default, 8h) ends it; {_GKE_NOT_CHECKED}",
        )
    return Finding(
        NOTICE,
        f"{dep.config}: {dep.name} runs on GKE: Cloud Scheduler job {dep.name}-deadline deletes "
        f"its cluster (pools, TPU nodes, fee) {dep.deadline_seconds / 3600:g} h after each "
        f"deploy (top-level {KEY_MAX_RUN_DURATION}; `make extend` moves it) {_GKE_RECYCLE}; "
        f"{_GKE_DESTROY}; {_GKE_NOT_CHECKED}",
    )


def deadline_hours(deployments: Sequence[Deployment]) -> dict[str, float]:
    """{node name: hours to its deadline} of the spot and on-demand TPU VM deployments that have
    one (a GKE deadline deletes a cluster, whose TPU nodes are no TPU VM the cloud check lists)."""
    return {
        dep.name: dep.deadline_seconds / 3600
        for dep in deployments
        if dep.deadline_seconds is not None and not dep.gke
    }


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _age_hours(created: object, now: datetime) -> float | None:
    if not isinstance(created, str) or not created:
        return None
    try:
        when = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (now - when).total_seconds() / 3600


def cloud_billing(
    nodes: Sequence[dict[str, object]],
    queued: Sequence[dict[str, object]],
    *,
    now: datetime,
    max_age_hours: float,
    deadlines: Mapping[str, float] | None = None,
) -> list[Finding]:
    """Judge `gcloud alpha compute tpus tpu-vm list` and `... queued-resources list` JSON.

    Errors: dead nodes and ended queued resources (drift: the repository says it runs, the cloud
    says it does not, and quota stays held), and nodes with no termination time running longer
    than `max_age_hours`. Younger such nodes are warnings. A node whose deployment declares a
    deadline (`deadlines`, hours by node name) is expected to end then: it is an error only once
    it outlived that deadline, which its job should have prevented.
    """
    deadlines = deadlines or {}
    findings: list[Finding] = []
    for node in nodes:
        name = _short(str(node.get("name", "?")))
        state = str(node.get("state", ""))
        if state in DEAD_NODE_STATES:
            findings.append(
                Finding(
                    "error",
                    f"TPU node {name} is {state}: it cannot be restarted and holds quota; "
                    "run the deploy workflow again (or `make destroy`) to replace it",
                )
            )
            continue
        if state not in ALIVE_NODE_STATES:
            continue
        scheduling = node.get("schedulingConfig")
        ends = isinstance(scheduling, dict) and bool(scheduling.get("terminationTimestamp"))
        if ends:
            continue
        age = _age_hours(node.get("createTime"), now)
        age_text = f"{age:.1f} h" if age is not None else "an unknown time"
        if name in deadlines:
            limit = deadlines[name] + DEADLINE_GRACE_HOURS
            if age is not None and age <= limit:
                continue
            findings.append(
                Finding(
                    "error",
                    f"TPU node {name} is {state} and has run {age_text}, past its deadline "
                    f"({deadlines[name]:g} h after its deploy): its deadline job did not delete "
                    "it, or `make extend` moved it; `make status` shows the job, the destroy "
                    "workflow stops the billing",
                )
            )
            continue
        level = "error" if age is None or age > max_age_hours else "warning"
        findings.append(
            Finding(
                level,
                f"TPU node {name} is {state} with no termination time and has run {age_text}: "
                "it bills until deleted (`make destroy` or the destroy workflow)",
            )
        )
    for resource in queued:
        name = _short(str(resource.get("name", "?")))
        state_obj = resource.get("state")
        state = str(state_obj.get("state", "")) if isinstance(state_obj, dict) else ""
        if state in DEAD_QUEUED_STATES:
            findings.append(
                Finding(
                    "error",
                    f"queued resource {name} is {state}: its run ended or never started and it "
                    "holds quota; run the destroy workflow, then deploy again if still wanted",
                )
            )
    return findings
