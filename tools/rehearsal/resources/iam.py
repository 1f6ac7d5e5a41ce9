"""google_service_account over IAM."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.rehearsal.resources.base import Resource, State


class ServiceAccount(Resource):
    type_name = "google_service_account"
    api = "iam"
    updatable = frozenset({"display_name", "description", "timeouts"})

    def _computed(self, account: Mapping[str, Any], project: str) -> State:
        email = account["email"]
        return {
            "id": account["name"],
            "name": account["name"],
            "email": email,
            "unique_id": account["uniqueId"],
            "member": f"serviceAccount:{email}",
            "project": project,
        }

    def create(self, planned: State) -> State:
        project = self.project(planned)
        body = {
            "accountId": planned["account_id"],
            "serviceAccount": {
                "displayName": planned.get("display_name") or "",
                "description": planned.get("description") or "",
            },
        }
        account = self.client.call("POST", f"/v1/projects/{project}/serviceAccounts", body) or {}
        return self._computed(account, project)

    def read(self, state: State) -> State | None:
        account = self.client.call("GET", f"/v1/{state['name']}", missing_ok=True)
        return self._computed(account, self.project(state)) if account else None

    def update(self, prior: State, planned: State) -> State:
        body = {
            "serviceAccount": {
                "displayName": planned.get("display_name") or "",
                "description": planned.get("description") or "",
            },
            "updateMask": "displayName,description",
        }
        account = self.client.call("PATCH", f"/v1/{prior['name']}", body) or {}
        return self._computed(account, self.project(planned))

    def delete(self, state: State) -> None:
        self.client.call("DELETE", f"/v1/{state['name']}", missing_ok=True)
