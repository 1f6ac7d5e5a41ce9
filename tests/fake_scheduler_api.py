"""Loopback fake of the two reads the deadline and warm-path code make besides the TPU API:
Cloud Scheduler v1 jobs.get and Cloud Storage v1 objects.list (names only), served by the
fakes' shared tools.rehearsal.fakes.base.LoopbackServer: scripted answers, recorded requests."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tools.rehearsal.fakes.base import Answer, LoopbackServer, api_error

_JOB = re.compile(r"^/v1/(projects/[^/]+/locations/[^/]+/jobs/[^/:]+)$")
_OBJECTS = re.compile(r"^/storage/v1/b/([^/]+)/o$")


def rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeSchedulerApi:
    """Answers GET of scripted jobs (404 otherwise) and lists scripted bucket objects."""

    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, Any]] = {}
        self._buckets: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._route)

    @property
    def host(self) -> str:
        return self._server.host

    @property
    def requests(self) -> list[tuple[str, str, dict[str, str]]]:
        """(method, path, query) of each request, in order."""
        return [(r["method"], *_split(r["path"])) for r in self._server.requests]

    def __enter__(self) -> FakeSchedulerApi:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def set_job(
        self,
        name: str,
        *,
        schedule_time: datetime,
        last_attempt: datetime | None = None,
        state: str = "ENABLED",
    ) -> None:
        """A job as the API shows it: `schedule_time` is its next run."""
        job: dict[str, Any] = {
            "name": name,
            "state": state,
            "scheduleTime": rfc3339(schedule_time),
            "timeZone": "Etc/UTC",
        }
        if last_attempt is not None:
            job["lastAttemptTime"] = rfc3339(last_attempt)
        with self._lock:
            self._jobs[name] = job

    def fire(self, name: str) -> None:
        """The job ran at its scheduleTime: Cloud Scheduler then shows the next yearly run."""
        with self._lock:
            job = self._jobs[name]
            ran = datetime.fromisoformat(job["scheduleTime"].replace("Z", "+00:00"))
            job["lastAttemptTime"] = job["scheduleTime"]
            job["scheduleTime"] = rfc3339(ran.replace(year=ran.year + 1))

    def add_bucket(self, bucket: str, objects: list[str] | None = None) -> None:
        with self._lock:
            self._buckets[bucket] = list(objects or [])

    def _route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        url_path, query = _split(path)
        with self._lock:
            if method != "GET":
                return api_error(404, f"fake has no route {method} {url_path}")
            if m := _JOB.match(url_path):
                job = self._jobs.get(m.group(1))
                if job is not None:
                    return 200, dict(job)
                return api_error(404, "Job not found.")
            if m := _OBJECTS.match(url_path):
                names = self._buckets.get(m.group(1))
                if names is None:
                    return 404, {
                        "error": {"code": 404, "message": "The specified bucket does not exist."}
                    }
                prefix = query.get("prefix", "")
                hits = [n for n in names if n.startswith(prefix)][
                    : int(query.get("maxResults", 1000))
                ]
                return 200, ({"items": [{"name": n} for n in hits]} if hits else {})
            return api_error(404, f"fake has no route GET {url_path}")


def _split(path: str) -> tuple[str, dict[str, str]]:
    url = urlsplit(path)
    return url.path, {k: v[-1] for k, v in parse_qs(url.query).items()}
