"""Loopback fake of the GKE API (container.googleapis.com v1beta1, what google-beta calls):
clusters and node pools, create / get / delete, each answered with a long-running operation
that is RUNNING and DONE when polled (operations.get). Its refusals are
tools/rehearsal/fakes/container_rules.py, with sources; its IAM checks iamrules.CHECKED_ON's.

A cluster's control plane is the fake Kubernetes API (tools/rehearsal/fakes/k8s.py): the
cluster's endpoint is its loopback address, and deleting the cluster empties it, as deleting a
real cluster deletes every object in it. Deletion protection is the provider's, not the API's.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from typing import Any

from tools.rehearsal.fakes import compute_rules, iamrules
from tools.rehearsal.fakes import container_rules as rules
from tools.rehearsal.fakes.api import ACT_AS, ApiFake
from tools.rehearsal.fakes.base import Answer, api_error
from tools.rehearsal.fakes.iamrules import Checked
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.k8s import FakeKubernetes

_LOCATION = r"/v1beta1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_CLUSTERS = _LOCATION + r"/clusters"
_CLUSTER = _CLUSTERS + r"/(?P<cluster>[^/:]+)"
_POOLS = _CLUSTER + r"/nodePools"
_POOL = _POOLS + r"/(?P<pool>[^/:]+)"
Match = re.Match[str]
Query = dict[str, str]
_OPERATION = _LOCATION + r"/operations/(?P<op>[^/]+)"
_SERVER_CONFIG = _LOCATION + r"/serverConfig"
# The deadline job calls the v1 API's clusters.delete (tpudeploy/gke/deadline_target.py).
_V1_CLUSTER = _CLUSTER.replace("/v1beta1/", "/v1/", 1)
# Not a real certificate: the stand-in Kubernetes provider checks that it arrives decoded.
FAKE_CA_PEM = "-----BEGIN CERTIFICATE-----\nrehearsal-cluster-ca\n-----END CERTIFICATE-----\n"


class FakeContainer(ApiFake):
    api = "container"

    def __init__(self, inventory: Inventory, kubernetes: FakeKubernetes) -> None:
        self.kubernetes = kubernetes
        super().__init__(inventory)

    def routes(self) -> None:
        # Every route's permission is iamrules.CHECKED_ON's, with the GKE API permissions page
        # as the source: clusters.create on the project (and actAs on each node account the
        # request names), get on the cluster, node pools as clusters.update / get on their
        # cluster, operations.get on the operation. The cluster holds no IAM policy of its own:
        # only the project's reaches it, and its condition sees the cluster's name.
        self.route("POST", _CLUSTERS, self._create_cluster, ("container.clusters.create", ACT_AS))
        get, update = ("container.clusters.get",), ("container.clusters.update",)
        self.route("GET", _CLUSTER, self._get_cluster, get)
        delete = ("container.clusters.delete",)
        self.route("DELETE", _CLUSTER, self._delete_cluster, delete)
        self.route("DELETE", _V1_CLUSTER, self._delete_cluster, delete)
        self.route("POST", _POOLS, self._create_pool, (*update, ACT_AS))
        self.route("GET", _POOL, self._get_pool, get)
        self.route("DELETE", _POOL, self._delete_pool, update)
        self.route("GET", _OPERATION, self._get_operation, ("container.operations.get",))
        self.route("GET", _SERVER_CONFIG, self._server_config, ("container.clusters.list",))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Checked]:
        """The project, the cluster (named by the path, or by a create's body), the operation,
        and every node service account the request names (a cluster's default pool and node
        pools, a node pool's config): GKE nodes run as them, so the caller must act as each."""
        project, location = m["project"], m["location"]
        found = [iamrules.project(project)]
        groups = m.groupdict()
        if groups.get("op"):
            return [*found, iamrules.gke_operation(project, location, m["op"])]
        request = body if isinstance(body, dict) else {}
        cluster = request.get("cluster") if isinstance(request.get("cluster"), dict) else None
        name = groups.get("cluster") or str((cluster or {}).get("name", ""))
        if name:
            found.append(iamrules.gke_cluster(project, location, name))
        configs: list[Any] = []
        if cluster is not None:
            configs.append(cluster.get("nodeConfig"))
            configs += [(p or {}).get("config") for p in cluster.get("nodePools") or []]
        if isinstance(request.get("nodePool"), dict):
            configs.append(request["nodePool"].get("config"))
        accounts = sorted(
            {
                str(c["serviceAccount"])
                for c in configs
                if isinstance(c, dict) and c.get("serviceAccount") not in (None, "", "default")
            }
        )
        return found + [iamrules.service_account(project, email) for email in accounts]

    @staticmethod
    def _key(m: re.Match[str], *, pool: str | None = None) -> str:
        key = f"projects/{m['project']}/locations/{m['location']}/clusters/{m['cluster']}"
        return key + (f"/nodePools/{pool}" if pool else "")

    def _op(self, m: re.Match[str], kind: str, target: str) -> Answer:
        op_id = f"operation-{self.inventory.next_id()}"
        name = f"projects/{m['project']}/locations/{m['location']}/operations/{op_id}"
        op = {
            "name": op_id,
            "zone": m["location"],
            "operationType": kind,
            "status": "DONE",
            "selfLink": f"http://{self.host}/v1beta1/{name}",
            "targetLink": f"http://{self.host}/v1beta1/{target}",
        }
        self.inventory.put(self.api, name, op)
        # GKE answers a create or delete with an operation still RUNNING (clusters take minutes)
        # and the provider polls projects.locations.operations.get until DONE
        # (ContainerOperationWaiter.QueryOp, google-beta container_operation.go): the caller
        # needs container.operations.get, so the fake's is DONE only when read back.
        return 200, {**op, "status": "RUNNING"}

    def _get_operation(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        name = f"projects/{m['project']}/locations/{m['location']}/operations/{m['op']}"
        op = self.inventory.get(self.api, name)
        return (200, op) if op else api_error(404, f"Operation {name} not found")

    # ---- clusters

    def _create_cluster(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        disabled = self.inventory.require_service(m["project"], "container.googleapis.com")
        if disabled:
            return disabled
        cluster = dict((body or {}).get("cluster") or {})
        name = str(cluster.get("name", ""))
        if not rules.CLUSTER_NAME.fullmatch(name):
            return api_error(
                400,
                f"Invalid value for field 'cluster.name': {name!r}. Must be 1-40 lowercase "
                f"letters, numbers or hyphens, start with a letter and end with a letter or "
                f"number ({rules.CLUSTER_NAME_SOURCE})",
            )
        key = f"projects/{m['project']}/locations/{m['location']}/clusters/{name}"
        if self.inventory.get(self.api, key) is not None:
            return api_error(409, f"Already exists: {key}.")
        if self.inventory.names(self.api, key + "/nodePools/"):
            return api_error(409, f"Already exists: {key}.")
        asked = str(cluster.get("initialClusterVersion") or "")
        channel = str((cluster.get("releaseChannel") or {}).get("channel") or "")
        version = rules.resolve_version(asked, channel)
        if version is None:
            return api_error(
                400,
                f'Master version "{asked}" is unsupported: GKE offers '
                f"{', '.join(rules.VALID_MASTER_VERSIONS)} and the aliases latest, 1.X and "
                f"1.X.Y ({rules.VERSION_SOURCE})",
            )
        overlap = self._master_range_refusal(m, cluster)
        if overlap:
            return api_error(400, overlap)
        cluster.update(
            selfLink=f"http://{self.host}/v1beta1/{key}",
            location=m["location"],
            zone=m["location"],
            status="RUNNING",
            currentMasterVersion=version,
            endpoint=self.kubernetes.host,
            masterAuth={
                **(cluster.get("masterAuth") or {}),
                "clusterCaCertificate": base64.b64encode(FAKE_CA_PEM.encode()).decode(),
            },
        )
        # The default pool asked for is removed again by the provider (remove_default_node_pool);
        # the fake creates none, as the provider's delete of it is a no-op on a missing pool.
        self.inventory.put(self.api, key, cluster)
        # The fake serves one cluster's Kubernetes API: a second deployment's cluster (the
        # rehearsal's neighbour, which deploys no serving stack) must not take it over.
        if self.kubernetes.cluster is None:
            self.kubernetes.open_cluster(key, cluster)
        return self._op(m, "CREATE_CLUSTER", key)

    def _master_range_refusal(self, m: Match, cluster: dict[str, Any]) -> str:
        """A private cluster's control-plane /28 must not overlap a range in use in its
        network: another cluster's control plane, or an auto-mode network's subnets."""
        block = str((cluster.get("privateClusterConfig") or {}).get("masterIpv4CidrBlock") or "")
        if not block:
            return ""
        try:
            mine = ipaddress.IPv4Network(block, strict=True)
        except ValueError:
            return f"Invalid master_ipv4_cidr_block {block!r} ({rules.MASTER_CIDR_SOURCE})"
        if mine.prefixlen != rules.MASTER_CIDR_PREFIX:
            return (
                f"master_ipv4_cidr_block {block} must be a /{rules.MASTER_CIDR_PREFIX} "
                f"({rules.MASTER_CIDR_SOURCE})"
            )
        network = compute_rules.short(str(cluster.get("network") or "default"))
        if network == "default" and mine.overlaps(compute_rules.AUTO_MODE_RANGE):
            return (
                f"master_ipv4_cidr_block {block} overlaps the auto mode network's subnets "
                f"({compute_rules.AUTO_MODE_RANGE}; {rules.MASTER_CIDR_SOURCE})"
            )
        prefix = f"projects/{m['project']}/locations/"
        for key in self.inventory.names(self.api, prefix):
            other = self.inventory.get(self.api, key)
            if not other or "/nodePools/" in key or "/operations/" in key:
                continue
            theirs = (other.get("privateClusterConfig") or {}).get("masterIpv4CidrBlock")
            same_net = compute_rules.short(str(other.get("network") or "default")) == network
            if theirs and same_net and mine.overlaps(ipaddress.IPv4Network(theirs)):
                return (
                    f"The given master_ipv4_cidr_block {block} overlaps the control-plane range "
                    f"{theirs} of cluster {key.rsplit('/', 1)[-1]} in network {network} "
                    f"({rules.MASTER_CIDR_SOURCE})"
                )
        return ""

    def _server_config(self, m: Match, query: Query, body: Any, who: str) -> Answer:
        return 200, rules.server_config()

    def _get_cluster(self, m: Match, query: Query, body: Any, who: str) -> Answer:
        key = self._key(m)
        cluster = self.inventory.get(self.api, key)
        if cluster is None:
            return api_error(404, f"Not found: {key}.")
        pools = [
            self.inventory.get(self.api, n)
            for n in self.inventory.names(self.api, key + "/nodePools/")
        ]
        answer = {**cluster, "nodePools": [p for p in pools if p]}
        # clusters.get needs "container.clusters.getCredentials to see the cluster's
        # credentials" (api-permissions): without it the answer keeps the CA certificate (what
        # a client verifies the endpoint with) and drops masterAuth's secrets.
        where = iamrules.gke_cluster(m["project"], m["location"], m["cluster"])
        at = self.inventory.request_time(self.headers)
        if not self.inventory.check(who, "container.clusters.getCredentials", where, at):
            auth = dict(answer.get("masterAuth") or {})
            answer["masterAuth"] = {k: v for k, v in auth.items() if k not in rules.CREDENTIALS}
        return 200, answer

    def _delete_cluster(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        key = self._key(m)
        if self.inventory.delete(self.api, key) is None:
            return api_error(404, f"Not found: {key}.")
        # A cluster's node pools and every Kubernetes object in it go with it.
        for pool in self.inventory.names(self.api, key + "/nodePools/"):
            self.inventory.delete(self.api, pool)
        self.kubernetes.close_cluster(key)
        return self._op(m, "DELETE_CLUSTER", key)

    # ---- node pools

    def _create_pool(self, m: Match, query: Query, body: Any, who: str) -> Answer:
        cluster = self.inventory.get(self.api, self._key(m))
        if cluster is None:
            return api_error(404, f"Not found: {self._key(m)}.")
        pool = dict((body or {}).get("nodePool") or {})
        name = str(pool.get("name", ""))
        key = self._key(m, pool=name)
        if self.inventory.get(self.api, key) is not None:
            return api_error(409, f"Already exists: {key}.")
        refused = self._pool_refusal(m, cluster, pool)
        if refused:
            return api_error(400, refused)
        pool.update(
            selfLink=f"http://{self.host}/v1beta1/{key}",
            status="RUNNING",
            version=cluster["currentMasterVersion"],
        )
        self.inventory.put(self.api, key, pool)
        return self._op(m, "CREATE_NODE_POOL", key)

    def _pool_refusal(self, m: re.Match[str], cluster: dict[str, Any], pool: dict[str, Any]) -> str:
        config = pool.get("config") or {}
        machine = str(config.get("machineType", ""))
        zone = m["location"]
        account = str(config.get("serviceAccount") or "")
        if account and account != "default" and not self.inventory.service_account_exists(account):
            return f"Service account {account} does not exist."
        mode = (config.get("workloadMetadataConfig") or {}).get("mode")
        if mode == "GKE_METADATA" and not (cluster.get("workloadIdentityConfig") or {}).get(
            "workloadPool"
        ):
            return (
                "Workload Identity must be enabled on the cluster for GKE_METADATA nodes "
                f"({rules.WORKLOAD_METADATA_SOURCE})"
            )
        if machine.startswith(rules.TPU_MACHINE_PREFIX) and zone not in rules.TPU_ZONES:
            return (
                f"Machine type {machine} is not available in zone {zone} ({rules.TPU_ZONES_SOURCE})"
            )
        if config.get("flexStart"):
            if machine.startswith(rules.TPU_MACHINE_PREFIX) and zone not in rules.FLEX_ZONES:
                return f"flex-start is not available for {machine} in {zone} ({rules.FLEX_SOURCE})"
            version = str(cluster.get("currentMasterVersion", ""))
            if rules.version_key(version) < rules.version_key(rules.FLEX_MIN_VERSION):
                return f"flex-start TPU node pools need GKE {rules.FLEX_MIN_VERSION} or later"
            run = str(config.get("maxRunDuration") or "")
            seconds = int(run.removesuffix("s")) if run.removesuffix("s").isdigit() else None
            if seconds is None or seconds > rules.FLEX_MAX_RUN_S:
                return (
                    f"maxRunDuration {run!r} must be at most {rules.FLEX_MAX_RUN_S}s "
                    f"({rules.FLEX_SOURCE})"
                )
        return ""

    def _get_pool(self, m: Match, query: Query, body: Any, who: str) -> Answer:
        key = self._key(m, pool=m["pool"])
        pool = self.inventory.get(self.api, key)
        return (200, pool) if pool else api_error(404, f"Not found: {key}.")

    def _delete_pool(self, m: Match, query: Query, body: Any, who: str) -> Answer:
        key = self._key(m, pool=m["pool"])
        if self.inventory.delete(self.api, key) is None:
            return api_error(404, f"Not found: {key}.")
        return self._op(m, "DELETE_NODE_POOL", key)

    def billing(self) -> list[str]:
        """Clusters and node pools that still exist."""
        return [n for n in self.inventory.names(self.api, "projects/") if "/operations/" not in n]
