"""The deployment's alert policies, as the Monitoring API v3 AlertPolicy's JSON.

Each policy is one PromQL condition over vLLM's own metrics (the same names and the same
selector as the dashboard: tpudeploy/dashboard.py) or over the deployment's log-based metrics
(tpudeploy/logmetrics.py), and carries the build log's reason and the fix in
documentation.content, which Cloud Monitoring sends with every notification. A node's spot
preemption is read from its log entry (tpudeploy/logsources.py says which, per platform);
vllm:num_preemptions counts the engine evicting requests from a full KV pool, not the node's,
and is covered by the KV-wall policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tpudeploy import logmetrics
from tpudeploy.config import DeployConfig
from tpudeploy.dashboard import KV_WALL, query

# PrometheusQueryLanguageCondition.duration: "Alerts are considered firing once their PromQL
# expression was evaluated to be "true" for this long" (monitoring.v3 discovery document,
# schemas/discovery/); the issue asks five minutes for the KV wall.
FIVE_MINUTES = "300s"
TEN_MINUTES = "600s"
EVALUATION = "60s"


@dataclass(frozen=True, slots=True)
class Policy:
    key: str  # stable: part of the construct id and the display name
    title: str
    promql: str  # {sel}: the deployment's selector
    duration: str
    why: str
    fix: str


POLICIES: tuple[Policy, ...] = (
    Policy(
        "kv-wall",
        "KV cache above the wall",
        f"max(vllm:kv_cache_usage_perc{{sel}}) > {KV_WALL}",
        FIVE_MINUTES,
        "The build log: past clients x context of about 250,000 tokens (~78% of the KV pool) "
        "TTFT explodes; vLLM queues and preempts requests instead of serving them.",
        "Fewer concurrent clients or shorter contexts ([access.limits] streams, [load] "
        "expected_context), or more replicas on GKE (make plan-scale); make check shows the "
        "safe concurrency.",
    ),
    Policy(
        "waiting",
        "Waiting requests growing",
        "sum(delta(vllm:num_requests_waiting{sel}[10m])) > 0 and "
        "sum(vllm:num_requests_waiting{sel}) > 0",
        TEN_MINUTES,
        "Requests wait when the KV pool holds no room for them (the build log's KV wall): a "
        "queue that keeps growing means arrivals outpace the server, and every waiting request "
        "adds its wait to TTFT.",
        "Lower the clients' streams or rate ([access.limits]), or add replicas on GKE (make "
        "plan-scale); make usage shows who sends what.",
    ),
)

# No vLLM series exists until a boot's compile ends (the build log: 857 s cold, 497 s warm;
# tpudeploy/facts.py), so an absence held for five minutes fired on every boot: the first
# deploy, a recovered TPU VM, every GKE replacement. The grace is the platform's boot timeline
# (Platform.absence_grace_s) rounded up to whole minutes: a condition's duration "must be a
# multiple of a minute" for the threshold and MQL conditions (Monitoring API v3,
# MonitoringQueryLanguageCondition.duration: "only values that are a multiple of a minute--e.g.,
# 0, 60, 120, or 300 seconds--are supported"); the PromQL condition's field documents no step
# and no maximum (schemas/discovery/monitoring.v3.AlertPolicy.json: "Must be a non-negative
# duration or missing"), so the stricter rule is kept. The margin over a cold boot is the one
# GKE's startup probe gives it (tpudeploy/gke/replicaplan.STARTUP_MARGIN; a test ties them).
BOOT_GRACE_MARGIN = 1.5


def whole_minutes(seconds: float) -> int:
    return math.ceil(seconds / 60) * 60


def no_server(grace_s: int) -> Policy:
    """The absence policy: no vLLM series for longer than a boot may take (`grace_s`)."""
    minutes = whole_minutes(grace_s)
    return Policy(
        "no-server",
        "No vLLM server reporting",
        "absent(vllm:num_requests_running{sel})",
        f"{minutes}s",
        f"No ready replica or serving node for {minutes // 60} minutes, longer than a boot may "
        "take (the build log: 857 s cold, 497 s warm; no metric exists before the compile "
        "ends): a spot node was preempted and not replaced, a flex-start run ended or its "
        "request still waits in the queue for capacity, or vLLM died or cannot finish booting.",
        "make status says which; make deploy re-creates a preempted TPU VM; on GKE make "
        "status lists the replicas and their nodes; make logs WHAT=boot shows how far the "
        "boot got.",
    )


def declared(absence_grace_s: int | None) -> tuple[Policy, ...]:
    """The PromQL policies over vLLM's metrics; the absence one only where a server is always
    expected (`absence_grace_s`: Platform.absence_grace_s, None where none is)."""
    if absence_grace_s is None:
        return POLICIES
    return (*POLICIES, no_server(absence_grace_s))


def display_name(cfg: DeployConfig, policy: Policy) -> str:
    """Per deployment: two deployments never share a policy."""
    return f"{cfg.name}: {policy.title}"


def alert_policy(
    cfg: DeployConfig, policy: Policy, *, selector: str, channels: list[str]
) -> dict[str, Any]:
    """One AlertPolicy resource (Monitoring API v3); `channels` are notification channel names."""
    return {
        "displayName": display_name(cfg, policy),
        "combiner": "OR",
        "userLabels": {"deployment": cfg.name},
        "conditions": [
            {
                "displayName": policy.title,
                "conditionPrometheusQueryLanguage": {
                    "query": query(policy.promql, selector),
                    "duration": policy.duration,
                    "evaluationInterval": EVALUATION,
                },
            }
        ],
        "documentation": {
            "content": f"**Why:** {policy.why}\n\n**Fix:** {policy.fix}",
            "mimeType": "text/markdown",
            "subject": f"{cfg.name}: {policy.title}",
        },
        "notificationChannels": channels,
    }


# More than this share of the front door's requests failing (5xx or 429) for 5 minutes.
ERROR_SHARE = 0.05


def log_policies(cfg: DeployConfig, log_metric_keys: tuple[str, ...]) -> tuple[Policy, ...]:
    """The policies over the deployment's log-based metrics (tpudeploy/logmetrics.py), for
    those declared (`log_metric_keys`): their queries name the deployment's own metrics."""
    out = []
    if "frontdoor-requests" in log_metric_keys:
        out.append(
            Policy(
                "errors",
                "Errors or 429s above 5% of requests",
                f"{logmetrics.error_rate_query(cfg)} > {ERROR_SHARE}",
                FIVE_MINUTES,
                "Clients see failures: 5xx from vLLM (a crash, an engine restart, a request "
                "past max_model_len) or 429 from the front door (a client over its [access.limits] "
                "streams or rate, set from the planner's KV wall).",
                "make usage shows which client fails and how; make logs WHAT=frontdoor shows the "
                "lines, WHAT=vllm the server's. Raise a client's limit only below the KV wall "
                "(make check shows it).",
            )
        )
    if "preemptions" in log_metric_keys:
        out.append(
            Policy(
                "preempted",
                "A spot node was preempted",
                f"{logmetrics.preemptions_query(cfg)} > 0",
                "0s",
                "Spot capacity is the price of spot's rate: Google may take the node back at any "
                "time with about 30 s of notice. The build log: each preemption wastes a boot "
                "(857 s cold, 497 s with the compile cache), and spot wins over flex-start only "
                "while preemptions come less often than the planner's break-even (make check). "
                "A TPU VM stays down until make deploy re-creates it; on GKE the pool replaces "
                "the node and the replica boots again.",
                "TPU VM: make deploy (it re-creates the preempted node; make status says "
                "PREEMPTED). GKE: make status shows the replacement replica booting. Preempted "
                'often: provisioning = "flex-start" (TPU VM) or [gke] capacity = '
                '"flex-start": a flex-start node is never preempted once it runs.',
            )
        )
    if "bootcheck-disagreements" in log_metric_keys:
        out.append(
            Policy(
                "boot-disagrees",
                "Boot log disagrees with the planner",
                f"{logmetrics.bootcheck_query(cfg)} > 0",
                "0s",
                "The build log: verify from the boot log, never from the flag being accepted. "
                "The node's check found the running vLLM's KV pool, context or flags other than "
                "the planner's: the capacity and cost the project reports are not this server's.",
                "make logs WHAT=boot names what disagrees; pin the image the planner was checked "
                "against (make pin) or fix the flag, then make deploy.",
            )
        )
    return tuple(out)


