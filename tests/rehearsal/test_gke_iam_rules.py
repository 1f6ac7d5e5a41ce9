"""The fakes a GKE deployment's stacks call judge every call by the caller's IAM, as Google does
(issue 41): the container API, Resource Manager's project policy, Service Usage, IAM, and the
cluster's Kubernetes API. A caller without the grant gets 403; with it, the call passes; a grant
conditioned on one cluster passes there and is refused on another. Driven over HTTP against the
loopback fakes, with tokens the inventory mints (the owner passes everything, as before)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.rehearsal.fakes import iamrules, k8s_ops
from tools.rehearsal.fakes.compute import FakeCompute
from tools.rehearsal.fakes.container import FakeContainer
from tools.rehearsal.fakes.iam import FakeIam
from tools.rehearsal.fakes.inventory import OWNER, Inventory
from tools.rehearsal.fakes.k8s import FakeKubernetes
from tools.rehearsal.fakes.resourcemanager import FakeResourceManager
from tools.rehearsal.fakes.serviceusage import FakeServiceUsage
from tpudeploy.gke import kube_iam

P = "proj-1"
ZONE = "us-west4-a"
DEPLOY = f"serviceAccount:gemma4-a-apply@{P}.iam.gserviceaccount.com"
NODE = f"gemma4-a-node@{P}.iam.gserviceaccount.com"
LOC = f"/v1beta1/projects/{P}/locations/{ZONE}"


def on_cluster(name: str) -> str:
    """The condition the issue names: this cluster only, whatever IAM calls the project."""
    return (
        f"resource.type == '{iamrules.GKE_CLUSTER}' && "
        f"resource.name.endsWith('/locations/{ZONE}/clusters/{name}')"
    )


def call(host: str, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    request = urllib.request.Request(
        f"http://{host}{path}", data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
            raw = response.read()
            return int(response.status), json.loads(raw) if raw else {}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def message(answer: tuple[int, Any]) -> str:
    payload = answer[1]
    return str(payload.get("message") or (payload.get("error") or {}).get("message"))


@pytest.fixture
def inv() -> Inventory:
    inventory = Inventory()
    for service in ("container.googleapis.com", "iam.googleapis.com"):
        inventory.enable(P, service)
    for email in (NODE, DEPLOY.partition(":")[2]):
        inventory.put("iam", f"projects/{P}/serviceAccounts/{email}", {"email": email})
    return inventory


def grant(
    inv: Inventory,
    permissions: tuple[str, ...],
    condition: str | None = None,
    *,
    who: str = DEPLOY,
    on: str = f"cloudresourcemanager/projects/{P}",
) -> str:
    """A custom role holding `permissions`, bound to `who` on policy `on`; `who`'s token."""
    role = f"projects/{P}/roles/r{inv.next_id()}"
    inv.put("iam", role, {"name": role, "includedPermissions": list(permissions)})
    binding: dict[str, Any] = {"role": role, "members": [who]}
    if condition is not None:
        binding["condition"] = {"title": "t", "expression": condition}
    inv.policies.setdefault(on, []).append(binding)
    return inv.mint_token(who)


@pytest.fixture
def gke(inv: Inventory) -> Iterator[tuple[FakeContainer, FakeContainer]]:
    """Two container fakes over one inventory, each serving its own cluster's Kubernetes API,
    with clusters `a` and `b` created by the owner."""
    with (
        FakeKubernetes(inv) as kube_a,
        FakeKubernetes(inv) as kube_b,
        FakeContainer(inv, kube_a) as a,
        FakeContainer(inv, kube_b) as b,
    ):
        owner = inv.mint_token(OWNER)
        for fake, name in ((a, "a"), (b, "b")):
            body = {"cluster": {"name": name, "monitoringConfig": {}}}
            assert call(fake.host, "POST", f"{LOC}/clusters", owner, body)[0] == 200
            pool = {"nodePool": {"name": "p", "config": {"machineType": "e2-standard-4"}}}
            pools = f"{LOC}/clusters/{name}/nodePools"
            assert call(fake.host, "POST", pools, owner, pool)[0] == 200
        yield a, b


# ---- the container API


