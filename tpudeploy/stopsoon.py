""" "Stops soon" (issue 38's alert on the deadline, and issue 39's idle stop): the warning job
and the two log-based alert policies, as the APIs' JSON (stacks/deadline_warn.py declares the
deadline's beside the deadline job, stacks/watch.py the idle stop's with the node's alerts).

An alert policy cannot fire at a clock time, and a fixed `time() > deadline` goes stale when
`make extend` moves the deadline. So the warning is an event the cloud logs, matched by a
log-based alert policy (AlertPolicy condition `conditionMatchedLog`):

- the deadline: a second Cloud Scheduler job, `<name>-deadline-soon`, fires
  deadline.WARN_BEFORE ahead of the deadline (its cron line from the same Terraform value as the
  deadline job's, so `make extend` and a new deadline move it). Cloud Scheduler records each
  attempt in Cloud Logging on the monitored resource `cloud_scheduler_job` (labels project_id,
  job_id, location) in the log `cloudscheduler.googleapis.com/executions`;
- the idle stop (TPU VM, [idle] stop_after): the node's idle watcher writes one boot-log entry
  (phase "idle", event "stops-soon", with `stops_at`) idlewatch.warn_before(stop_after) ahead
  of the stop (tpudeploy/node/idlewatch.py).

The Cloud Scheduler log's shape rests on the issue's reading and on public code that reads
these entries (found with the code search, 2026-12-03); Google's "View logs" page for Cloud
Scheduler is not in the stored corpus. The policy needs no more of it than the resource type
and its job_id and location labels.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from tpudeploy import deadline, logsources
from tpudeploy.config import DeployConfig

SCHEDULER_RESOURCE = "cloud_scheduler_job"
SCHEDULER_LOG_ID = "cloudscheduler.googleapis.com/executions"
# AlertStrategy.notificationRateLimit: "Required for log-based alerting policies, i.e.
# policies with a LogMatch condition" (schemas/discovery/monitoring.v3.AlertPolicy.json). One
# notification an hour: the warning job runs once (one attempt, RETRY_COUNT 0 below), and an
# idle node warns once per idle spell.
RATE_LIMIT = "3600s"
# The warning's request is made once: a failed one still leaves its attempt in the log.
RETRY_COUNT = 0


def warn_job_name(cfg: DeployConfig) -> str:
    """Per deployment, beside its deadline job (`<name>-deadline`)."""
    return f"{cfg.deadline_job_name}-soon"


def warn_uri(stop_uri: str) -> str:
    """The warning job's request: a GET of the discovery document of the API the deadline job
    calls (https://<api>/$discovery/rest?version=<v>), public and read-only, so the job needs
    no identity and changes nothing. Its answer does not matter to the alert, which matches the
    attempt, not its outcome."""
    parts = urlsplit(stop_uri)
    version = parts.path.strip("/").split("/", 1)[0]
    return f"{parts.scheme}://{parts.netloc}/$discovery/rest?version={version}"


def deadline_filter(cfg: DeployConfig, deadline_ref: str = "") -> str:
    """The warning job's attempts, this deployment's only: its job_id and location. With
    `deadline_ref` (a Terraform template of the deadline) only before the deadline: the cron
    line has no year, and the job's run a year later must not warn of a deadline long gone."""
    parts = [
        f"resource.type={logsources.quoted(SCHEDULER_RESOURCE)}",
        f"resource.labels.job_id={logsources.quoted(warn_job_name(cfg))}",
        f"resource.labels.location={logsources.quoted(cfg.deadline_region)}",
    ]
    if deadline_ref:
        parts.append(f'timestamp<"{deadline_ref}"')
    return " AND ".join(parts)


def idle_filter(cfg: DeployConfig) -> str:
    """The idle watcher's "stops soon" entry in this deployment's boot log (the log contract:
    tpudeploy/logsources.py)."""
    return (
        f"{logsources.tpuvm_metric_filter(deployment=cfg.name, what='boot')} AND "
        f"jsonPayload.phase={logsources.quoted(logsources.IDLE_PHASE)} AND "
        f"jsonPayload.event={logsources.quoted(logsources.STOPS_SOON_EVENT)}"
    )


# (key, title): the policies' construct ids are "alert-<key>", as stacks/watch.py's.
DEADLINE_SOON = ("deadline-soon", f"Deadline in {deadline.WARN_BEFORE}: billing stops then")
IDLE_SOON = ("idle-soon", "Idle: the node stops itself soon")


def titles(cfg: DeployConfig, *, idle_watcher: bool) -> list[str]:
    """The policies a deployment gets (make check's list): the deadline's with a deadline job
    (not on a pipeline deployment: no Monitoring permissions there), the idle one where the
    node runs the idle watcher (`idle_watcher`: a TPU VM with [idle] stop_after)."""
    if cfg.gitops_managed:
        return []
    deadline_soon = [DEADLINE_SOON[1]] if cfg.deadline_seconds is not None else []
    # The idle warning needs no deadline: a flex-start node stops itself too (issue 39).
    return [*deadline_soon, *([IDLE_SOON[1]] if idle_watcher else [])]


def _policy(
    cfg: DeployConfig,
    title: str,
    log_filter: str,
    extractors: dict[str, str],
    content: str,
    channels: list[str],
) -> dict[str, Any]:
    condition: dict[str, Any] = {"filter": log_filter}
    if extractors:
        condition["labelExtractors"] = extractors
    return {
        "displayName": f"{cfg.name}: {title}",
        "combiner": "OR",
        "userLabels": {"deployment": cfg.name},
        # LogMatch: "If set, no other conditions can be present" (the discovery document).
        "conditions": [{"displayName": title, "conditionMatchedLog": condition}],
        "alertStrategy": {"notificationRateLimit": {"period": RATE_LIMIT}},
        "documentation": {
            "content": content,
            "mimeType": "text/markdown",
            "subject": f"{cfg.name}: {title}",
        },
        "notificationChannels": channels,
    }


def deadline_policy(
    cfg: DeployConfig, what: str, deadline_ref: str, channels: list[str]
) -> dict[str, Any]:
    """`deadline_ref`: a Terraform template of the deadline (its value in the filter's bound
    and the documentation, updated in place by `make extend`)."""
    content = (
        f"**Why:** the deadline job `{cfg.deadline_job_name}` deletes {what} at "
        f"{deadline_ref} (UTC), {deadline.WARN_BEFORE} after this alert: the billing stops "
        "then, and so does the endpoint, with any request in flight.\n\n"
        "**Fix:** `make extend BY=2h` moves the deadline (and this warning) if the work needs "
        "longer; `make status` shows the deadline. To stop the billing now: `make destroy`."
    )
    return _policy(cfg, DEADLINE_SOON[1], deadline_filter(cfg, deadline_ref), {}, content, channels)


def idle_policy(cfg: DeployConfig, what: str, channels: list[str]) -> dict[str, Any]:
    content = (
        f"**Why:** {what} has had no request for most of [idle] stop_after "
        f"({cfg.idle.stop_after}); at ${{log.extracted_label.stops_at}} (UTC) it deletes "
        "itself, which stops its billing.\n\n"
        "**Fix:** any request through the endpoint restarts the idle clock; `make status` "
        "shows the idle time. After the stop, `make deploy` brings the node back (a new boot)."
    )
    extractors = {"stops_at": f"EXTRACT(jsonPayload.{logsources.STOPS_AT_FIELD})"}
    return _policy(cfg, IDLE_SOON[1], idle_filter(cfg), extractors, content, channels)
