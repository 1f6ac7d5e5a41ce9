"""Loopback fake of the two reads the deadline and warm-path code make besides the TPU API:
Cloud Scheduler v1 jobs.get and Cloud Storage v1 objects.list (names only). Same shape as
tests/fake_tpu_api.py: a ThreadingHTTPServer on 127.0.0.1, scripted answers, recorded requests."""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_JOB = re.compile(r"^/v1/(projects/[^/]+/locations/[^/]+/jobs/[^/:]+)$")
_OBJECTS = re.compile(r"^/storage/v1/b/([^/]+)/o$")


def rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeSchedulerApi:
    """Answers GET of scripted jobs (404 otherwise) and lists scripted bucket objects."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self._jobs: dict[str, dict[str, Any]] = {}
        self._buckets: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeSchedulerApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

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

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                status, payload = fake._dispatch(url.path, query)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def _dispatch(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(("GET", path, query))
            if m := _JOB.match(path):
                job = self._jobs.get(m.group(1))
                if job is not None:
                    return 200, dict(job)
                return 404, {
                    "error": {"code": 404, "message": "Job not found.", "status": "NOT_FOUND"}
                }
            if m := _OBJECTS.match(path):
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
            return 404, {"error": {"code": 404, "message": f"fake has no route GET {path}"}}
