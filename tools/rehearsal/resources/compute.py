"""google_compute_firewall over Compute Engine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.rehearsal.resources.base import ApiError, Resource, State


class ComputeFirewall(Resource):
    type_name = "google_compute_firewall"
    api = "compute"
    updatable = frozenset(
        {
            "allow",
            "deny",
            "description",
            "source_ranges",
            "source_tags",
            "target_tags",
            "priority",
            "disabled",
            "log_config",
            "timeouts",
        }
    )

    def _path(self, state: State) -> str:
        return f"/compute/v1/projects/{self.project(state)}/global/firewalls"

    def _body(self, planned: State) -> dict[str, Any]:
        def rules(name: str) -> list[dict[str, Any]]:
            return [
                {"IPProtocol": r["protocol"], **({"ports": r["ports"]} if r.get("ports") else {})}
                for r in planned.get(name) or []
            ]

        body: dict[str, Any] = {
            "name": planned["name"],
            "network": planned["network"],
            "direction": planned.get("direction") or "INGRESS",
            "allowed": rules("allow"),
            "denied": rules("deny"),
            "sourceRanges": planned.get("source_ranges") or [],
            "sourceTags": planned.get("source_tags") or [],
            "targetTags": planned.get("target_tags") or [],
            "disabled": bool(planned.get("disabled")),
        }
        if planned.get("priority") is not None:
            body["priority"] = planned["priority"]
        if planned.get("description"):
            body["description"] = planned["description"]
        return {k: v for k, v in body.items() if v != []}

    def _computed(self, rule: Mapping[str, Any], state: State) -> State:
        project = self.project(state)
        return {
            "id": f"projects/{project}/global/firewalls/{rule['name']}",
            "self_link": rule.get("selfLink"),
            "creation_timestamp": rule.get("creationTimestamp"),
            "project": project,
            "direction": rule.get("direction"),
            "destination_ranges": rule.get("destinationRanges", []),
            "source_ranges": rule.get("sourceRanges", []),
            "enable_logging": False,
        }

    def _wait(self, op: Mapping[str, Any] | None) -> None:
        if op and op.get("status") != "DONE":
            raise ApiError(f"operation {op.get('name')} did not finish")
        if op and op.get("error"):
            raise ApiError(f"operation {op.get('name')} failed: {op['error']}")

    def create(self, planned: State) -> State:
        self._wait(self.client.call("POST", self._path(planned), self._body(planned)))
        rule = self.client.call("GET", f"{self._path(planned)}/{planned['name']}") or {}
        return self._computed(rule, planned)

    def read(self, state: State) -> State | None:
        rule = self.client.call("GET", f"{self._path(state)}/{state['name']}", missing_ok=True)
        return self._computed(rule, state) if rule else None

    def update(self, prior: State, planned: State) -> State:
        self._wait(
            self.client.call("PATCH", f"{self._path(prior)}/{prior['name']}", self._body(planned))
        )
        rule = self.client.call("GET", f"{self._path(planned)}/{planned['name']}") or {}
        return self._computed(rule, planned)

    def delete(self, state: State) -> None:
        self._wait(
            self.client.call("DELETE", f"{self._path(state)}/{state['name']}", missing_ok=True)
        )
