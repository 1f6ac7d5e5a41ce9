"""Loopback fake of Cloud Scheduler v1 jobs (google_cloud_scheduler_job), and its firing.

Like the real service: the API must be enabled, the job's OAuth identity must exist, the next
run (`scheduleTime`) follows the unix-cron line in the job's time zone, and a run sends the job's
HTTP request with an access token of that identity. `fire` is the rehearsal's clock: it runs a
job now, or at the time it is given, as Cloud Scheduler would at its minute, against the fake API
its URL names.

Unix-cron, as Cloud Scheduler takes it: five fields, minute hour day-of-month month
day-of-week, and no year (cloud.google.com/scheduler/docs/configuring/cron-job-schedules). A
line with its day and month fixed, as the deadline job's, matches once a year, every year: after
firing, the job's next run is the same minute a year later, and `fire(name, at=...)` runs it
then (issue 36 item 10: nothing about the job stops that second run; only the stop account's
grant, which ends after the deadline, makes it harmless).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from tools.rehearsal.fakes import iamrules, scheduler_rules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error

SERVICE = "cloudscheduler.googleapis.com"
_PARENT = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/jobs"
_JOB = _PARENT + r"/(?P<job>[^/:]+)"
# The cron lines the stacks write: minute hour day-of-month month, any day of the week.
_CRON = re.compile(r"(\d{1,2}|\*) (\d{1,2}|\*) (\d{1,2}|\*) (\d{1,2}|\*) \*")
_UTC_NAMES = ("Etc/UTC", "UTC")
_LOCATIONS = r"/v1/projects/(?P<project>[^/]+)/locations"
# The locations the fake answers locations.list with, and the only ones a job may be created
# in: those Cloud Scheduler's locations page lists (docs.cloud.google.com/scheduler/docs/locations,
# stored copy read 2026-12-01, "Americas"). The stored page stops after us-east4 and the release
# notes never add us-west4, the build log's region: it is not here (issue 21, defect 7).
LOCATIONS = (
    "northamerica-northeast1",
    "northamerica-northeast2",
    "southamerica-east1",
    "us-central1",
    "us-east1",
    "us-east4",
)


def rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def attempt_entry(name: str, uri: str, status: int, at: datetime) -> dict[str, Any]:
    """The Cloud Logging entry of one attempt: the monitored resource cloud_scheduler_job with
    its project_id, job_id and location labels, in the log cloudscheduler.googleapis.com/
    executions, an AttemptFinished payload and the answer's HTTP status. Its shape rests on the
    issue's reading and on public code reading these entries (code search, 2026-12-03): Google's
    Cloud Scheduler logging page is not in the stored corpus (tpudeploy/stopsoon.py)."""
    _, project, _, location, _, job_id = name.split("/")
    return {
        "logName": f"projects/{project}/logs/cloudscheduler.googleapis.com%2Fexecutions",
        "timestamp": rfc3339(at),
        "severity": "INFO" if status < 400 else "ERROR",
        "resource": {
            "type": "cloud_scheduler_job",
            "labels": {"project_id": project, "job_id": job_id, "location": location},
        },
        "httpRequest": {"status": status},
        "jsonPayload": {
            "@type": "type.googleapis.com/google.cloud.scheduler.logging.AttemptFinished",
            "jobName": name,
            "targetType": "HTTP",
            "url": uri,
        },
    }


def next_run(schedule: str, after: datetime) -> datetime | None:
    """The first minute strictly after `after` that matches `schedule` (None: not a line the
    fake understands). Searched minute by minute over two years, which covers a yearly line."""
    m = _CRON.fullmatch(schedule.strip())
    if m is None:
        return None
    fields = [None if f == "*" else int(f) for f in m.groups()]
    minute, hour, day, month = fields
    t = after.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    end = t + timedelta(days=731)
    while t < end:
        if month is not None and t.month != month:
            t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            continue
        if day is not None and t.day != day:
            t = t.replace(hour=0, minute=0) + timedelta(days=1)
            continue
        if hour is not None and t.hour != hour:
            t = t.replace(minute=0) + timedelta(hours=1)
            continue
        if minute is not None and t.minute != minute:
            t += timedelta(minutes=1)
            continue
        return t
    return None


class FakeCloudScheduler(ApiFake):
    api = "cloudscheduler"

    def __init__(self, inventory: Any = None, *, targets: Mapping[str, str] | None = None) -> None:
        # Where a job's URL host really goes: {"tpu.googleapis.com": "127.0.0.1:PORT"}.
        self.targets = dict(targets or {})
        # Where each attempt's log entry goes (FakeCloud: the Logging fake's seed).
        self.log_sink: Callable[[list[dict[str, Any]]], None] | None = None
        super().__init__(inventory)

    def routes(self) -> None:
        jobs, act_as = "cloudscheduler.jobs.", "iam.serviceAccounts.actAs"
        self.route("GET", _LOCATIONS, self._locations, ("cloudscheduler.locations.list",))
        self.route("POST", _PARENT, self._create, (jobs + "create", act_as))
        self.route("GET", _JOB, self._get, (jobs + "get",))
        self.route("PATCH", _JOB, self._patch, (jobs + "update", act_as))
        self.route("DELETE", _JOB, self._delete, (jobs + "delete",))
        self.route("POST", _JOB + r":pause", self._pause, (jobs + "pause",))
        self.route("POST", _JOB + r":resume", self._resume, (jobs + "enable",))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Any]:
        """The location (a create's parent), the job, and the account the job acts as."""
        project = m["project"]
        location = m.groupdict().get("location")
        if location is None:  # locations.list: checked on the project
            return [iamrules.project(project)]
        job_id = m.groupdict().get("job")
        stored = self.inventory.get(self.api, self._name(m)) if job_id else None
        job = {**(stored or {}), **dict(body or {})}
        found = [
            iamrules.located(iamrules.SCHEDULER_LOCATION, project, location),
            iamrules.located(iamrules.SCHEDULER_JOB, project, location, f"jobs/{job_id}"),
        ]
        email = ((job.get("httpTarget") or {}).get("oauthToken") or {}).get("serviceAccountEmail")
        if email:
            found.append(iamrules.service_account(project, str(email)))
        return found

    # ---- the API

    def _locations(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        disabled = self.inventory.require_service(m["project"], SERVICE)
        if disabled:
            return disabled
        base = f"projects/{m['project']}/locations"
        return 200, {
            "locations": [{"name": f"{base}/{loc}", "locationId": loc} for loc in LOCATIONS]
        }

    def _checked(self, project: str, job: dict[str, Any]) -> Answer | None:
        disabled = self.inventory.require_service(project, SERVICE)
        if disabled:
            return disabled
        if job.get("timeZone", "Etc/UTC") not in _UTC_NAMES:
            return api_error(400, "the fake Cloud Scheduler schedules in UTC only")
        if next_run(str(job.get("schedule", "")), datetime.now(UTC)) is None:
            return api_error(400, f"Schedule has more than one field or is invalid: {job}")
        refused = scheduler_rules.problems(job)
        if refused:
            return api_error(400, "; ".join(refused))
        email = ((job.get("httpTarget") or {}).get("oauthToken") or {}).get("serviceAccountEmail")
        if email and not self.inventory.service_account_exists(email):
            return api_error(400, f"Service account {email} does not exist.")
        return None

    def _scheduled(self, job: dict[str, Any]) -> dict[str, Any]:
        now = datetime.now(UTC)
        when = next_run(str(job["schedule"]), now - timedelta(minutes=1))
        job["userUpdateTime"] = rfc3339(now)
        if when is not None:
            job["scheduleTime"] = rfc3339(when)
        job.setdefault("state", "ENABLED")
        return job

    def _create(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        job = dict(body or {})
        parent = f"projects/{m['project']}/locations/{m['location']}"
        name = str(job.get("name", ""))
        if not name.startswith(f"{parent}/jobs/"):
            return api_error(400, f"job name {name!r} is not under {parent}")
        if m["location"] not in LOCATIONS:
            return api_error(
                404, f"Location {m['location']} is not found or access is unauthorized."
            )
        refused = self._checked(m["project"], job)
        if refused:
            return refused
        if self.inventory.get(self.api, name) is not None:
            return api_error(409, f"Job {name} already exists.")
        self.inventory.put(self.api, name, self._scheduled(job))
        return 200, job

    def _name(self, m: re.Match[str]) -> str:
        return f"projects/{m['project']}/locations/{m['location']}/jobs/{m['job']}"

    def _get(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        job = self.inventory.get(self.api, self._name(m))
        return (200, job) if job is not None else api_error(404, "Job not found.")

    def _patch(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        job = self.inventory.get(self.api, self._name(m))
        if job is None:
            return api_error(404, "Job not found.")
        changed = {**job, **{k: v for k, v in dict(body or {}).items() if k != "name"}}
        refused = self._checked(m["project"], changed)
        if refused:
            return refused
        job.update(self._scheduled(changed))
        return 200, job

    def _delete(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        if self.inventory.delete(self.api, self._name(m)) is None:
            return api_error(404, "Job not found.")
        return 200, {}

    def _pause(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        job = self.inventory.get(self.api, self._name(m))
        if job is None:
            return api_error(404, "Job not found.")
        job["state"] = "PAUSED"
        return 200, job

    def _resume(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        job = self.inventory.get(self.api, self._name(m))
        if job is None:
            return api_error(404, "Job not found.")
        job["state"] = "ENABLED"
        return 200, job

    # ---- the clock

    def job(self, name: str) -> dict[str, Any] | None:
        with self.inventory.locked() as inv:
            found = inv.get(self.api, name)
            return json.loads(json.dumps(found)) if found is not None else None

    def fire(self, name: str, *, at: datetime | None = None) -> int:
        """Run the job now (or at `at`: the rehearsal's clock, e.g. its next run a year later),
        as Cloud Scheduler does at its minute: its HTTP request, with an access token of its
        OAuth identity, to the fake its URL names; IAM conditions see the request as made at
        `at`. Returns the answer's status; afterwards the job shows its next run, a year later
        for a yearly line."""
        with self.inventory.locked() as inv:
            job = inv.get(self.api, name)
            if job is None:
                raise KeyError(f"no job {name}")
            target = job.get("httpTarget") or {}
            email = (target.get("oauthToken") or {}).get("serviceAccountEmail", "")
            token = inv.mint_token(f"serviceAccount:{email}", at=at) if email else ""
        url = urlsplit(str(target.get("uri", "")))
        host = self.targets.get(url.hostname or "")
        if host is None:
            raise ValueError(f"job {name} calls {url.hostname}, which no fake stands in for")
        request = urllib.request.Request(
            f"http://{host}{url.path}", method=str(target.get("httpMethod", "POST"))
        )
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                status = int(answer.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
        ran = at or datetime.now(UTC)
        if self.log_sink is not None:
            self.log_sink([attempt_entry(name, str(target.get("uri", "")), status, ran)])
        with self.inventory.locked() as inv:
            job = inv.get(self.api, name)
            if job is not None:
                # The rehearsal's clock jumped to the job's minute: its next run comes after that
                # minute (a year later for a yearly line), whatever the machine's clock says.
                due = datetime.fromisoformat(str(job["scheduleTime"]).replace("Z", "+00:00"))
                job["lastAttemptTime"] = rfc3339(ran)
                job["status"] = {} if status < 400 else {"code": status}
                when = next_run(str(job["schedule"]), max(due, ran))
                if when is not None:
                    job["scheduleTime"] = rfc3339(when)
        return status
