"""google_secret_manager_secret and its *_iam_member over Secret Manager."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.rehearsal.resources.base import IamMember, Resource, State, single_block


def _secret_name(state: State, project: str) -> str:
    secret = str(state["secret_id"])
    return secret if secret.startswith("projects/") else f"projects/{project}/secrets/{secret}"


class SecretManagerSecret(Resource):
    type_name = "google_secret_manager_secret"
    api = "secretmanager"
    updatable = frozenset({"labels", "annotations", "timeouts"})

    def _computed(self, secret: Mapping[str, Any], state: State) -> State:
        labels = self.labels(state)
        return {
            "id": secret["name"],
            "name": secret["name"],
            "project": self.project(state),
            "create_time": secret.get("createTime"),
            "effective_labels": labels,
            "terraform_labels": labels,
            "effective_annotations": dict(state.get("annotations") or {}),
        }

    def _replication(self, planned: State) -> dict[str, Any]:
        replication = single_block(planned, "replication")
        if replication.get("auto"):
            return {"automatic": {}}
        managed = (replication.get("user_managed") or [{}])[0]
        return {
            "userManaged": {
                "replicas": [{"location": r["location"]} for r in managed.get("replicas", [])]
            }
        }

    def create(self, planned: State) -> State:
        project = self.project(planned)
        body = {"replication": self._replication(planned), "labels": self.labels(planned)}
        secret = self.client.call(
            "POST",
            f"/v1/projects/{project}/secrets",
            body,
            query={"secretId": planned["secret_id"]},
        )
        return self._computed(secret or {}, planned)

    def read(self, state: State) -> State | None:
        secret = self.client.call("GET", f"/v1/{state['name']}", missing_ok=True)
        return self._computed(secret, state) if secret else None

    def update(self, prior: State, planned: State) -> State:
        body = {"labels": self.labels(planned), "annotations": planned.get("annotations") or {}}
        secret = self.client.call(
            "PATCH", f"/v1/{prior['name']}", body, query={"updateMask": "labels,annotations"}
        )
        return self._computed(secret or {}, planned)

    def delete(self, state: State) -> None:
        self.client.call("DELETE", f"/v1/{state['name']}", missing_ok=True)


class SecretManagerSecretIamMember(IamMember):
    type_name = "google_secret_manager_secret_iam_member"
    api = "secretmanager"

    def parent(self, state: State) -> str:
        return _secret_name(state, self.project(state))

    def get_policy(self, parent: str) -> dict[str, Any]:
        return self.client.call("POST", f"/v1/{parent}:getIamPolicy", {}) or {}

    def set_policy(self, parent: str, policy: dict[str, Any]) -> dict[str, Any]:
        return self.client.call("POST", f"/v1/{parent}:setIamPolicy", {"policy": policy}) or {}

    def create(self, planned: State) -> State:
        return {**super().create(planned), "project": self.project(planned)}

    def read(self, state: State) -> State | None:
        found = super().read(state)
        return {**found, "project": self.project(state)} if found else None