def alert_policies(
    cfg: DeployConfig,
    *,
    selector: str,
    channels: list[str],
    absence_grace_s: int | None,
    log_metric_keys: tuple[str, ...] = (),
) -> dict[str, dict[str, Any]]:
    """Every policy this deployment gets, by its stable key."""
    policies = declared(absence_grace_s) + log_policies(cfg, log_metric_keys)
    return {p.key: alert_policy(cfg, p, selector=selector, channels=channels) for p in policies}


def email_channel(cfg: DeployConfig, address: str) -> dict[str, Any]:
    """A NotificationChannel (Monitoring API v3) of type email: its one label email_address
    (cloud.google.com/monitoring/support/notification-options#email)."""
    return {
        "type": "email",
        "displayName": f"{cfg.name}: {address}",
        "labels": {"email_address": address},
        "userLabels": {"deployment": cfg.name},
    }


def notifications_line(cfg: DeployConfig) -> str:
    """What `make check` says about where the alerts go."""
    if not cfg.alerts.emails:
        return (
            "alerts: the policies notify nobody ([alerts] emails is empty); they show in the "
            'console\'s Alerting page; add e.g. [alerts] emails = ["oncall@example.com"]'
        )
    return f"alerts: emailed to {', '.join(cfg.alerts.emails)}"


def watching_parts(cfg: DeployConfig, purpose: str) -> list[str]:
    """tpudeploy/permissions.py's parts for the dashboard and the alert policies: none for a
    pipeline deployment (stacks/watch.py is not declared there)."""
    if cfg.gitops_managed:
        return []
    parts = ["secrets (the dashboard)"]
    if purpose == "deploy":
        parts.append("billing (the alert policies)")
        if cfg.alerts.emails:
            parts.append("billing ([alerts] emails: their channels)")
    return parts
