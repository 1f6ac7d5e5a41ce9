"""Which pipeline deployments the recover workflow sends to `make recover`, and why.

Read-only and cheap: it judges what gcloud lists with the plan identity (TPU nodes, the deadline
jobs, the deny-all firewall rules), so the gated job, which takes the deploy concurrency group
and waits for the environment's reviewers, starts only for a node that needs it. The rules are
`make recover`'s (tpudeploy.tpuvm.recover, mode "recover"; tests/gitops/test_gitops_recovery.py
holds them
equal): a PREEMPTED or TERMINATED node, or a missing node of a deployed stack, is recreated
unless its deadline already fired (that run ended on purpose). Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tpudeploy import deadline
from tpudeploy.gitops.deployments import NO_END_MODELS, Deployment

DEAD_NODE_STATES = frozenset({"PREEMPTED", "TERMINATED"})
NOT_FOUND = "NOT_FOUND"


def candidates(deployments: Sequence[Deployment]) -> list[Deployment]:
    """Pipeline deployments that asked for it: TPU VM spot or on-demand with auto_recover = true.

    Never a GKE deployment: it has no `make recover` (tpudeploy/gke/platform.py COMMANDS: the
    Deployment replaces a lost replica, the node pools a preempted TPU node), and no TPU VM of
    its name exists, so the look below would read "missing" and start a job that can only fail.
    """
    return [
        d for d in deployments if d.auto_recover and d.provisioning in NO_END_MODELS and not d.gke
    ]


@dataclass(frozen=True)
class Verdict:
    deployment: Deployment
    recover: bool
    line: str  # for the run summary


def _short(name: object) -> str:
    return str(name).rsplit("/", 1)[-1]


def _location(name: object) -> str:
    parts = str(name).split("/")
    return parts[3] if len(parts) > 3 and parts[2] == "locations" else ""


def judge(
    deployments: Sequence[Deployment],
    *,
    nodes: Sequence[dict[str, object]],
    jobs: Sequence[dict[str, object]],
    firewalls: Sequence[dict[str, object]],
    now: datetime,
) -> list[Verdict]:
    """One verdict per candidate, from `gcloud ... list --format=json` output."""
    rules = {str(f.get("name", "")) for f in firewalls}
    verdicts = []
    for dep in candidates(deployments):
        node = next(
            (
                n
                for n in nodes
                if _short(n.get("name")) == dep.name and _location(n.get("name")) == dep.zone
            ),
            None,
        )
        state = str(node.get("state", "STATE_UNSPECIFIED")) if node is not None else NOT_FOUND
        job = next(
            (
                j
                for j in jobs
                if _short(j.get("name")) == f"{dep.name}-deadline"
                and _location(j.get("name")) == dep.region
            ),
            None,
        )
        deployed = f"{dep.name}-deny-all" in rules or job is not None
        view = deadline.job_view(job, now) if dep.deadline_seconds is not None else None
        ended = view is not None and view.status == "fired"
        about = f"node {state}" + (f"; {view.describe(now)}" if view is not None else "")
        if ended and (state in DEAD_NODE_STATES or state == NOT_FOUND):
            verdicts.append(Verdict(dep, False, f"- {dep.name}: {about}: run ended, not recreated"))
        elif state in DEAD_NODE_STATES or (state == NOT_FOUND and deployed):
            verdicts.append(Verdict(dep, True, f"- {dep.name}: {about}: recovery job started"))
        else:
            verdicts.append(Verdict(dep, False, f"- {dep.name}: {about}: nothing to recover"))
    return verdicts
