"""Loopback fake of Resource Manager's project IAM policy (google_project_iam_member) and of
projects.testIamPermissions (make preflight)."""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error
from tools.rehearsal.fakes.iamrules import PROJECT_NUMBER, Checked

_PROJECT = r"/v1/projects/(?P<project>[^/:]+)"

# What the real projects.testIamPermissions refuses, by its reference
# (https://cloud.google.com/resource-manager/reference/rest/v1/projects/testIamPermissions):
# the body is a TestIamPermissionsRequest, {"permissions": [string]}, and "Permissions with
# wildcards (such as * or storage.*) are not allowed". JSON-to-proto parsing refuses an unknown
# field or a wrong type with 400 INVALID_ARGUMENT.
TEST_IAM_REQUEST_FIELDS = frozenset({"permissions"})
PERMISSION = re.compile(r"[a-z][a-zA-Z0-9]*(\.[a-zA-Z0-9]+){2}")


class FakeResourceManager(ApiFake):
    api = "cloudresourcemanager"

    def routes(self) -> None:
        self.route("GET", _PROJECT, self._get_project, ("resourcemanager.projects.get",))
        # Both checked on the project (iamrules.CHECKED_ON, with the reference's rule): without
        # them a caller could rewrite the project's policy and grant itself anything.
        self.route(
            "POST",
            _PROJECT + r":getIamPolicy",
            self._get_policy,
            ("resourcemanager.projects.getIamPolicy",),
        )
        self.route(
            "POST",
            _PROJECT + r":setIamPolicy",
            self._set_policy,
            ("resourcemanager.projects.setIamPolicy",),
        )
        self.route("POST", _PROJECT + r":testIamPermissions", self._test_permissions)
        # The permissions the caller holds on every project; None: all of them (an owner).
        self.held: set[str] | None = None

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Checked]:
        return [iamrules.project(m["project"])]

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

    def _test_permissions(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        if not isinstance(body, dict) or set(body) - TEST_IAM_REQUEST_FIELDS:
            return api_error(400, "Invalid JSON payload received. Unknown name in the request.")
        asked = body.get("permissions", [])
        if not isinstance(asked, list) or not all(isinstance(p, str) for p in asked):
            return api_error(400, "Invalid value at 'permissions': a list of strings")
        for permission in asked:
            if "*" in permission or not PERMISSION.fullmatch(permission):
                return api_error(400, f"Permission {permission} is not valid.")
        held = [p for p in asked if self.held is None or p in self.held]
        # An empty answer is {} (proto3 omits an empty repeated field).
        return 200, ({"permissions": held} if held else {})
