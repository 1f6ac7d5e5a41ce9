"""Loopback fake of the TPU API: v2alpha1 queued resources (scripted states), v2 / v2alpha1 nodes
and their guest attributes.

The unit tests script it (states, faults, refusals); the rehearsal gives it the fake cloud's
inventory, so that a node needs the TPU API enabled and an existing service account, and every
request lands in the shared request log.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tools.rehearsal.fakes import tpu_rules
from tools.rehearsal.fakes.base import Answer, LoopbackServer
from tools.rehearsal.fakes.iamrules import (
    TPU_LOCATION,
    TPU_NODE,
    TPU_OPERATION,
    TPU_QUEUED_RESOURCE,
    Checked,
    located,
    service_account,
)
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.tpu_rules import PATCH_REBOOTS, apply_patch, qr_delete_refusal

# A queued resource by name: v2alpha1 (the project's client) and v2 (GA: the flex-start node's
# idle stop deletes it there, tpudeploy/render.py).
_QR_PATH = re.compile(r"^/v2(?:alpha1)?/(projects/[^/]+/locations/[^/]+)/queuedResources/([^/:]+)$")
_QR_COLLECTION = re.compile(r"^/v2alpha1/(projects/[^/]+/locations/[^/]+)/queuedResources$")
_NODE_PATH = re.compile(r"^/v2(?:alpha1)?/(projects/[^/]+/locations/[^/]+)/nodes/([^/:]+)$")
_NODE_COLLECTION = re.compile(r"^/v2(?:alpha1)?/(projects/([^/]+)/locations/[^/]+)/nodes$")
_GUEST_PATH = re.compile(
    r"^/v2(?:alpha1)?/(projects/[^/]+/locations/[^/]+)/nodes/([^/:]+):getGuestAttributes$"
)
# The permission each method on a node checks (iamrules.CHECKED_ON: nodes.get, nodes.delete and
# nodes.patch, the last tpu.nodes.update).
_NODE_VERBS = {"GET": "get", "DELETE": "delete", "PATCH": "update"}
_OP_PATH = re.compile(r"^/v2(?:alpha1)?/(projects/[^/]+/locations/[^/]+/operations/[^/:]+)$")
# Seed: flex-start v5litepod-1 was refused in europe-west4-a and -b whatever the quota.
_FLEX_REFUSED_ZONES = frozenset({"europe-west4-a", "europe-west4-b"})

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@dataclass
class Request:
    """One request as the fake saw it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fault:
    method: str
    path_contains: str
    status: int
    message: str
    remaining: int


@dataclass
class _QueuedResource:
    name: str
    body: dict[str, Any]
    states: list[Any]
    deleting_polls: int | None = None
    delete_refusals: list[tuple[int, str]] = field(default_factory=list)

    def current_state(self) -> dict[str, Any]:
        entry = self.states[0]
        return dict(entry) if isinstance(entry, dict) else {"state": entry}

    def advance(self) -> None:
        if len(self.states) > 1:
            self.states.pop(0)


