"""Loopback fake of IAM service accounts (google_service_account)."""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error
from tpudeploy.names import SERVICE_ACCOUNT_ID_RE, service_account_email

_COLLECTION = r"/v1/projects/(?P<project>[^/]+)/serviceAccounts"
_ACCOUNT = _COLLECTION + r"/(?P<email>[^/:]+)"


class FakeIam(ApiFake):
    api = "iam"

    def routes(self) -> None:
        self.route("POST", _COLLECTION, self._create)
        self.route("GET", _ACCOUNT, self._get)
        self.route("PATCH", _ACCOUNT, self._patch)
        self.route("DELETE", _ACCOUNT, self._delete)

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