def test_cluster_create_needs_create_on_the_project_and_actas_on_each_node_account(
    inv: Inventory, gke: tuple[FakeContainer, FakeContainer]
) -> None:
    fake, _ = gke
    body = {
        "cluster": {
            "name": "c",
            "nodePools": [{"name": "default-pool", "config": {"serviceAccount": NODE}}],
        }
    }
    nothing = inv.mint_token(DEPLOY)
    refused = call(fake.host, "POST", f"{LOC}/clusters", nothing, body)
    assert refused[0] == 403
    assert message(refused).startswith(
        f"Permission 'container.clusters.create' denied on resource 'projects/{P}'"
    )
    # A condition naming the new cluster never grants: create is checked on the project.
    token = grant(inv, ("container.clusters.create",), on_cluster("c"))
    assert call(fake.host, "POST", f"{LOC}/clusters", token, body)[0] == 403
    token = grant(inv, ("container.clusters.create",))
    refused = call(fake.host, "POST", f"{LOC}/clusters", token, body)
    assert refused[0] == 403
    assert "'iam.serviceAccounts.actAs' denied" in message(refused), message(refused)
    assert NODE in message(refused)
    # actAs on the node account's own policy (the bootstrap's serviceAccountUser grant).
    account_policy = f"iam/projects/{P}/serviceAccounts/{NODE}"
    grant(inv, ("iam.serviceAccounts.actAs",), on=account_policy)
    assert call(fake.host, "POST", f"{LOC}/clusters", token, body)[0] == 200


def test_a_grant_conditioned_on_its_cluster_reaches_that_cluster_only(
    inv: Inventory, gke: tuple[FakeContainer, FakeContainer]
) -> None:
    fake, _ = gke
    permissions = ("container.clusters.get", "container.clusters.update")
    token = grant(inv, (*permissions, "container.clusters.delete"), on_cluster("a"))
    pool = {"nodePool": {"name": "q", "config": {"machineType": "e2-standard-4"}}}
    for cluster, expected in (("a", 200), ("b", 403)):
        base = f"{LOC}/clusters/{cluster}"
        assert call(fake.host, "GET", base, token)[0] == expected, cluster
        assert call(fake.host, "GET", f"{base}/nodePools/p", token)[0] == expected, cluster
        created = call(fake.host, "POST", f"{base}/nodePools", token, pool)
        assert created[0] == expected, (cluster, created)
        assert call(fake.host, "DELETE", f"{base}/nodePools/p", token)[0] == expected, cluster
    refused = call(fake.host, "DELETE", f"{LOC}/clusters/b", token)
    assert refused[0] == 403
    assert message(refused).startswith(
        f"Permission 'container.clusters.delete' denied on resource "
        f"'projects/{P}/locations/{ZONE}/clusters/b'"
    )
    assert call(fake.host, "DELETE", f"{LOC}/clusters/a", token)[0] == 200
    # Without a grant, even a read of the cluster is refused.
    other = inv.mint_token(f"serviceAccount:gemma4-b-apply@{P}.iam.gserviceaccount.com")
    assert call(fake.host, "GET", f"{LOC}/clusters/b", other)[0] == 403


def test_a_node_pool_with_an_account_needs_actas_on_it(
    inv: Inventory, gke: tuple[FakeContainer, FakeContainer]
) -> None:
    fake, _ = gke
    token = grant(inv, ("container.clusters.update",), on_cluster("a"))
    pool = {"nodePool": {"name": "tpu", "config": {"serviceAccount": NODE}}}
    refused = call(fake.host, "POST", f"{LOC}/clusters/a/nodePools", token, pool)
    assert refused[0] == 403
    assert "'iam.serviceAccounts.actAs' denied" in message(refused)
    grant(inv, ("iam.serviceAccounts.actAs",), on=f"iam/projects/{P}/serviceAccounts/{NODE}")
    assert call(fake.host, "POST", f"{LOC}/clusters/a/nodePools", token, pool)[0] == 200


def test_operations_and_server_config_have_their_own_permissions(
    inv: Inventory, gke: tuple[FakeContainer, FakeContainer]
) -> None:
    fake, _ = gke
    owner = inv.mint_token(OWNER)
    started = call(fake.host, "DELETE", f"{LOC}/clusters/a/nodePools/p", owner)[1]
    # Still running, as GKE answers: the provider must poll it (with this permission).
    assert started["status"] == "RUNNING"
    path = f"{LOC}/operations/{started['name']}"
    assert call(fake.host, "GET", path, owner)[1]["status"] == "DONE"
    # An operation gives IAM Conditions no attribute: a cluster condition never grants it.
    conditioned = grant(inv, ("container.operations.get",), on_cluster("a"))
    assert call(fake.host, "GET", path, conditioned)[0] == 403
    assert call(fake.host, "GET", path, grant(inv, ("container.operations.get",)))[0] == 200
    config = f"{LOC}/serverConfig"
    nobody = inv.mint_token(f"serviceAccount:x@{P}.iam.gserviceaccount.com")
    refused = call(fake.host, "GET", config, nobody)
    assert refused[0] == 403
    assert "'container.clusters.list' denied on resource 'projects/proj-1'" in message(refused)
    assert call(fake.host, "GET", config, grant(inv, ("container.clusters.list",)))[0] == 200


