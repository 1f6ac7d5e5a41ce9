"""google_project_iam_custom_role (IAM) and google_project_iam_member (Resource Manager): the
deadline job's one permission, granted at project level (Cloud TPU has no per-node IAM)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.rehearsal.resources.base import IamMember, Resource, State


class ProjectIamCustomRole(Resource):
    type_name = "google_project_iam_custom_role"
    api = "iam"
    updatable = frozenset({"title", "description", "permissions", "stage", "timeouts"})

    def _computed(self, role: Mapping[str, Any], project: str) -> State:
        return {
            "id": role["name"],
            "name": role["name"],
            "project": project,
            "deleted": bool(role.get("deleted")),
        }

    def _role(self, planned: State) -> dict[str, Any]:
        return {
            "title": planned.get("title") or "",
            "description": planned.get("description") or "",
            "includedPermissions": sorted(planned.get("permissions") or []),
            "stage": planned.get("stage") or "GA",
        }

    def create(self, planned: State) -> State:
        project = self.project(planned)
        body = {"roleId": planned["role_id"], "role": self._role(planned)}
        role = self.client.call("POST", f"/v1/projects/{project}/roles", body) or {}
        return self._computed(role, project)

    def read(self, state: State) -> State | None:
        project = self.project(state)
        path = f"/v1/projects/{project}/roles/{state['role_id']}"
        role = self.client.call("GET", path, missing_ok=True)
        return self._computed(role, project) if role else None

    def update(self, prior: State, planned: State) -> State:
        project = self.project(planned)
        path = f"/v1/projects/{project}/roles/{planned['role_id']}"
        role = self.client.call("PATCH", path, self._role(planned)) or {}
        return self._computed(role, project)

    def delete(self, state: State) -> None:
        path = f"/v1/projects/{self.project(state)}/roles/{state['role_id']}"
        self.client.call("DELETE", path, missing_ok=True)


class ProjectIamMember(IamMember):
    type_name = "google_project_iam_member"
    api = "cloudresourcemanager"

    def parent(self, state: State) -> str:
        return self.project(state)

    def get_policy(self, parent: str) -> dict[str, Any]:
        return self.client.call("POST", f"/v1/projects/{parent}:getIamPolicy", {}) or {}

    def set_policy(self, parent: str, policy: dict[str, Any]) -> dict[str, Any]:
        body = {"policy": policy}
        return self.client.call("POST", f"/v1/projects/{parent}:setIamPolicy", body) or {}
