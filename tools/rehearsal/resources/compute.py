"""google_compute_firewall, _router and _router_nat over Compute Engine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.rehearsal.resources.base import ApiError, Resource, State


def wait(op: Mapping[str, Any] | None) -> None:
    """Compute's operations: the fake's are DONE at once; an error is the provider's error."""
    if op and op.get("status") != "DONE":
        raise ApiError(f"operation {op.get('name')} did not finish")
    if op and op.get("error"):
        raise ApiError(f"operation {op.get('name')} failed: {op['error']}")


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
        wait(op)

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


class ComputeRouter(Resource):
    """google_compute_router: routers.insert / get / delete in the router's region."""

    type_name = "google_compute_router"
    api = "compute"
    updatable = frozenset({"description", "bgp", "timeouts"})

    def _path(self, state: State) -> str:
        region = state.get("region") or self.provider.region
        return f"/compute/v1/projects/{self.project(state)}/regions/{region}/routers"

    def _computed(self, router: Mapping[str, Any], state: State) -> State:
        region = state.get("region") or self.provider.region
        return {
            "id": f"projects/{self.project(state)}/regions/{region}/routers/{router['name']}",
            "self_link": router.get("selfLink"),
            "creation_timestamp": "2026-08-09T09:00:00.000-07:00",
            "project": self.project(state),
            "region": region,
        }

    def create(self, planned: State) -> State:
        body = {"name": planned["name"], "network": planned["network"]}
        wait(self.client.call("POST", self._path(planned), body))
        router = self.client.call("GET", f"{self._path(planned)}/{planned['name']}") or {}
        return self._computed(router, planned)

    def read(self, state: State) -> State | None:
        router = self.client.call("GET", f"{self._path(state)}/{state['name']}", missing_ok=True)
        return self._computed(router, state) if router else None

    def delete(self, state: State) -> None:
        self.client.call("DELETE", f"{self._path(state)}/{state['name']}", missing_ok=True)


class ComputeRouterNat(Resource):
    """google_compute_router_nat: as the real provider, a NAT is an entry of its router's `nats`,
    written with routers.patch (read, change the list, patch)."""

    type_name = "google_compute_router_nat"
    api = "compute"
    updatable = frozenset({"subnetwork", "nat_ip_allocate_option", "timeouts"})

    def _router(self, state: State) -> str:
        region = state.get("region") or self.provider.region
        return (
            f"/compute/v1/projects/{self.project(state)}/regions/{region}/routers/{state['router']}"
        )

    def _nat(self, planned: State) -> dict[str, Any]:
        return {
            "name": planned["name"],
            "natIpAllocateOption": planned.get("nat_ip_allocate_option") or "AUTO_ONLY",
            "sourceSubnetworkIpRangesToNat": planned["source_subnetwork_ip_ranges_to_nat"],
            "subnetworks": [
                {"name": s["name"], "sourceIpRangesToNat": s.get("source_ip_ranges_to_nat") or []}
                for s in planned.get("subnetwork") or []
            ],
        }

    def _write(self, state: State, nat: dict[str, Any] | None) -> None:
        router = self.client.call("GET", self._router(state))
        if router is None:
            raise ApiError(f"router {state['router']} not found")
        nats = [n for n in router.get("nats", []) if n.get("name") != state["name"]]
        nats += [nat] if nat else []
        self.client.call("PATCH", self._router(state), {"nats": nats})

    def _computed(self, state: State) -> State:
        region = state.get("region") or self.provider.region
        return {
            "id": f"{self.project(state)}/{region}/{state['router']}/{state['name']}",
            "project": self.project(state),
            "region": region,
        }

    def create(self, planned: State) -> State:
        self._write(planned, self._nat(planned))
        return self._computed(planned)

    def read(self, state: State) -> State | None:
        router = self.client.call("GET", self._router(state), missing_ok=True) or {}
        found = any(n.get("name") == state["name"] for n in router.get("nats", []))
        return self._computed(state) if found else None

    def update(self, prior: State, planned: State) -> State:
        self._write(planned, self._nat(planned))
        return self._computed(planned)

    def delete(self, state: State) -> None:
        if self.client.call("GET", self._router(state), missing_ok=True) is not None:
            self._write(state, None)


class ComputeSubnetwork(Resource):
    """google_compute_subnetwork (the Gateway's proxy-only subnet): subnetworks.insert / get /
    delete in its region; the fake refuses what Compute refuses of its range
    (tools/rehearsal/fakes/compute_rules.py)."""

    type_name = "google_compute_subnetwork"
    api = "compute"
    updatable = frozenset({"description", "timeouts"})

    def _path(self, state: State) -> str:
        region = state.get("region") or self.provider.region
        return f"/compute/v1/projects/{self.project(state)}/regions/{region}/subnetworks"

    def _computed(self, subnet: Mapping[str, Any], state: State) -> State:
        region = state.get("region") or self.provider.region
        return {
            "id": f"projects/{self.project(state)}/regions/{region}/subnetworks/{subnet['name']}",
            "self_link": subnet.get("selfLink"),
            "project": self.project(state),
            "region": region,
            "gateway_address": "",
            "creation_timestamp": "2026-08-09T09:00:00.000-07:00",
        }

    def create(self, planned: State) -> State:
        body = {
            "name": planned["name"],
            "network": planned["network"],
            "ipCidrRange": planned["ip_cidr_range"],
            **({"purpose": planned["purpose"]} if planned.get("purpose") else {}),
            **({"role": planned["role"]} if planned.get("role") else {}),
        }
        wait(self.client.call("POST", self._path(planned), body))
        subnet = self.client.call("GET", f"{self._path(planned)}/{planned['name']}") or {}
        return self._computed(subnet, planned)

    def read(self, state: State) -> State | None:
        subnet = self.client.call("GET", f"{self._path(state)}/{state['name']}", missing_ok=True)
        return self._computed(subnet, state) if subnet else None

    def delete(self, state: State) -> None:
        self.client.call("DELETE", f"{self._path(state)}/{state['name']}", missing_ok=True)