# ---- Resource Manager, Service Usage, IAM


def test_the_project_policy_needs_its_own_permissions(inv: Inventory) -> None:
    # The grant a rewrite of the project's policy would make: the deploy identity as owner.
    body = {"policy": {"bindings": [{"role": "roles/owner", "members": [DEPLOY]}]}}
    with FakeResourceManager(inv) as fake:
        assert call(fake.host, "GET", f"/v1/projects/{P}", inv.mint_token(DEPLOY))[0] == 403
        reader = grant(inv, ("resourcemanager.projects.get",))
        assert call(fake.host, "GET", f"/v1/projects/{P}", reader)[0] == 200  # google_project
        inv.policies.clear()
        nothing = inv.mint_token(DEPLOY)
        refused = call(fake.host, "POST", f"/v1/projects/{P}:setIamPolicy", nothing, body)
        assert refused[0] == 403
        assert "resourcemanager.projects.setIamPolicy" in message(refused)
        assert call(fake.host, "POST", f"/v1/projects/{P}:getIamPolicy", nothing, {})[0] == 403
        reader = grant(inv, ("resourcemanager.projects.getIamPolicy",))
        assert call(fake.host, "POST", f"/v1/projects/{P}:getIamPolicy", reader, {})[0] == 200
        assert call(fake.host, "POST", f"/v1/projects/{P}:setIamPolicy", reader, body)[0] == 403
        writer = grant(inv, ("resourcemanager.projects.setIamPolicy",))
        assert call(fake.host, "POST", f"/v1/projects/{P}:setIamPolicy", writer, body)[0] == 200
        # What the rewrite did: the deploy identity now owns the project.
        assert call(fake.host, "GET", f"/v1/projects/{P}", writer)[0] == 200


@pytest.mark.parametrize(
    ("method", "suffix", "permission"),
    [
        ("GET", "", "serviceusage.services.get"),
        ("POST", ":enable", "serviceusage.services.enable"),
        ("POST", ":disable", "serviceusage.services.disable"),
    ],
)
def test_service_usage_needs_its_permission_on_the_project(
    inv: Inventory, method: str, suffix: str, permission: str
) -> None:
    path = f"/v1/projects/{P}/services/container.googleapis.com{suffix}"
    with FakeServiceUsage(inv) as fake:
        refused = call(fake.host, method, path, inv.mint_token(DEPLOY), {} if suffix else None)
        assert refused[0] == 403
        assert f"'{permission}' denied on resource 'projects/{P}'" in message(refused)
        token = grant(inv, (permission,))
        assert call(fake.host, method, path, token, {} if suffix else None)[0] == 200


def test_iam_checks_accounts_on_the_project_or_the_account(inv: Inventory) -> None:
    other = f"gemma4-b-node@{P}.iam.gserviceaccount.com"
    inv.put("iam", f"projects/{P}/serviceAccounts/{other}", {"email": other})
    with FakeIam(inv) as fake:
        nothing = inv.mint_token(DEPLOY)
        create = (f"/v1/projects/{P}/serviceAccounts", {"accountId": "gemma4-a-extra"})
        assert call(fake.host, "POST", create[0], nothing, create[1])[0] == 403
        creator = grant(inv, ("iam.serviceAccounts.create",))
        assert call(fake.host, "POST", create[0], creator, create[1])[0] == 200
        # On one account's own policy: that account only.
        token = grant(
            inv,
            (
                "iam.serviceAccounts.get",
                "iam.serviceAccounts.getIamPolicy",
                "iam.serviceAccounts.setIamPolicy",
            ),
            on=f"iam/projects/{P}/serviceAccounts/{NODE}",
        )
        for email, expected in ((NODE, 200), (other, 403)):
            account = f"/v1/projects/{P}/serviceAccounts/{email}"
            assert call(fake.host, "GET", account, token)[0] == expected
            assert call(fake.host, "POST", f"{account}:getIamPolicy", token, {})[0] == expected
            policy: dict[str, Any] = {"policy": {"bindings": []}}
            assert call(fake.host, "POST", f"{account}:setIamPolicy", token, policy)[0] == expected


