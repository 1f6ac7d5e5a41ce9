"""Loopback fake of IAM: service accounts and project custom roles."""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error
from tools.rehearsal.fakes.iamrules import Checked
from tpudeploy.names import SERVICE_ACCOUNT_ID_RE, service_account_email

_COLLECTION = r"/v1/projects/(?P<project>[^/]+)/serviceAccounts"
_ACCOUNT = _COLLECTION + r"/(?P<email>[^/:]+)"
_ROLES = r"/v1/projects/(?P<project>[^/]+)/roles"
_ROLE = _ROLES + r"/(?P<role>[^/:]+)"
# Custom role ids: letters, digits, '_' and '.', 3 to 64 characters (IAM's rule).
_ROLE_ID = re.compile(r"[a-zA-Z0-9_.]{3,64}")


class FakeIam(ApiFake):
    api = "iam"

    def routes(self) -> None:
        # The permissions of each method (iamrules.CHECKED_ON, with IAM's REST reference):
        # account create on the project, the rest on the account; custom roles on the project.
        self.route("POST", _COLLECTION, self._create, ("iam.serviceAccounts.create",))
        self.route("GET", _ACCOUNT, self._get, ("iam.serviceAccounts.get",))
        self.route("PATCH", _ACCOUNT, self._patch, ("iam.serviceAccounts.update",))
        self.route("DELETE", _ACCOUNT, self._delete, ("iam.serviceAccounts.delete",))
        # google_service_account_iam_member, and the bootstrap's actAs grants.
        self.route(
            "POST",
            _ACCOUNT + r":getIamPolicy",
            self._get_policy,
            ("iam.serviceAccounts.getIamPolicy",),
        )
        self.route(
            "POST",
            _ACCOUNT + r":setIamPolicy",
            self._set_policy,
            ("iam.serviceAccounts.setIamPolicy",),
        )
        self.route("POST", _ROLES, self._create_role, ("iam.roles.create",))
        self.route("GET", _ROLE, self._get_role, ("iam.roles.get",))
        self.route("PATCH", _ROLE, self._patch_role, ("iam.roles.update",))
        self.route("DELETE", _ROLE, self._delete_role, ("iam.roles.delete",))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Checked]:
        """The project (account create, custom roles) and the account the path names."""
        project = m["project"]
        email = m.groupdict().get("email")
        if project == "-" and email:
            # "projects/-" lets IAM infer the project from the account (REST reference, name):
            # a user-managed account's email names it (ID@PROJECT.iam.gserviceaccount.com).
            project = email.partition("@")[2].split(".", 1)[0]
        found = [iamrules.project(project)]
        return found + ([iamrules.service_account(project, email)] if email else [])

    def _create(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        project = m["project"]
        disabled = self.inventory.require_service(project, "iam.googleapis.com")
        if disabled:
            return disabled
        account_id = str((body or {}).get("accountId", ""))
        if not SERVICE_ACCOUNT_ID_RE.fullmatch(account_id):
            return api_error(
                400, f"accountId {account_id!r} must match {SERVICE_ACCOUNT_ID_RE.pattern}"
            )
        email = service_account_email(account_id, project)
        name = f"projects/{project}/serviceAccounts/{email}"
        if self.inventory.get(self.api, name) is not None:
            return api_error(409, f"Service account {account_id} already exists within project.")
        details = (body or {}).get("serviceAccount") or {}
        account = {
            "name": name,
            "projectId": project,
            "uniqueId": str(100000000000000000000 + self.inventory.next_id()),
            "email": email,
            "displayName": details.get("displayName", ""),
            "description": details.get("description", ""),
            "oauth2ClientId": str(100000000000000000000 + self.inventory.next_id()),
        }
        self.inventory.put(self.api, name, account)
        return 200, account

    def _account(self, m: re.Match[str]) -> tuple[str, dict[str, Any] | None]:
        name = f"projects/{m['project']}/serviceAccounts/{m['email']}"
        return name, self.inventory.get(self.api, name)

    def _get(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        _, account = self._account(m)
        if account is None:
            return api_error(404, f"Unknown service account {m['email']}")
        return 200, account

    def _patch(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        _, account = self._account(m)
        if account is None:
            return api_error(404, f"Unknown service account {m['email']}")
        changes = (body or {}).get("serviceAccount") or {}
        for key in str((body or {}).get("updateMask", "")).split(","):
            if key in ("displayName", "description"):
                account[key] = changes.get(key, "")
        return 200, account

    def _delete(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, account = self._account(m)
        if account is None:
            return api_error(404, f"Unknown service account {m['email']}")
        self.inventory.delete(self.api, name)
        return 200, {}

    def _get_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, account = self._account(m)
        if account is None:
            return api_error(404, f"Unknown service account {m['email']}")
        return 200, {
            "version": 1,
            "etag": "BwYsa",
            "bindings": self.inventory.policy(self.api, name),
        }

    def _set_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, account = self._account(m)
        if account is None:
            return api_error(404, f"Unknown service account {m['email']}")
        bindings = list(((body or {}).get("policy") or {}).get("bindings") or [])
        refused = self.inventory.check_members(bindings)
        if refused:
            return refused
        policy = self.inventory.policy(self.api, name)
        policy[:] = bindings
        return 200, {"version": 1, "etag": "BwYsa", "bindings": policy}

    # ---- custom roles (google_project_iam_custom_role)

    def _create_role(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        project = m["project"]
        disabled = self.inventory.require_service(project, "iam.googleapis.com")
        if disabled:
            return disabled
        role_id = str((body or {}).get("roleId", ""))
        if not _ROLE_ID.fullmatch(role_id):
            return api_error(400, f"roleId {role_id!r} must match {_ROLE_ID.pattern}")
        name = f"projects/{project}/roles/{role_id}"
        if self.inventory.get(self.api, name) is not None:
            return api_error(409, f"A role named {role_id} in projects/{project} already exists.")
        details = (body or {}).get("role") or {}
        role = {
            "name": name,
            "title": details.get("title", ""),
            "description": details.get("description", ""),
            "includedPermissions": sorted(details.get("includedPermissions") or []),
            "stage": details.get("stage", "GA"),
            "etag": "BwYrole",
        }
        self.inventory.put(self.api, name, role)
        return 200, role

    def _get_role(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        role = self.inventory.get(self.api, f"projects/{m['project']}/roles/{m['role']}")
        return (200, role) if role is not None else api_error(404, f"Role {m['role']} not found")

    def _patch_role(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        role = self.inventory.get(self.api, f"projects/{m['project']}/roles/{m['role']}")
        if role is None:
            return api_error(404, f"Role {m['role']} not found")
        changes = dict(body or {})
        for key in ("title", "description", "includedPermissions", "stage"):
            if key in changes:
                role[key] = changes[key]
        return 200, role

    def _delete_role(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name = f"projects/{m['project']}/roles/{m['role']}"
        role = self.inventory.delete(self.api, name)
        if role is None:
            return api_error(404, f"Role {m['role']} not found")
        return 200, {**role, "deleted": True}
