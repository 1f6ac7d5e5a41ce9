"""Loopback fake of Service Usage: which APIs are enabled in a project (google_project_service)."""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer
from tools.rehearsal.fakes.iamrules import Checked

_SERVICE = r"/v1/projects/(?P<project>[^/]+)/services/(?P<service>[^/:]+)"


class FakeServiceUsage(ApiFake):
    api = "serviceusage"

    def routes(self) -> None:
        # Each on the project (iamrules.CHECKED_ON; Service Usage's access-control page).
        self.route("GET", _SERVICE, self._get, ("serviceusage.services.get",))
        self.route("POST", _SERVICE + ":enable", self._enable, ("serviceusage.services.enable",))
        self.route("POST", _SERVICE + ":disable", self._disable, ("serviceusage.services.disable",))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Checked]:
        return [iamrules.project(m["project"])]

    def _view(self, project: str, service: str) -> dict[str, Any]:
        on = service in self.inventory.enabled.get(project, set())
        return {
            "name": f"projects/{project}/services/{service}",
            "parent": f"projects/{project}",
            "config": {"name": service},
            "state": "ENABLED" if on else "DISABLED",
        }

    def _get(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        return 200, self._view(m["project"], m["service"])

    def _enable(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        self.inventory.enable(m["project"], m["service"])
        return 200, self.operation(
            f"projects/{m['project']}", {"service": self._view(m["project"], m["service"])}
        )

    def _disable(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        self.inventory.enabled.get(m["project"], set()).discard(m["service"])
        return 200, self.operation(
            f"projects/{m['project']}", {"service": self._view(m["project"], m["service"])}
        )
