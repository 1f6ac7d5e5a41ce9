"""Loopback fake of Resource Manager's project IAM policy (google_project_iam_member)."""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer
from tools.rehearsal.fakes.iamrules import PROJECT_NUMBER

_PROJECT = r"/v1/projects/(?P<project>[^/:]+)"


class FakeResourceManager(ApiFake):
    api = "cloudresourcemanager"

    def routes(self) -> None:
        self.route("GET", _PROJECT, self._get_project)
        self.route("POST", _PROJECT + r":getIamPolicy", self._get_policy)
        self.route("POST", _PROJECT + r":setIamPolicy", self._set_policy)

    def _view(self, project: str) -> dict[str, Any]:
        bindings = self.inventory.policy(self.api, f"projects/{project}")
        return {"version": 1, "etag": f"BwY{len(self.inventory.calls)}", "bindings": bindings}

    def _get_project(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        project = m["project"]
        return 200, {"projectId": project, "projectNumber": PROJECT_NUMBER, "name": project}

    def _get_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        return 200, self._view(m["project"])

    def _set_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        bindings = list(((body or {}).get("policy") or {}).get("bindings") or [])
        refused = self.inventory.check_members(bindings)
        if refused:
            return refused
        self.inventory.policies[f"{self.api}/projects/{m['project']}"] = bindings
        return 200, self._view(m["project"])
