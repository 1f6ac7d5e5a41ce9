"""google_tpu_v2_vm over the TPU v2 API."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tools.rehearsal.resources.base import ApiError, Resource, State, camel, single_block


class TpuV2Vm(Resource):
    type_name = "google_tpu_v2_vm"
    api = "tpu"
    # As the real provider: these change in place with one PATCH and an updateMask, everything
    # else replaces the node (resourceTpuV2VmUpdate, google-beta/services/tpuv2/
    # resource_tpu_v2_vm.go: description, data_disks, metadata, tags, effective_labels).
    updatable = frozenset(
        {"description", "data_disks", "metadata", "tags", "labels", "effective_labels", "timeouts"}
    )
    _MASK = (
        ("description", "description"),
        ("data_disks", "dataDisks"),
        ("metadata", "metadata"),
        ("tags", "tags"),
        ("labels", "labels"),
    )

    def _zone(self, state: State) -> str:
        zone = state.get("zone") or self.provider.zone
        if not zone:
            raise ApiError("google_tpu_v2_vm: no zone: set zone or the provider's zone")
        return str(zone)

    def _parent(self, state: State) -> str:
        return f"projects/{self.project(state)}/locations/{self._zone(state)}"

    def _body(self, planned: State) -> dict[str, Any]:
        body: dict[str, Any] = {
            "acceleratorType": planned.get("accelerator_type") or "v2-8",
            "runtimeVersion": planned["runtime_version"],
            "labels": self.labels(planned),
            "metadata": planned.get("metadata") or {},
            "tags": planned.get("tags") or [],
        }
        if planned.get("description"):
            body["description"] = planned["description"]
        for block, key in (
            ("network_config", "networkConfig"),
            ("scheduling_config", "schedulingConfig"),
            ("shielded_instance_config", "shieldedInstanceConfig"),
            ("accelerator_config", "acceleratorConfig"),
        ):
            value = single_block(planned, block)
            if value:
                body[key] = camel(value)
        account = single_block(planned, "service_account")
        if account:
            body["serviceAccount"] = {"email": account.get("email"), "scope": account.get("scope")}
        return body

    def _computed(self, node: Mapping[str, Any], state: State) -> State:
        labels = self.labels(state)
        endpoints = [
            {
                "ip_address": e.get("ipAddress"),
                "port": e.get("port"),
                "access_config": (
                    [{"external_ip": e["accessConfig"]["externalIp"]}]
                    if e.get("accessConfig")
                    else []
                ),
            }
            for e in node.get("networkEndpoints") or []
        ]
        return {
            "id": node["name"],
            "project": self.project(state),
            "zone": self._zone(state),
            "accelerator_type": node.get("acceleratorType"),
            "api_version": node.get("apiVersion"),
            "cidr_block": node.get("cidrBlock"),
            "state": node.get("state"),
            "health": node.get("health"),
            "health_description": node.get("healthDescription"),
            "network_endpoints": endpoints,
            "effective_labels": labels,
            "terraform_labels": labels,
            "multislice_node": bool(node.get("multisliceNode")),
            "queued_resource": node.get("queuedResource"),
            "symptoms": [],
        }

    def create(self, planned: State) -> State:
        parent = self._parent(planned)
        op = self.client.call(
            "POST", f"/v2/{parent}/nodes", self._body(planned), query={"nodeId": planned["name"]}
        )
        self._wait_operation(op or {})
        node = self._wait_ready(f"{parent}/nodes/{planned['name']}")
        return self._computed(node, planned)

    def _wait_operation(self, op: Mapping[str, Any]) -> None:
        """As the real provider: poll the create's operation, and fail with its error in the
        provider's words (TpuV2OperationWaitTime; relayed as "Error waiting to create Vm: Error
        waiting for Creating Vm: Error code 8, message: There is no more capacity in the zone
        ...", hashicorp/terraform-provider-google#21243). The resource is then not in state."""
        name = op.get("name")
        for _ in range(60):
            if not name or op.get("done"):
                break
            time.sleep(0.2)
            op = self.client.call("GET", f"/v2/{name}") or {}
        error = op.get("error")
        if error:
            raise ApiError(
                "Error waiting to create Vm: Error waiting for Creating Vm: Error code "
                f"{error.get('code')}, message: {error.get('message')}"
            )

    def _wait_ready(self, name: str) -> dict[str, Any]:
        for _ in range(60):
            node = self.client.call("GET", f"/v2/{name}") or {}
            if node.get("state") == "READY":
                return node
            time.sleep(0.5)
        raise ApiError(f"node {name} did not become READY")

    def read(self, state: State) -> State | None:
        node = self.client.call(
            "GET", f"/v2/{self._parent(state)}/nodes/{state['name']}", missing_ok=True
        )
        return self._computed(node, state) if node else None

    def update(self, prior: State, planned: State) -> State:
        mask = [api for attr, api in self._MASK if prior.get(attr) != planned.get(attr)]
        name = f"{self._parent(prior)}/nodes/{prior['name']}"
        if mask:
            self.client.call(
                "PATCH", f"/v2/{name}", self._body(planned), query={"updateMask": ",".join(mask)}
            )
        node = self.client.call("GET", f"/v2/{name}") or {}
        return self._computed(node, planned)

    def delete(self, state: State) -> None:
        name = f"{self._parent(state)}/nodes/{state['name']}"
        self.client.call("DELETE", f"/v2/{name}", missing_ok=True)
        for _ in range(60):
            if self.client.call("GET", f"/v2/{name}", missing_ok=True) is None:
                return
            time.sleep(0.5)
        raise ApiError(f"node {name} was not deleted")