def test_custom_roles_need_the_roles_permissions_on_the_project(inv: Inventory) -> None:
    role = {"roleId": "gemma4_a_stop", "role": {"includedPermissions": ["tpu.nodes.delete"]}}
    path = f"/v1/projects/{P}/roles"
    with FakeIam(inv) as fake:
        nothing = inv.mint_token(DEPLOY)
        assert call(fake.host, "POST", path, nothing, role)[0] == 403
        token = grant(inv, ("iam.roles.create",))
        assert call(fake.host, "POST", path, token, role)[0] == 200
        assert call(fake.host, "PATCH", f"{path}/gemma4_a_stop", token, {"title": "x"})[0] == 403
        assert call(fake.host, "DELETE", f"{path}/gemma4_a_stop", token)[0] == 403
        token = grant(inv, ("iam.roles.update", "iam.roles.delete"))
        assert call(fake.host, "PATCH", f"{path}/gemma4_a_stop", token, {"title": "x"})[0] == 200
        assert call(fake.host, "DELETE", f"{path}/gemma4_a_stop", token)[0] == 200


# ---- the cluster's Kubernetes API


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def test_kubernetes_requests_need_the_tables_permission_on_their_cluster(
    inv: Inventory, gke: tuple[FakeContainer, FakeContainer]
) -> None:
    a, b = gke
    kube_a, kube_b = a.kubernetes.host, b.kubernetes.host
    nothing = inv.mint_token(DEPLOY)
    # Discovery is every authenticated caller's (system:discovery, system:public-info-viewer).
    assert call(kube_a, "GET", "/version", nothing)[0] == 200
    refused = call(kube_a, "POST", "/api/v1/namespaces", nothing, _namespace("gemma4-a"))
    assert refused[0] == 403
    assert refused[1]["kind"] == "Status" and refused[1]["reason"] == "Forbidden"
    assert message(refused) == (
        f'namespaces is forbidden: User "{DEPLOY.partition(":")[2]}" cannot create resource '
        '"namespaces" in API group "" at the cluster scope'
    )
    token = grant(inv, kube_iam.deploy_permissions(), on_cluster("a"))
    assert call(kube_a, "POST", "/api/v1/namespaces", token, _namespace("gemma4-a"))[0] == 201
    assert call(kube_a, "GET", "/api/v1/namespaces/gemma4-a", token)[0] == 200
    # The same grant on the other deployment's cluster: refused.
    refused = call(kube_b, "POST", "/api/v1/namespaces", token, _namespace("gemma4-a"))
    assert refused[0] == 403
    assert call(kube_b, "GET", "/api/v1/namespaces/default", token)[0] == 403
    # A resource the table does not hold (Secrets: the serving stack never writes one).
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    path = "/api/v1/namespaces/gemma4-a/secrets"
    refused = call(kube_a, "POST", path, token, secret)
    assert refused[0] == 403
    assert 'cannot create resource "secrets" in API group "" in the namespace "gemma4-a"' in (
        message(refused)
    )
    assert call(kube_a, "POST", path, inv.mint_token(OWNER), secret)[0] == 201


def test_custom_resources_need_third_party_objects(
    inv: Inventory, gke: tuple[FakeContainer, FakeContainer]
) -> None:
    a, _ = gke
    kube = a.kubernetes.host
    builtin = tuple(p for p in kube_iam.deploy_permissions() if ".thirdPartyObjects." not in p)
    token = grant(inv, builtin, on_cluster("a"))
    path = "/apis/cloud.google.com/v1/computeclasses"
    klass = {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": "c"},
        "spec": {"priorities": [{"nodepools": ["p"]}], "whenUnsatisfiable": "DoNotScaleUp"},
    }
    refused = call(kube, "POST", path, token, klass)
    assert refused[0] == 403
    assert 'resource "computeclasses" in API group "cloud.google.com"' in message(refused)
    token = grant(inv, ("container.thirdPartyObjects.create",), on_cluster("a"))
    assert call(kube, "POST", path, token, klass)[0] == 201


@pytest.mark.parametrize(
    ("plural", "body", "extra"),
    [
        (
            "clusterrolebindings",
            {
                "kind": "ClusterRoleBinding",
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "system:auth-delegator",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": "default"}],
            },
            "container.clusterRoles.bind",
        ),
        (
            "clusterroles",
            {"kind": "ClusterRole", "rules": [{"apiGroups": [""], "resources": ["pods"],
                                               "verbs": ["get"]}]},
            "container.clusterRoles.escalate",
        ),
    ],
)  # fmt: skip
def test_rbac_writes_need_bind_or_escalate(
    inv: Inventory,
    gke: tuple[FakeContainer, FakeContainer],
    plural: str,
    body: dict[str, Any],
    extra: str,
) -> None:
    a, _ = gke
    kube = a.kubernetes.host
    obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "r"}, **body}
    without = tuple(p for p in kube_iam.deploy_permissions() if p != extra)
    token = grant(inv, without, on_cluster("a"))
    path = f"/apis/rbac.authorization.k8s.io/v1/{plural}"
    refused = call(kube, "POST", path, token, obj)
    assert refused[0] == 403
    assert extra in message(refused)
    token = grant(inv, (extra,), on_cluster("a"))
    assert call(kube, "POST", path, token, obj)[0] == 201


