"""Loopback fake of Compute Engine firewall rules (google_compute_firewall), networks, Cloud
Routers and their NATs, and subnetworks. Its NAT and subnet refusals are
tools/rehearsal/fakes/compute_rules.py, with sources."""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes import compute_rules, iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error

_PROJECT = r"/compute/v1/projects/(?P<project>[^/]+)/global"
_FIREWALLS = _PROJECT + r"/firewalls"
_FIREWALL = _FIREWALLS + r"/(?P<name>[^/]+)"
_NETWORK = _PROJECT + r"/networks/(?P<name>[^/]+)"
_OPERATION = _PROJECT + r"/operations/(?P<name>[^/]+)"
_ROUTERS = r"/compute/v1/projects/(?P<project>[^/]+)/regions/(?P<region>[^/]+)/routers"
_ROUTER = _ROUTERS + r"/(?P<name>[^/]+)"
_SUBNETS = r"/compute/v1/projects/(?P<project>[^/]+)/regions/(?P<region>[^/]+)/subnetworks"
_SUBNET = _SUBNETS + r"/(?P<name>[^/]+)"
# Every new project gets the auto-mode "default" network (DESIGN: it allows SSH from anywhere).
DEFAULT_NETWORKS = ("default",)


class FakeCompute(ApiFake):
    api = "compute"

    def routes(self) -> None:
        # A rule's create, patch and delete also change its network's policy (iamrules).
        fw, policy = "compute.firewalls.", "compute.networks.updatePolicy"
        self.route("POST", _FIREWALLS, self._insert, (fw + "create", policy))
        self.route("GET", _FIREWALL, self._get, (fw + "get",))
        self.route("PATCH", _FIREWALL, self._patch, (fw + "update", policy))
        self.route("DELETE", _FIREWALL, self._delete, (fw + "delete", policy))
        self.route("GET", _NETWORK, self._network, ("compute.networks.get",))
        self.route("GET", _OPERATION, self._get_operation, ("compute.globalOperations.get",))
        routers = "compute.routers."
        self.route("POST", _ROUTERS, self._insert_router, (routers + "create",))
        self.route("GET", _ROUTER, self._get_router, (routers + "get",))
        self.route("PATCH", _ROUTER, self._patch_router, (routers + "update",))
        self.route("DELETE", _ROUTER, self._delete_router, (routers + "delete",))
        # Subnetworks (the Gateway's proxy-only subnet), checked on the subnetwork (iamrules).
        subnets = "compute.subnetworks."
        self.route("POST", _SUBNETS, self._insert_subnet, (subnets + "create",))
        self.route("GET", _SUBNET, self._get_subnet, (subnets + "get",))
        self.route("DELETE", _SUBNET, self._delete_subnet, (subnets + "delete",))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Any]:
        """The rule, its network (from the request, or the stored rule) and the operation."""
        project = m["project"]
        path = m.group(0)
        if "/routers" in path:
            router = m.groupdict().get("name") or str((body or {}).get("name", ""))
            return [iamrules.router(project, m["region"], router)]
        if "/subnetworks" in path:
            subnet = m.groupdict().get("name") or str((body or {}).get("name", ""))
            return [iamrules.subnetwork(project, m["region"], subnet)]
        name = m.groupdict().get("name") or str((body or {}).get("name", ""))
        if "/networks/" in path:
            network = name
        else:
            rule = self.inventory.get(self.api, f"projects/{project}/global/firewalls/{name}")
            network = str((body or {}).get("network") or (rule or {}).get("network") or "default")
        return [
            iamrules.compute(iamrules.FIREWALL, project, name),
            iamrules.compute(iamrules.NETWORK, project, network.rstrip("/").rsplit("/", 1)[-1]),
            iamrules.compute(iamrules.OPERATION, project, name),
        ]

    def _base(self, project: str) -> str:
        return f"http://{self.host}/compute/v1/projects/{project}/global"

    def _op(self, project: str, target: str, kind: str) -> dict[str, Any]:
        op_id = f"operation-{self.inventory.next_id()}"
        op = {
            "kind": "compute#operation",
            "name": op_id,
            "operationType": kind,
            "targetLink": target,
            "status": "DONE",
            "progress": 100,
            "selfLink": f"{self._base(project)}/operations/{op_id}",
        }
        self.inventory.put(self.api, f"projects/{project}/global/operations/{op_id}", op)
        return op

    def _network_exists(self, project: str, network: str) -> bool:
        name = network.rstrip("/").rsplit("/", 1)[-1]
        return name in DEFAULT_NETWORKS or (
            self.inventory.get(self.api, f"projects/{project}/global/networks/{name}") is not None
        )

    def _insert(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        project = m["project"]
        disabled = self.inventory.require_service(project, "compute.googleapis.com")
        if disabled:
            return disabled
        rule = dict(body or {})
        name = str(rule.get("name", ""))
        key = f"projects/{project}/global/firewalls/{name}"
        if self.inventory.get(self.api, key) is not None:
            return api_error(409, f"The resource '{key}' already exists")
        network = str(rule.get("network", "default"))
        if not self._network_exists(project, network):
            return api_error(
                404,
                f"The resource 'projects/{project}/global/networks/"
                f"{network.rsplit('/', 1)[-1]}' was not found",
            )
        if not rule.get("allowed") and not rule.get("denied"):
            return api_error(400, "Invalid value for field 'resource': one of allowed or denied")
        rule.update(
            id=str(self.inventory.next_id()),
            kind="compute#firewall",
            selfLink=f"{self._base(project)}/firewalls/{name}",
            network=f"{self._base(project)}/networks/{network.rsplit('/', 1)[-1]}",
            creationTimestamp="2026-08-09T09:00:00.000-07:00",
            direction=rule.get("direction", "INGRESS"),
            priority=rule.get("priority", 1000),
        )
        self.inventory.put(self.api, key, rule)
        return 200, self._op(project, rule["selfLink"], "insert")

    def _get(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        key = f"projects/{m['project']}/global/firewalls/{m['name']}"
        rule = self.inventory.get(self.api, key)
        return (200, rule) if rule else api_error(404, f"The resource '{key}' was not found")

    def _patch(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        key = f"projects/{m['project']}/global/firewalls/{m['name']}"
        rule = self.inventory.get(self.api, key)
        if rule is None:
            return api_error(404, f"The resource '{key}' was not found")
        rule.update({k: v for k, v in (body or {}).items() if k not in ("name", "selfLink", "id")})
        return 200, self._op(m["project"], rule["selfLink"], "patch")

    def _delete(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        key = f"projects/{m['project']}/global/firewalls/{m['name']}"
        rule = self.inventory.delete(self.api, key)
        if rule is None:
            return api_error(404, f"The resource '{key}' was not found")
        return 200, self._op(m["project"], rule["selfLink"], "delete")

    def _network(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        if not self._network_exists(m["project"], m["name"]):
            return api_error(404, f"The resource 'networks/{m['name']}' was not found")
        return 200, {
            "name": m["name"],
            "selfLink": f"{self._base(m['project'])}/networks/{m['name']}",
            "autoCreateSubnetworks": True,
        }

    def _get_operation(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        op = self.inventory.get(self.api, f"projects/{m['project']}/global/operations/{m['name']}")
        return (200, op) if op else api_error(404, f"operation {m['name']} not found")

    # ---- Cloud Routers and their NATs (a NAT is a field of its router: routers.patch)

    def _router_key(self, m: re.Match[str], name: str | None = None) -> str:
        return f"projects/{m['project']}/regions/{m['region']}/routers/{name or m['name']}"

    def _insert_router(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        disabled = self.inventory.require_service(m["project"], "compute.googleapis.com")
        if disabled:
            return disabled
        router = dict(body or {})
        key = self._router_key(m, str(router.get("name", "")))
        if self.inventory.get(self.api, key) is not None:
            return api_error(409, f"The resource '{key}' already exists")
        network = str(router.get("network", ""))
        if not self._network_exists(m["project"], network):
            return api_error(404, f"The resource '{network}' was not found")
        self_link = f"http://{self.host}/compute/v1/{key}"
        router.update(id=str(self.inventory.next_id()), selfLink=self_link, region=m["region"])
        router.setdefault("nats", [])
        self.inventory.put(self.api, key, router)
        return 200, self._op(m["project"], self_link, "insert")

    def _get_router(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        router = self.inventory.get(self.api, self._router_key(m))
        return (
            (200, router)
            if router
            else api_error(404, f"The resource '{self._router_key(m)}' was not found")
        )

    def _patch_router(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        router = self.inventory.get(self.api, self._router_key(m))
        if router is None:
            return api_error(404, f"The resource '{self._router_key(m)}' was not found")
        nats = list((body or {}).get("nats", []))
        for nat in nats:
            ranges = nat.get("sourceSubnetworkIpRangesToNat")
            if ranges == "LIST_OF_SUBNETWORKS" and not nat.get("subnetworks"):
                return api_error(400, "Invalid value for field 'resource.nats[0].subnetworks'")
        neighbours = self._other_routers_nats(m, router)
        for i, nat in enumerate(nats):
            others = [n for j, n in enumerate(nats) if j != i] + neighbours
            refused = compute_rules.nat_refusal(nat, others)
            if refused:
                return api_error(400, refused)
        router.update(
            {k: v for k, v in (body or {}).items() if k not in ("name", "selfLink", "id")}
        )
        return 200, self._op(m["project"], router["selfLink"], "patch")

    def _other_routers_nats(self, m: re.Match[str], router: dict[str, Any]) -> list[Any]:
        """The NATs of every other router of the same network in the same region."""
        network = compute_rules.short(str(router.get("network", "")))
        prefix = f"projects/{m['project']}/regions/{m['region']}/routers/"
        found: list[Any] = []
        for key in self.inventory.names(self.api, prefix):
            other = self.inventory.get(self.api, key)
            if key == self._router_key(m) or not other:
                continue
            if compute_rules.short(str(other.get("network", ""))) == network:
                found += other.get("nats", [])
        return found

    def _delete_router(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        router = self.inventory.delete(self.api, self._router_key(m))
        if router is None:
            return api_error(404, f"The resource '{self._router_key(m)}' was not found")
        return 200, self._op(m["project"], router["selfLink"], "delete")

    def nat_serves(self, project: str, region: str, subnetwork: str) -> bool:
        """Whether a Cloud NAT in `region` gives `subnetwork` egress: what decides whether a node
        without an external address reaches anything beyond Google APIs."""
        short = subnetwork.rstrip("/").rsplit("/", 1)[-1]
        with self.inventory.locked() as inv:
            routers = [
                obj
                for key, obj in inv.objects.items()
                if key.startswith(f"{self.api}/projects/{project}/regions/{region}/routers/")
            ]
        for router in routers:
            for nat in router.get("nats", []):
                mode = nat.get("sourceSubnetworkIpRangesToNat")
                if mode in (
                    "ALL_SUBNETWORKS_ALL_IP_RANGES",
                    "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES",
                ):
                    return True
                names = [
                    str(s.get("name", "")).rsplit("/", 1)[-1] for s in nat.get("subnetworks", [])
                ]
                if mode == "LIST_OF_SUBNETWORKS" and short in names:
                    return True
        return False

    # ---- subnetworks

    def _subnet_key(self, m: re.Match[str], name: str | None = None) -> str:
        return f"projects/{m['project']}/regions/{m['region']}/subnetworks/{name or m['name']}"

    def _insert_subnet(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        disabled = self.inventory.require_service(m["project"], "compute.googleapis.com")
        if disabled:
            return disabled
        subnet = dict(body or {})
        key = self._subnet_key(m, str(subnet.get("name", "")))
        if self.inventory.get(self.api, key) is not None:
            return api_error(409, f"The resource '{key}' already exists")
        network = compute_rules.short(str(subnet.get("network", "")))
        if not self._network_exists(m["project"], network):
            return api_error(404, f"The resource 'networks/{network}' was not found")
        taken = {}
        for name in self.inventory.names(self.api, f"projects/{m['project']}/regions/"):
            other = self.inventory.get(self.api, name)
            if "/subnetworks/" in name and other and other.get("network") == network:
                taken[name.rsplit("/", 1)[-1]] = str(other.get("ipCidrRange"))
        refused = compute_rules.subnet_refusal(
            str(subnet.get("ipCidrRange", "")),
            auto_mode=network in DEFAULT_NETWORKS,
            taken=taken,
        )
        if refused:
            return api_error(400, refused)
        self_link = f"http://{self.host}/compute/v1/{key}"
        subnet.update(
            id=str(self.inventory.next_id()),
            selfLink=self_link,
            region=m["region"],
            network=network,
        )
        self.inventory.put(self.api, key, subnet)
        return 200, self._op(m["project"], self_link, "insert")

    def _get_subnet(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        subnet = self.inventory.get(self.api, self._subnet_key(m))
        if subnet is None:
            return api_error(404, f"The resource '{self._subnet_key(m)}' was not found")
        return 200, subnet

    def _delete_subnet(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        subnet = self.inventory.delete(self.api, self._subnet_key(m))
        if subnet is None:
            return api_error(404, f"The resource '{self._subnet_key(m)}' was not found")
        return 200, self._op(m["project"], subnet["selfLink"], "delete")
