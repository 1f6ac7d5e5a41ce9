"""The GKE rehearsal's parts, each on its own and fast: the fake GKE API's refusals, the fake
Kubernetes API's storage and validation, the schema-driven Terraform -> API object mapping, and
the stand-in's deletion protection. Every rule is the documented one kept as data
(tools/rehearsal/fakes/container_rules.py, k8s_rules.py)."""

# ruff: noqa: S310 - every URL opened here is a loopback fake started by the test

from __future__ import annotations

import json
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tools.rehearsal import k8s_shape
from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.fakes.container import FAKE_CA_PEM
from tools.rehearsal.fakes.inventory import OWNER
from tools.rehearsal.fakes.k8s_rules import CRD_SCHEMAS
from tools.rehearsal.resources.base import ApiError, ProviderConfig
from tools.rehearsal.resources.container import ContainerCluster
from tpudeploy.config import parse_config
from tpudeploy.gke.manifests import custom_resources

PROJECT = "rehearsal-unit"
ZONE = "us-west4-a"
CLUSTERS = f"/v1beta1/projects/{PROJECT}/locations/{ZONE}/clusters"


def call(host: str, method: str, path: str, body: Any = None, token: str = "") -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{host}{path}", data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


CLUSTER = {
    "name": "gemma4-gke",
    # An alias GKE resolves against its serverConfig (an exact retired build is refused).
    "initialClusterVersion": "1.34",
    "workloadIdentityConfig": {"workloadPool": f"{PROJECT}.svc.id.goog"},
    "secretManagerConfig": {"enabled": True},
    "monitoringConfig": {"managedPrometheusConfig": {"enabled": True}},
}


@pytest.fixture
def cloud() -> Iterator[FakeCloud]:
    with FakeCloud() as fake:
        fake.inventory.enable(PROJECT, "container.googleapis.com")
        yield fake


@pytest.fixture
def cluster(cloud: FakeCloud) -> str:
    status, _ = call(cloud.container.host, "POST", CLUSTERS, {"cluster": CLUSTER})
    assert status == 200
    return cloud.inventory.mint_token(OWNER)


# ---- the GKE API


def test_a_cluster_needs_the_api_enabled_and_a_valid_name() -> None:
    with FakeCloud() as cloud:
        status, body = call(cloud.container.host, "POST", CLUSTERS, {"cluster": CLUSTER})
        assert status == 403 and "SERVICE_DISABLED" in body["error"]["message"]
        cloud.inventory.enable(PROJECT, "container.googleapis.com")
        for bad in ("Gemma", "1gemma", "gemma-", "g" * 41):
            status, body = call(
                cloud.container.host, "POST", CLUSTERS, {"cluster": {**CLUSTER, "name": bad}}
            )
            assert status == 400, bad
        status, _ = call(cloud.container.host, "POST", CLUSTERS, {"cluster": CLUSTER})
        assert status == 200
        status, _ = call(cloud.container.host, "POST", CLUSTERS, {"cluster": CLUSTER})
        assert status == 409


def test_the_cluster_reports_its_control_plane(cloud: FakeCloud, cluster: str) -> None:
    status, found = call(cloud.container.host, "GET", f"{CLUSTERS}/gemma4-gke")
    assert status == 200
    assert found["endpoint"] == cloud.kubernetes.host
    import base64

    assert base64.b64decode(found["masterAuth"]["clusterCaCertificate"]).decode() == FAKE_CA_PEM


def _pool(name: str, **config: Any) -> dict[str, Any]:
    return {"nodePool": {"name": name, "config": {"machineType": "ct5lp-hightpu-1t", **config}}}


