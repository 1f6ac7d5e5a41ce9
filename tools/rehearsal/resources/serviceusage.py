"""google_project_service over Service Usage."""

from __future__ import annotations

from tools.rehearsal.resources.base import Resource, State


class ProjectService(Resource):
    type_name = "google_project_service"
    api = "serviceusage"
    updatable = frozenset({"disable_on_destroy", "disable_dependent_services", "timeouts"})

    def _path(self, state: State) -> str:
        return f"/v1/projects/{self.project(state)}/services/{state['service']}"

    def create(self, planned: State) -> State:
        self.client.call("POST", self._path(planned) + ":enable", {})
        return {
            "id": f"{self.project(planned)}/{planned['service']}",
            "project": self.project(planned),
        }

    def read(self, state: State) -> State | None:
        found = self.client.call("GET", self._path(state)) or {}
        if found.get("state") != "ENABLED":
            return None
        return {"id": f"{self.project(state)}/{state['service']}", "project": self.project(state)}

    def update(self, prior: State, planned: State) -> State:
        return {}

    def delete(self, state: State) -> None:
        # Like the real provider: disable_on_destroy = false only forgets the service.
        if state.get("disable_on_destroy") is not False:
            self.client.call("POST", self._path(state) + ":disable", {})