class FakeTpuApi:
    """A ThreadingHTTPServer on 127.0.0.1 answering like tpu.googleapis.com v2alpha1.

    Each GET of a queued resource shows the next state of its scripted sequence (the last one
    sticks). DELETE turns it DELETING and it is gone (404) after `delete_polls` more GETs.
    """

    def __init__(
        self,
        *,
        delete_polls: int = 1,
        inventory: Inventory | None = None,
        node_ips: tuple[str, str] = ("10.182.0.2", "34.16.0.2"),
        create_states: list[Any] | None = None,
    ) -> None:
        self.requests: list[Request] = []
        self.delete_polls = delete_polls
        # (internal, external) address of every node: the rehearsal's nodes run on this machine.
        self.node_ips = node_ips
        self.inventory = inventory
        self.create_states = create_states or ["ACCEPTED", "ACTIVE"]
        self._guest: dict[str, dict[str, str]] = {}
        self._resources: dict[str, _QueuedResource] = {}
        self._nodes: dict[str, dict[str, Any]] = {}
        self._boots: dict[str, int] = {}
        self._scripts: dict[str, list[Any]] = {}
        self._faults: list[_Fault] = []
        self._operations: dict[str, dict[str, Any]] = {}
        self._create_op_errors: list[dict[str, Any]] = []
        # Capacity rules (tpu_rules.capacity_refusal): (zone, accelerator, provisioning) out of
        # stock, (region, provisioning) whose quota is spent.
        self.stockouts: set[tuple[str, str, str]] = set()
        self.spent_quotas: set[tuple[str, str]] = set()
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._server = LoopbackServer(self._serve)

    # ---- lifecycle

    @property
    def host(self) -> str:
        """host:port, the value for TPU_EMULATOR_HOST."""
        return self._server.host

    def start(self) -> FakeTpuApi:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> FakeTpuApi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- scripting

    def script_states(self, name: str, states: list[Any]) -> None:
        """States (str or full QueuedResourceState dict) shown by successive GETs of `name`.

        Applies to the existing resource, or to the next one created under that name.
        """
        with self._lock:
            if name in self._resources:
                self._resources[name].states = list(states)
            else:
                self._scripts[name] = list(states)

    def add_queued_resource(self, name: str, body: dict[str, Any], states: list[Any]) -> None:
        """Pretend `name` already exists with `body` (as the API echoes it) and `states`."""
        with self._lock:
            self._resources[name] = _QueuedResource(
                name, json.loads(json.dumps(body)), list(states)
            )

    def add_node(self, parent: str, node_id: str, node: dict[str, Any]) -> None:
        """A standalone TPU VM (the spot / on-demand path, no queued resource)."""
        with self._lock:
            self._nodes[f"{parent}/nodes/{node_id}"] = {
                **node,
                "name": f"{parent}/nodes/{node_id}",
            }

    def refuse_delete(self, name: str, status: int, message: str, times: int = 1) -> None:
        """The next `times` DELETEs of `name` answer `status` with `message`."""
        with self._lock:
            self._resources[name].delete_refusals.extend([(status, message)] * times)

    def inject(
        self, method: str, path_contains: str, status: int, message: str, times: int = 1
    ) -> None:
        """The next `times` requests matching method and path fragment answer `status`."""
        with self._lock:
            self._faults.append(_Fault(method, path_contains, status, message, times))

    def fail_next_create_operation(self, code: int, message: str) -> None:
        """The next create is accepted as an operation that finishes with this google.rpc error."""
        with self._lock:
            self._create_op_errors.append({"code": code, "message": message})

    def exists(self, name: str) -> bool:
        with self._lock:
            return name in self._resources

    def calls(self, method: str, path_contains: str = "") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.method == method and path_contains in r.path]

    # ---- routing

    def _serve(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        url = urlsplit(path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        return self._dispatch(method, url.path, query, body, headers)

    @staticmethod
    def _error(status: int, message: str) -> tuple[int, dict[str, Any]]:
        return status, {
            "error": {
                "code": status,
                "message": message,
                "status": _STATUS_NAMES.get(status, "UNKNOWN"),
            }
        }

    def _new_operation(self, parent: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
        name = f"{parent}/operations/operation-{next(self._ids)}"
        final: dict[str, Any] = {"name": name, "done": True}
        if error is not None:
            final["error"] = error
        else:
            final["response"] = {}
        self._operations[name] = final
        return {"name": name, "done": False, "metadata": {"verb": "create"}}

    def _dispatch(
        self, method: str, path: str, query: dict[str, str], body: Any, headers: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(Request(method, path, query, body, headers))
            refused = self._refuse_caller(method, path, headers, body)
            status, payload = refused or self._route(method, path, query, body)
            if self.inventory is not None:
                with self.inventory.locked() as inv:
                    inv.record("tpu", method, path, inv.principal(headers) or "?", status)
            return status, payload

    def _route(
        self, method: str, path: str, query: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any]]:
        for fault in self._faults:
            if fault.remaining > 0 and fault.method == method and fault.path_contains in path:
                fault.remaining -= 1
                return self._error(fault.status, fault.message)
        if method == "POST" and (m := _QR_COLLECTION.match(path)):
            return self._create(m.group(1), query, body)
        if m := _QR_PATH.match(path):
            name = f"{m.group(1)}/queuedResources/{m.group(2)}"
            if method == "GET":
                return self._get_qr(name)
            if method == "DELETE":
                return self._delete_qr(name, m.group(1), query.get("force") == "true")
        if method == "POST" and (m := _NODE_COLLECTION.match(path)):
            return self._create_node(m.group(1), m.group(2), query, body)
        if m := _NODE_PATH.match(path):
            if method == "GET":
                return self._get_node(m.group(1), m.group(2))
            if method == "DELETE":
                return self._delete_node(m.group(1), m.group(2))
            if method == "PATCH":
                return self._patch_node(m.group(1), m.group(2), query, body)
        if method in ("GET", "POST") and (m := _GUEST_PATH.match(path)):
            return self._guest_attributes(m.group(1), m.group(2), query, body)
        if method == "GET" and (m := _OP_PATH.match(path)):
            op = self._operations.get(m.group(1))
            return (200, op) if op else self._error(404, f"operation {m.group(1)} not found")
        return self._error(404, f"fake TPU API has no route {method} {path}")

    def _create(self, parent: str, query: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        qr_id = query.get("queuedResourceId")
        if not qr_id or not isinstance(body, dict):
            return self._error(400, "queuedResourceId and a JSON body are required")
        name = f"{parent}/queuedResources/{qr_id}"
        if name in self._resources:
            return self._error(409, f"Resource '{name}' already exists")
        if self._create_op_errors:
            return 200, self._new_operation(parent, self._create_op_errors.pop(0))
        for spec in body.get("tpu", {}).get("nodeSpec", []):
            refused = self._refuse_node(parent, spec.get("node", {}))
            zone = parent.rsplit("/", 1)[-1]
            accelerator = spec.get("node", {}).get("acceleratorType", "")
            flex = body.get("provisioningModel") == "FLEX_START"
            if refused is None and flex and zone in _FLEX_REFUSED_ZONES:
                refused = self._error(
                    400,
                    "FLEX_START provisioning model is not supported for accelerator type "
                    f'"{accelerator}"',
                )
            if refused is not None:
                return refused
        states = self._scripts.pop(name, list(self.create_states))
        self._resources[name] = _QueuedResource(name, json.loads(json.dumps(body)), states)
        return 200, self._new_operation(parent)

    def _get_qr(self, name: str) -> tuple[int, dict[str, Any]]:
        qr = self._resources.get(name)
        if qr is None:
            return self._error(404, f"Resource '{name}' was not found")
        if qr.deleting_polls is not None:
            if qr.deleting_polls <= 0:
                del self._resources[name]
                return self._error(404, f"Resource '{name}' was not found")
            qr.deleting_polls -= 1
            state: dict[str, Any] = {"state": "DELETING"}
        else:
            state = qr.current_state()
            qr.advance()
        payload = {**json.loads(json.dumps(qr.body)), "name": name, "state": state}
        if state.get("state") == "ACTIVE" and "runDuration" in payload:
            payload["runDuration"]["terminationTime"] = "2026-08-09T16:00:00Z"
        return 200, payload

    def _delete_qr(self, name: str, parent: str, force: bool) -> tuple[int, dict[str, Any]]:
        qr = self._resources.get(name)
        if qr is None:
            return self._error(404, f"Resource '{name}' was not found")
        if qr.delete_refusals:
            status, message = qr.delete_refusals.pop(0)
            return self._error(status, message)
        if qr.deleting_polls is None and (
            refusal := qr_delete_refusal(str(qr.current_state().get("state")), force)
        ):
            return self._error(400, refusal)
        if qr.deleting_polls is None:
            qr.deleting_polls = self.delete_polls
        return 200, self._new_operation(parent)

    # ---- nodes

    def _refuse_caller(
        self, method: str, path: str, headers: dict[str, str], body: Any = None
    ) -> tuple[int, dict[str, Any]] | None:
        """With an inventory: the caller needs each permission of the call on the resource
        iamrules.CHECKED_ON names (Cloud TPU provides no attributes to conditions and has no
        per-node policy: only a project grant reaches a node); creating a node with an account
        also needs actAs on it. The owner (no credentials) may do anything."""
        if self.inventory is None:
            return None
        needs: list[tuple[str, Checked]] = []
        if method == "POST" and (m := _NODE_COLLECTION.match(path)):
            project, location = m.group(2), m.group(1).rsplit("/", 1)[-1]
            needs.append(("tpu.nodes.create", located(TPU_LOCATION, project, location)))
            email = ((body or {}).get("serviceAccount") or {}).get("email") if body else None
            if email:
                needs.append(("iam.serviceAccounts.actAs", service_account(project, email)))
        elif (m := _NODE_PATH.match(path)) and method in _NODE_VERBS:
            project, location = m.group(1).split("/")[1], m.group(1).rsplit("/", 1)[-1]
            node = located(TPU_NODE, project, location, f"nodes/{m.group(2)}")
            needs.append((f"tpu.nodes.{_NODE_VERBS[method]}", node))
        elif method in ("GET", "POST") and (m := _GUEST_PATH.match(path)):
            # Reading a node's guest attributes is reading the node (iamrules.CHECKED_ON,
            # tpu.nodes.get): make wait and make status read them.
            project, location = m.group(1).split("/")[1], m.group(1).rsplit("/", 1)[-1]
            node = located(TPU_NODE, project, location, f"nodes/{m.group(2)}")
            needs.append(("tpu.nodes.get", node))
        elif method == "DELETE" and (m := _QR_PATH.match(path)):
            project, location = m.group(1).split("/")[1], m.group(1).rsplit("/", 1)[-1]
            resource = located(
                TPU_QUEUED_RESOURCE, project, location, f"queuedResources/{m.group(2)}"
            )
            needs.append(("tpu.queuedResources.delete", resource))
        elif method == "GET" and (m := _OP_PATH.match(path)):
            parts = m.group(1).split("/")
            needs.append(
                ("tpu.operations.get", located(TPU_OPERATION, parts[1], parts[3], parts[-1]))
            )
        if not needs:
            return None
        with self.inventory.locked() as inv:
            who = inv.principal(headers)
            if who is None:
                return self._error(401, "Request had invalid authentication credentials.")
            for permission, resource in needs:
                if not inv.check(who, permission, resource, inv.request_time(headers)):
                    return self._error(
                        403, f"Permission '{permission}' denied on resource '{resource.name}'"
                    )
        return None

    def preempt(self, name: str) -> bool:
        """What a spot preemption does to a standalone VM: PREEMPTED, and it stays so."""
        with self._lock:
            node = self._nodes.get(name)
            if node is None:
                return False
            node["state"] = "PREEMPTED"
            node["health"] = "UNHEALTHY_MAINTENANCE"
            return True

    def _refuse_node(self, parent: str, node: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """With an inventory: the TPU API must be enabled and the node's account must exist."""
        if self.inventory is None:
            return None
        project = parent.split("/")[1]
        with self.inventory.locked() as inv:
            disabled = inv.require_service(project, "tpu.googleapis.com")
            if disabled is not None:
                return disabled
            email = (node.get("serviceAccount") or {}).get("email")
            if email and not inv.service_account_exists(email):
                return self._error(400, f"Service account {email} does not exist.")
        return None

    def _node_view(self, name: str, node: dict[str, Any]) -> dict[str, Any]:
        internal, external = self.node_ips
        endpoint: dict[str, Any] = {"ipAddress": internal, "port": 8470}
        if (node.get("networkConfig") or {}).get("enableExternalIps", True):
            endpoint["accessConfig"] = {"externalIp": external}
        view = {
            **node,
            "name": name,
            "state": "READY",
            "health": "HEALTHY",
            "apiVersion": "V2",
            "networkEndpoints": [endpoint],
        }
        copied: dict[str, Any] = json.loads(json.dumps(view))
        return copied

    def _create_node(
        self, parent: str, project: str, query: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any]]:
        node_id = query.get("nodeId")
        if not node_id or not isinstance(body, dict):
            return self._error(400, "nodeId and a JSON body are required")
        name = f"{parent}/nodes/{node_id}"
        if name in self._nodes or self._derived_node(parent, node_id) is not None:
            return self._error(409, f"Resource '{name}' already exists")
        refused = self._refuse_node(parent, body)
        if refused is not None:
            return refused
        capacity = tpu_rules.capacity_refusal(
            body,
            parent.rsplit("/", 1)[-1],
            stockouts=self.stockouts,
            spent_quotas=self.spent_quotas,
            eid=next(self._ids),
        )
        if capacity is not None and capacity[0] == "quota":
            return self._error(capacity[1], capacity[2])
        if capacity is not None:  # accepted, then the operation fails: no node is left
            return 200, self._new_operation(parent, {"code": capacity[1], "message": capacity[2]})
        self._nodes[name] = self._node_view(name, body)
        self._boots[name] = self._boots.get(name, 0) + 1  # a new VM boots its startup script
        return 200, self._new_operation(parent)

    def _patch_node(
        self, parent: str, node_id: str, query: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any]]:
        name = f"{parent}/nodes/{node_id}"
        node = self._nodes.get(name)
        if node is None:
            return self._error(404, f"Resource '{name}' was not found")
        problem = apply_patch(node, query.get("updateMask", ""), body)
        if problem:
            return self._error(400, problem)
        if PATCH_REBOOTS:  # never (tpu_rules): the VM goes on with the script it booted with
            self._boots[name] += 1
        return 200, self._new_operation(parent)

    def boots(self, name: str) -> int:
        """How many times a VM of this name was created, so booted its startup script."""
        with self._lock:
            return self._boots.get(name, 0)

    def _delete_node(self, parent: str, node_id: str) -> tuple[int, dict[str, Any]]:
        name = f"{parent}/nodes/{node_id}"
        if self._nodes.pop(name, None) is None:
            if self._derived_node(parent, node_id) is not None:
                return self._error(
                    400, f"node {name} belongs to a queued resource: delete the queued resource"
                )
            return self._error(404, f"Resource '{name}' was not found")
        self._guest.pop(name, None)
        return 200, self._new_operation(parent)

    def _derived_node(self, parent: str, node_id: str) -> dict[str, Any] | None:
        """The VM of an ACTIVE queued resource (gone once the QR is deleting or gone)."""
        for qr in self._resources.values():
            specs = qr.body.get("tpu", {}).get("nodeSpec", [])
            if (
                specs
                and specs[0].get("nodeId") == node_id
                and specs[0].get("parent", parent) == parent
                and qr.deleting_polls is None
                and qr.current_state().get("state") == "ACTIVE"
            ):
                name = f"{parent}/nodes/{node_id}"
                return self._node_view(name, dict(specs[0].get("node", {})))
        return None

    def _get_node(self, parent: str, node_id: str) -> tuple[int, dict[str, Any]]:
        name = f"{parent}/nodes/{node_id}"
        standalone = self._nodes.get(name)
        if standalone is not None:
            return 200, dict(standalone)
        derived = self._derived_node(parent, node_id)
        if derived is not None:
            return 200, derived
        self._guest.pop(name, None)
        return self._error(404, f"Resource '{name}' was not found")

    def _guest_attributes(
        self, parent: str, node_id: str, query: dict[str, str], body: Any
    ) -> tuple[int, dict[str, Any]]:
        status, node = self._get_node(parent, node_id)
        if status != 200:
            return status, node
        name = f"{parent}/nodes/{node_id}"
        prefix = query.get("queryPath", "")
        if not prefix and isinstance(body, dict):
            prefix = str(body.get("queryPath", ""))
        items = [
            {"namespace": key.split("/", 1)[0], "key": key.split("/", 1)[1], "value": value}
            for key, value in sorted(self._guest.get(name, {}).items())
            if key.startswith(prefix)
        ]
        if not items:
            return self._error(404, f"no guest attributes under {prefix!r} on {name}")
        return 200, {"guestAttributes": [{"queryPath": prefix, "queryValue": {"items": items}}]}

    # ---- what the metadata server and the rehearsal need

    def node(self, name: str) -> dict[str, Any] | None:
        """The node `projects/P/locations/Z/nodes/N` as the API shows it, or None."""
        parent, _, node_id = name.rpartition("/nodes/")
        with self._lock:
            status, node = self._get_node(parent, node_id)
        return node if status == 200 else None

    def set_guest_attribute(self, name: str, key: str, value: str) -> bool:
        """What the guest agent does for a PUT to the metadata server's guest-attributes/."""
        with self._lock:
            if self.node(name) is None:
                return False
            self._guest.setdefault(name, {})[key] = value
            return True

    def guest_attribute(self, name: str, key: str) -> str | None:
        """What the node last published as `key` (e.g. tpudeploy/idle), or None."""
        with self._lock:
            return self._guest.get(name, {}).get(key)

    def billing(self) -> list[str]:
        """Queued resources and nodes that exist: what would still bill."""
        with self._lock:
            names = sorted(self._resources) + sorted(self._nodes)
            for qr in self._resources.values():
                for spec in qr.body.get("tpu", {}).get("nodeSpec", []):
                    parent = spec.get("parent", qr.name.split("/queuedResources/")[0])
                    if self._derived_node(parent, spec.get("nodeId", "")) is not None:
                        names.append(f"{parent}/nodes/{spec.get('nodeId')}")
            return names
