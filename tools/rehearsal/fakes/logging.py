"""Loopback fake of the Cloud Logging API v2: entries:list over entries a test seeds, and the
log-based metrics (google_logging_metric) a stack declares.

Like the real API: the service must be enabled in each project read; a request body or a filter
the API refuses gets its 400 (fakes/logging_rules.py: the filter is parsed by the query
language's grammar and evaluated, never matched as text); the caller needs
logging.logEntries.list on every project it names (roles/logging.viewer); pages follow
pageToken, which must come back with the other parameters unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error
from tools.rehearsal.fakes.discovery_rules import check
from tools.rehearsal.fakes.iamrules import CHECKED_ON, PROJECT, Checked
from tools.rehearsal.fakes.logging_rules import (
    DEFAULT_PAGE_SIZE,
    LOGGING,
    MAX_PAGE,
    FilterError,
    parse_filter,
    request_problems,
)

SERVICE = "logging.googleapis.com"
LIST = "logging.logEntries.list"
# "Authorization requires ... logging.logEntries.list" on the resources named (the entries.list
# reference): a project's entries, on the project. The log-based metrics' permissions likewise
# name the parent project (projects.metrics.create: "The resource name of the project in which
# to create the metric").
CHECKED_ON[LIST] = PROJECT
for _verb in ("create", "get", "update", "delete"):
    CHECKED_ON[f"logging.logMetrics.{_verb}"] = PROJECT


def project_of(entry: dict[str, Any]) -> str:
    """projects/P/logs/ID -> P."""
    parts = str(entry.get("logName", "")).split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "projects" else ""


class FakeLogging(ApiFake):
    api = "logging"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.entries: list[dict[str, Any]] = []
        self._pages: dict[str, tuple[dict[str, Any], int]] = {}
        super().__init__(*args, **kwargs)

    def seed(self, entries: list[dict[str, Any]]) -> None:
        """Entries as LogEntry JSON (logName, timestamp, labels, resource, *Payload)."""
        with self.inventory.locked():
            self.entries += entries

    def routes(self) -> None:
        self.route("POST", r"/v2/entries:list", self._list)
        metrics = r"/v2/projects/(?P<project>[^/]+)/metrics"
        one = metrics + r"/(?P<id>[^:]+)"
        self.route("POST", metrics, self._create_metric, ("logging.logMetrics.create",))
        self.route("GET", one, self._get_metric, ("logging.logMetrics.get",))
        self.route("PUT", one, self._update_metric, ("logging.logMetrics.update",))
        self.route("DELETE", one, self._delete_metric, ("logging.logMetrics.delete",))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Checked]:
        return [iamrules.project(m["project"])]

    def _list(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        found = request_problems(body)
        if found:
            return api_error(400, "; ".join(found))
        projects = [str(n).split("/")[1] for n in body["resourceNames"]]
        denied = self.refused(who, (LIST,), [iamrules.project(p) for p in projects])
        if denied is not None:
            return denied
        for project in projects:
            disabled = self.inventory.require_service(project, SERVICE)
            if disabled is not None:
                return disabled
        try:
            matches = parse_filter(str(body.get("filter", "")))
        except FilterError as exc:
            return api_error(400, f"Invalid filter: {exc}")
        params = {k: v for k, v in body.items() if k != "pageToken"}
        offset = 0
        if "pageToken" in body:
            issued = self._pages.get(str(body["pageToken"]))
            if issued is None or issued[0] != params:
                return api_error(400, "page_token does not match the request's other parameters")
            offset = issued[1]
        selected = [e for e in self.entries if project_of(e) in projects and matches(e)]
        selected.sort(
            key=lambda e: (str(e.get("timestamp", "")), str(e.get("insertId", ""))),
            reverse=body.get("orderBy") == "timestamp desc",
        )
        size = min(int(body.get("pageSize") or DEFAULT_PAGE_SIZE), MAX_PAGE)
        page = selected[offset : offset + size]
        answer: dict[str, Any] = {"entries": page} if page else {}
        if offset + size < len(selected):
            token = f"page-{self.inventory.next_id()}"
            self._pages[token] = (params, offset + size)
            answer["nextPageToken"] = token
        return 200, answer

    def _metric_name(self, m: re.Match[str]) -> str:
        return f"projects/{m['project']}/metrics/{m['id']}"

    def _refused_metric(self, body: Any) -> Answer | None:
        found = check(LOGGING["schemas"], "LogMetric", body)
        if isinstance(body, dict) and not body.get("filter"):
            found.append("LogMetric.filter is required")
        if isinstance(body, dict) and body.get("filter"):
            try:
                parse_filter(str(body["filter"]))
            except FilterError as exc:
                found.append(f"LogMetric.filter: {exc}")
        return api_error(400, "; ".join(found)) if found else None

    def _create_metric(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        disabled = self.inventory.require_service(m["project"], SERVICE)
        if disabled is not None:
            return disabled
        bad = self._refused_metric(body)
        if bad is not None:
            return bad
        name = f"projects/{m['project']}/metrics/{body.get('name', '')}"
        if self.inventory.get("logging", name) is not None:
            return api_error(409, f"Metric {body.get('name')} already exists")
        self.inventory.put("logging", name, dict(body))
        return 200, body

    def _get_metric(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        found = self.inventory.get("logging", self._metric_name(m))
        if found is None:
            return api_error(404, f"Metric {m['id']} does not exist")
        return 200, found

    def _update_metric(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        bad = self._refused_metric(body)
        if bad is not None:
            return bad
        self.inventory.put("logging", self._metric_name(m), dict(body))
        return 200, body

    def _delete_metric(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        if self.inventory.delete("logging", self._metric_name(m)) is None:
            return api_error(404, f"Metric {m['id']} does not exist")
        return 200, {}