def test_tpu_pools_follow_the_documented_zones_versions_and_run_limit(
    cloud: FakeCloud, cluster: str
) -> None:
    pools = f"{CLUSTERS}/gemma4-gke/nodePools"
    flex = {"flexStart": True, "maxRunDuration": "86400s"}
    assert call(cloud.container.host, "POST", pools, _pool("tpu-flex", **flex))[0] == 200
    too_long = {"flexStart": True, "maxRunDuration": f"{8 * 86400}s"}
    status, body = call(cloud.container.host, "POST", pools, _pool("tpu-long", **too_long))
    assert status == 400 and "maxRunDuration" in body["error"]["message"]
    # No Workload Identity on the cluster: GKE_METADATA nodes are refused.
    plain = {k: v for k, v in CLUSTER.items() if k != "workloadIdentityConfig"}
    call(cloud.container.host, "POST", CLUSTERS, {"cluster": {**plain, "name": "plain"}})
    status, body = call(
        cloud.container.host,
        "POST",
        f"{CLUSTERS}/plain/nodePools",
        _pool("p", workloadMetadataConfig={"mode": "GKE_METADATA"}),
    )
    assert status == 400 and "Workload Identity" in body["error"]["message"]
    # A v5e machine type outside the v5e zones.
    other = "/v1beta1/projects/rehearsal-unit/locations/europe-west4-a/clusters"
    call(cloud.container.host, "POST", other, {"cluster": {**CLUSTER, "name": "eu"}})
    status, body = call(cloud.container.host, "POST", f"{other}/eu/nodePools", _pool("tpu"))
    assert status == 400 and "not available in zone" in body["error"]["message"]


def test_deleting_the_cluster_deletes_its_pools_and_objects(cloud: FakeCloud, cluster: str) -> None:
    pools = f"{CLUSTERS}/gemma4-gke/nodePools"
    call(cloud.container.host, "POST", pools, _pool("tpu-spot", spot=True))
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tpudeploy"}}
    assert call(cloud.kubernetes.host, "POST", "/api/v1/namespaces", ns, cluster)[0] == 201
    assert call(cloud.container.host, "DELETE", f"{CLUSTERS}/gemma4-gke")[0] == 200
    assert cloud.container.billing() == []
    assert cloud.kubernetes.objects() == {}
    status, _ = call(cloud.kubernetes.host, "GET", "/api/v1/namespaces/tpudeploy", token=cluster)
    assert status == 503


def test_the_provider_refuses_to_delete_a_protected_cluster(cloud: FakeCloud) -> None:
    """resource_container_cluster.go checks deletion_protection before any API call: the
    apply that make destroy-all runs first is what lets the destroy through."""
    state = {"name": "gemma4-gke", "location": ZONE, "project": PROJECT}
    resource = ContainerCluster(ProviderConfig({"project": PROJECT}))
    before = cloud.call_count()
    for protected in (True, None):
        with pytest.raises(ApiError, match="deletion_protection is set to true"):
            resource.delete({**state, "deletion_protection": protected})
    assert cloud.call_count() == before


# ---- the Kubernetes API


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "gemma4-gke", "namespace": "tpudeploy"},
    "spec": {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-tpu"}]},
        },
    },
}
DEPLOYMENTS = "/apis/apps/v1/namespaces/tpudeploy/deployments"


def test_objects_need_a_token_and_their_namespace(cloud: FakeCloud, cluster: str) -> None:
    k8s = cloud.kubernetes.host
    assert call(k8s, "POST", DEPLOYMENTS, DEPLOYMENT, "not-a-token")[0] == 401
    status, body = call(k8s, "POST", DEPLOYMENTS, DEPLOYMENT, cluster)
    assert status == 404 and 'namespaces "tpudeploy" not found' in body["message"]
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tpudeploy"}}
    call(k8s, "POST", "/api/v1/namespaces", ns, cluster)
    assert call(k8s, "POST", DEPLOYMENTS, DEPLOYMENT, cluster)[0] == 201
    assert call(k8s, "POST", DEPLOYMENTS, DEPLOYMENT, cluster)[0] == 409
    # The namespace's deletion takes its objects with it.
    call(k8s, "DELETE", "/api/v1/namespaces/tpudeploy", token=cluster)
    assert cloud.kubernetes.objects() == {}


def test_core_objects_are_validated_strictly_for_the_clusters_minor(
    cloud: FakeCloud, cluster: str
) -> None:
    k8s = cloud.kubernetes.host
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tpudeploy"}}
    call(k8s, "POST", "/api/v1/namespaces", ns, cluster)
    bad = json.loads(json.dumps(DEPLOYMENT))
    bad["spec"]["template"]["spec"]["containers"][0]["startupProbes"] = {}
    status, body = call(k8s, "POST", DEPLOYMENTS, bad, cluster)
    assert status == 422 and "startupProbes" in body["message"]
    named = {**DEPLOYMENT, "metadata": {"name": "Gemma_4", "namespace": "tpudeploy"}}
    assert call(k8s, "POST", DEPLOYMENTS, named, cluster)[0] == 422
    wrong_place = {**DEPLOYMENT, "kind": "StatefulSet"}
    assert call(k8s, "POST", DEPLOYMENTS, wrong_place, cluster)[0] == 400


