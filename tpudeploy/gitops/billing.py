"""What bills with no end time: declared by the deployment files, or listed by gcloud."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tpudeploy.gitops.deployments import KEY_PROVISIONING, Deployment

# Provisioning models whose node bills until deleted; flex-start ends with its run duration.
NO_END_TIME = frozenset({"spot", "on-demand"})

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
    """Deployments whose node, once deployed, bills until someone destroys it."""
    return [
        Finding(
            "warning",
            f"{dep.config}: {dep.name} uses {KEY_PROVISIONING} = {dep.provisioning!r}: once "
            "deployed its node bills with no end time until `make destroy` (or the destroy "
            "workflow); flex-start stops itself",
        )
        for dep in deployments
        if dep.provisioning in NO_END_TIME
    ]


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
) -> list[Finding]:
    """Judge `gcloud alpha compute tpus tpu-vm list` and `... queued-resources list` JSON.

    Errors: dead nodes and ended queued resources (drift: the repository says it runs, the cloud
    says it does not, and quota stays held), and nodes with no termination time running longer
    than `max_age_hours`. Younger such nodes are warnings.
    """
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