def test_the_ops_fake_judges_reads_the_same_way(inv: Inventory, tmp_path: Path) -> None:
    """The ops commands' API server (fakes/k8s_ops.py), given the inventory and its cluster:
    a read needs the table's permission there; a kind the table lacks is the owner's only."""
    deployment = k8s_ops.deployment("gemma4-a", "gemma4-a", replicas=1)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # loopback, a throwaway self-signed certificate
    token = grant(inv, ("container.deployments.get",), on_cluster("a"))
    paths = {
        "deployments": "/apis/apps/v1/namespaces/gemma4-a/deployments/gemma4-a",
        "pods": "/api/v1/namespaces/gemma4-a/pods",
    }
    answers: dict[tuple[str, str], int] = {}
    for cluster in ("a", "b"):
        checked = iamrules.gke_cluster(P, ZONE, cluster)
        with k8s_ops.FakeKubernetes(tmp_path / cluster, iam=(inv, checked)) as api:
            api.put(deployment)
            for who, bearer in (("deploy", token), ("owner", inv.mint_token(OWNER))):
                for kind, path in paths.items():
                    request = urllib.request.Request(
                        f"https://{api.host}{path}", headers={"Authorization": f"Bearer {bearer}"}
                    )
                    try:
                        with urllib.request.urlopen(request, context=context, timeout=10) as r:  # noqa: S310
                            status = int(r.status)
                    except urllib.error.HTTPError as exc:
                        status = exc.code
                    answers[(f"{who}@{cluster}", kind)] = status
    assert answers == {
        ("deploy@a", "deployments"): 200,
        ("deploy@a", "pods"): 403,  # never in the table: the owner's only
        ("owner@a", "deployments"): 200,
        ("owner@a", "pods"): 200,
        ("deploy@b", "deployments"): 403,
        ("deploy@b", "pods"): 403,
        ("owner@b", "deployments"): 200,
        ("owner@b", "pods"): 200,
    }


def test_subnetworks_need_the_subnetworks_permissions(inv: Inventory) -> None:
    inv.enable(P, "compute.googleapis.com")
    path = f"/compute/v1/projects/{P}/regions/us-west4/subnetworks"
    body = {
        "name": "gemma4-a-proxy",
        "network": "global/networks/default",
        "ipCidrRange": "192.168.64.0/23",
        "purpose": "REGIONAL_MANAGED_PROXY",
        "role": "ACTIVE",
    }
    with FakeCompute(inv) as fake:
        refused = call(fake.host, "POST", path, inv.mint_token(DEPLOY), body)
        assert refused[0] == 403
        assert "'compute.subnetworks.create' denied" in message(refused)
        token = grant(inv, ("compute.subnetworks.create", "compute.subnetworks.get"))
        assert call(fake.host, "POST", path, token, body)[0] == 200
        assert call(fake.host, "GET", f"{path}/gemma4-a-proxy", token)[0] == 200
        assert call(fake.host, "DELETE", f"{path}/gemma4-a-proxy", token)[0] == 403


def test_a_clusters_credentials_need_get_credentials(
    inv: Inventory, gke: tuple[FakeContainer, FakeContainer]
) -> None:
    fake, _ = gke
    owner = inv.mint_token(OWNER)
    password = "p-1"  # noqa: S105 (a throwaway basic-auth value in a loopback fake)
    body = {"cluster": {"name": "c", "masterAuth": {"username": "u", "password": password}}}
    assert call(fake.host, "POST", f"{LOC}/clusters", owner, body)[0] == 200
    token = grant(inv, ("container.clusters.get",), on_cluster("c"))
    seen = call(fake.host, "GET", f"{LOC}/clusters/c", token)
    assert seen[0] == 200
    assert set(seen[1]["masterAuth"]) == {"clusterCaCertificate"}
    token = grant(inv, ("container.clusters.getCredentials",), on_cluster("c"))
    seen = call(fake.host, "GET", f"{LOC}/clusters/c", token)
    assert seen[1]["masterAuth"]["password"] == password