def test_custom_resources_need_their_crd_and_match_its_schema(
    cloud: FakeCloud, cluster: str
) -> None:
    k8s = cloud.kubernetes.host
    # The serving stack's own ComputeClass (what the rehearsal applies).
    raw = tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))
    compute_class = custom_resources(parse_config(raw), project=PROJECT)["compute-class"]
    path = "/apis/cloud.google.com/v1/computeclasses"
    assert (CRD_SCHEMAS / "cloud.google.com" / "computeclass_v1.json").is_file()  # vendored
    broken = {**compute_class, "spec": {**compute_class["spec"], "unknownField": 1}}
    assert call(k8s, "POST", path, broken, cluster)[0] == 422
    assert call(k8s, "POST", path, compute_class, cluster)[0] == 201
    # A kind no add-on of this cluster installs is not served at all.
    scaled = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "x"}}
    assert call(k8s, "POST", "/apis/keda.sh/v1alpha1/scaledobjects", scaled, cluster)[0] == 404


def test_terraform_blocks_map_to_api_fields_by_the_apis_schema() -> None:
    """Singular repeated blocks become the API's plural lists, one-element blocks objects,
    integer strings integers, an octal mode its value; an unknown name is kept to be refused."""
    values = {
        "metadata": [{"name": "x", "namespace": "ns", "labels": {"app.kubernetes.io/name": "x"}}],
        "spec": [
            {
                "replicas": "2",
                "selector": [{"match_labels": {"app": "x"}}],
                "template": [
                    {
                        "metadata": [{"labels": {"app": "x"}}],
                        "spec": [
                            {
                                "container": [
                                    {"name": "a", "image": "i", "port": [{"container_port": 80}]}
                                ],
                                "volume": [
                                    {
                                        "name": "v",
                                        "config_map": [{"name": "c", "default_mode": "0555"}],
                                    }
                                ],
                                "toleration": [{"key": "k", "operator": "Exists"}],
                                "wait_for_rollout": True,
                            }
                        ],
                    }
                ],
            }
        ],
    }
    obj = k8s_shape.manifest("kubernetes_deployment_v1", values, "1.33.0")
    assert obj is not None
    assert (obj["apiVersion"], obj["kind"]) == ("apps/v1", "Deployment")
    spec = obj["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["containers"][0]["ports"] == [{"containerPort": 80}]
    assert pod["volumes"][0]["configMap"]["defaultMode"] == 0o555
    assert pod["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/name": "x"}
    assert "waitForRollout" not in json.dumps(obj)
    hpa = k8s_shape.kind_for("kubernetes_horizontal_pod_autoscaler_v2", "1.33.0")
    assert hpa is not None and hpa[:2] == ("autoscaling/v2", "HorizontalPodAutoscaler")
    binding = k8s_shape.kind_for("kubernetes_cluster_role_binding_v1", "1.33.0")
    assert binding is not None
    assert binding[:2] == ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
    assert k8s_shape.kind_for("kubernetes_manifest", "1.33.0") is None


def test_rbac_names_are_path_segments_and_other_names_dns_subdomains() -> None:
    """Kubernetes validates RBAC names as path segments (Google's adapter manifest names a
    binding custom-metrics:system:auth-delegator); a fake that refused it would be stricter
    than the API server, one that took it for a Deployment kinder."""
    from tools.rehearsal.fakes.k8s_rules import name_problem

    assert name_problem("ClusterRoleBinding", "custom-metrics:system:auth-delegator") == ""
    assert name_problem("ClusterRole", "a/b") and name_problem("Role", "..")
    assert name_problem("Deployment", "a:b")


def test_the_shape_maps_the_providers_tls_spelling_to_the_apis() -> None:
    """The provider's insecure_skip_tls_verify is the API's insecureSkipTLSVerify."""
    assert k8s_shape._field("insecure_skip_tls_verify", {"insecureSkipTLSVerify": {}}) == (
        "insecureSkipTLSVerify"
    )
