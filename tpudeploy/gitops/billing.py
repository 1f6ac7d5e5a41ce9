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


@dataclass(frozen=True)
class Finding:
    level: str  # "warning" or "error": a GitHub annotation level
    message: str


def static_billing(deployments: Sequence[Deployment]) -> list[Finding]:
    """Deployments whose node, once deployed, bills until someone destroys it: spot or
    on-demand that opted out of the deadline job."""
    return [
        Finding(
            "warning",
            f"{dep.config}: {dep.name} uses {KEY_PROVISIONING} = {dep.provisioning!r} with "
            f"{KEY_MAX_RUN_DURATION} = {NO_END!r}: once deployed its node bills with no end time "
            "until `make destroy` (or the destroy workflow); a deadline (the default, 8h) or "
            "flex-start stops it",
        )
        for dep in deployments
        if dep.bills_forever
    ]


def deadline_hours(deployments: Sequence[Deployment]) -> dict[str, float]:
    """{node name: hours to its deadline} of the spot and on-demand deployments that have one."""
    return {
        dep.name: dep.deadline_seconds / 3600
        for dep in deployments
        if dep.deadline_seconds is not None
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
