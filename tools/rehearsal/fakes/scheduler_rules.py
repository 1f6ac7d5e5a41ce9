"""What Cloud Scheduler's jobs.create and jobs.patch refuse in a job, as data with its source
(the fake, fakes/cloudscheduler.py, judges every job with `problems`). The schedule's own rules
(unix-cron, five fields, no year) and the time zone (the fake schedules in UTC only) stay in the
fake beside its cron reader."""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes.discovery_rules import Rule

RULES = (
    Rule(
        "the job's id: letters, digits, hyphens or underscores, at most 500 characters",
        "https://cloud.google.com/python/docs/reference/cloudscheduler/1.3.1/"
        "google.cloud.scheduler_v1.types.Job (Job.name)",
        "JOB_ID can contain only letters ([A-Za-z]), numbers ([0-9]), hyphens (-), or "
        "underscores (_). The maximum length is 500 characters.",
    ),
    Rule(
        "a description of at most 500 characters",
        "https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs "
        "(Job.description)",
        "A human-readable description for the job. This string must not contain more than 500 "
        "characters.",
    ),
    Rule(
        "retryCount between 0 and 5",
        "https://cloud.google.com/python/docs/reference/cloudscheduler/2.6.4/"
        "google.cloud.scheduler_v1beta1.types.RetryConfig (retry_count)",
        "Values greater than 5 and negative values are not allowed.",
    ),
    Rule(
        "an HTTP target's attemptDeadline between 15 seconds and 30 minutes",
        "https://google.stackql.io/providers/google/cloudscheduler/jobs/ (attemptDeadline, from "
        "the API's discovery document; Google's own page was cut off in the stored copy)",
        "For HTTP targets, the default is 3 minutes. The deadline must be in the interval [15 "
        "seconds, 30 minutes].",
    ),
    Rule(
        "an HTTP target's uri is an http or https URL",
        "https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs "
        "(HttpTarget.uri; the stored copy lists the field, its prose was cut off: the rule rests "
        "on the field's name and the issue's reading)",
        "HttpTarget ... uri",
    ),
)
_JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,500}")
MAX_DESCRIPTION = 500
MAX_RETRIES = 5
ATTEMPT_DEADLINE_S = (15.0, 1800.0)
_SECONDS = re.compile(r"(\d+(?:\.\d{1,9})?)s")


def problems(job: dict[str, Any]) -> list[str]:
    """What Cloud Scheduler would refuse in `job` (the API's JSON); [] when it would take it."""
    out = []
    job_id = str(job.get("name", "")).rsplit("/", 1)[-1]
    if not _JOB_ID.fullmatch(job_id):
        out.append(f"job id {job_id!r}: letters, digits, - or _ only, at most 500")
    if len(str(job.get("description", ""))) > MAX_DESCRIPTION:
        out.append(f"description: more than {MAX_DESCRIPTION} characters")
    retries = (job.get("retryConfig") or {}).get("retryCount", 0)
    if not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        out.append(f"retryConfig.retryCount {retries!r}: not between 0 and {MAX_RETRIES}")
    target = job.get("httpTarget")
    if isinstance(target, dict):
        if not str(target.get("uri", "")).startswith(("http://", "https://")):
            out.append(f"httpTarget.uri {target.get('uri')!r}: not an http(s) URL")
        deadline = job.get("attemptDeadline")
        if deadline is not None:
            m = _SECONDS.fullmatch(str(deadline))
            low, high = ATTEMPT_DEADLINE_S
            if m is None or not low <= float(m[1]) <= high:
                out.append(f"attemptDeadline {deadline!r}: not between 15s and 1800s")
    return out
