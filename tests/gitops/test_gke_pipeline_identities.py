"""Issue 41: a GKE deployment's deploy identity, judged as IAM would (tools/rehearsal/fakes/
iamrules.py: the attributes each resource gives a condition, CEL over them): its own cluster, its
Kubernetes objects and its secrets, nothing of another GKE deployment's or of a TPU VM's; and
what only the bootstrap may make stays out of a pipeline deployment's stacks."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer
from tools.rehearsal.fakes import iamrules
from tpudeploy import identities
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import kube_iam
from tpudeploy.gke.pipeline import CLUSTER_ROLE, CREATE_ROLE
from tpudeploy.platform import platform_for

PROJECT = "my-project-1"
NUMBER = "123456789012"
BUCKET = "tfstate-x"


def _gke(name: str, zone: str = "us-west4-a") -> DeployConfig:
    return parse_config(
        {
            "name": name,
            "platform": "gke",
            "project": PROJECT,
            "zone": zone,
            "state_bucket": BUCKET,
            "pipeline": True,
            "gke": {"capacity": "spot"},
        }
    )


A, B = _gke("gemma4-gke"), _gke("gemma4-gke-b")
# The same name in another zone is another cluster (the condition names zone and name).
A_ELSEWHERE = _gke("gemma4-gke", zone="us-central1-a")
VM = parse_config(
    {"name": "gemma4-vm", "project": PROJECT, "state_bucket": BUCKET, "pipeline": True}
)


def _grants(dep: DeployConfig) -> list[identities.Grant]:
    return identities.deploy_grants(
        dep, project=PROJECT, project_number=NUMBER, state_bucket=BUCKET
    ) + identities.stop_grants(dep)


def _reaches(dep: DeployConfig, permission: str, resource: iamrules.Checked) -> bool:
    """Whether any of `dep`'s project-level grants gives `permission` on `resource`."""
    for g in _grants(dep):
        if g.scope != identities.PROJECT or permission not in identities.permissions(g):
            continue
        if g.condition is None or iamrules.condition_grants(g.condition.expression, resource):
            return True
    return False


def _cluster(dep: DeployConfig) -> iamrules.Checked:
    return iamrules.gke_cluster(PROJECT, dep.zone, dep.name)


CLUSTER_PERMISSIONS = (
    "container.clusters.get",
    "container.clusters.update",
    "container.clusters.delete",
    *kube_iam.deploy_permissions(),
)


@pytest.mark.parametrize("permission", CLUSTER_PERMISSIONS)
def test_a_gke_identity_reaches_its_own_cluster_only(permission: str) -> None:
    assert _reaches(A, permission, _cluster(A))
    for other in (B, A_ELSEWHERE):
        assert not _reaches(A, permission, _cluster(other)), other.name
    # A cluster permission checked on anything but a cluster (the project) is never granted by
    # the conditioned role: `==` on the type, not the guard form that lets other types through.
    assert not _reaches(A, permission, iamrules.project(PROJECT))


def test_a_tpu_vm_identity_holds_no_container_permission() -> None:
    held = {p for g in _grants(VM) for p in identities.permissions(g)}
    assert not [p for p in held if p.startswith("container.")]
    assert not _reaches(VM, "container.clusters.get", _cluster(A))


def test_a_gke_identity_holds_no_tpu_or_firewall_permission() -> None:
    held = {p for g in _grants(A) for p in identities.permissions(g)}
    assert not [p for p in held if p.startswith(("tpu.", "compute."))], held


def test_what_no_condition_can_narrow_is_create_list_and_operations_only() -> None:
    (create,) = [g for g in _grants(A) if g.role == CREATE_ROLE]
    assert create.condition is None and create.role in identities.UNSCOPABLE_ROLES
    assert sorted(identities.permissions(create)) == [
        "container.clusters.create",
        "container.clusters.list",
        "container.operations.get",
    ]
    (cluster,) = [g for g in _grants(A) if g.role == CLUSTER_ROLE]
    assert cluster.condition is not None
    assert "container.clusters.create" not in identities.permissions(cluster)


def test_each_deployment_reaches_its_own_secrets_and_cache_only() -> None:
    for dep, others in ((A, (B, VM)), (B, (A, VM)), (VM, (A, B))):
        mine = [s for s, _ in platform_for(dep).secrets(dep)]
        for secret_id in mine:
            checked = iamrules.secret(PROJECT, secret_id)
            assert _reaches(dep, "secretmanager.secrets.setIamPolicy", checked), secret_id
        for other in others:
            for secret_id, _ in platform_for(other).secrets(other):
                checked = iamrules.secret(PROJECT, secret_id)
                assert not _reaches(dep, "secretmanager.secrets.setIamPolicy", checked)
            bucket = iamrules.bucket(PROJECT, other.compile_cache_bucket(PROJECT))
            assert not _reaches(dep, "storage.buckets.setIamPolicy", bucket)
    # GKE's front-door key is among a GKE identity's secrets, never a TPU VM's.
    assert A.tls_secret_id in [s for s, _ in platform_for(A).secrets(A)]


def test_the_gke_deadline_job_deletes_its_own_cluster_only() -> None:
    (stop,) = identities.stop_grants(A)
    assert identities.permissions(stop) == ("container.clusters.delete",)
    assert stop.condition is not None
    assert iamrules.condition_grants(stop.condition.expression, _cluster(A))
    for other in (B, A_ELSEWHERE):
        assert not iamrules.condition_grants(stop.condition.expression, _cluster(other))


def test_no_project_grant_of_a_deploy_identity_reaches_the_project_policy() -> None:
    """The GKE project roles (the nodes', the metrics adapter's) are the bootstrap's: no deploy
    identity holds setIamPolicy on the project, which no condition narrows to a member."""
    for dep in (A, B, VM):
        held = {p for g in _grants(dep) for p in identities.permissions(g)}
        assert not [
            p for p in held if p.startswith(("resourcemanager.projects.set", "serviceusage."))
        ]
    members = identities.project_members(A, project=PROJECT, project_number=NUMBER)
    assert {m.role for m in members} == {
        "roles/container.defaultNodeServiceAccount",
        "roles/monitoring.viewer",
    }
    # The TPU VM's node account: the Ops Agent's log and metric writers (issue 38).
    vm = identities.project_members(VM, project=PROJECT, project_number=NUMBER)
    assert {m.role for m in vm} == {"roles/logging.logWriter", "roles/monitoring.metricWriter"}
    assert {m.member for m in vm} == {
        f"serviceAccount:{VM.service_account_id}@{PROJECT}.iam.gserviceaccount.com"
    }


# What a deploy identity holds no permission to make: the bootstrap makes it for a pipeline
# deployment, so the deployment's own stacks must not declare it.
OWNER_ONLY = (
    "google_project_service",
    "google_project_iam_member",
    "google_project_iam_custom_role",
    "google_service_account",
    "google_compute_router",
    "google_compute_router_nat",
    "google_compute_subnetwork",
    "google_secret_manager_secret",
    "google_storage_bucket",
)


def _pipeline_configs() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted((REPO_ROOT / "deployments").glob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        if raw.get("pipeline"):
            found[path.stem] = raw
    # A private TPU VM's router and NAT are the bootstrap's too.
    found["private-tpu-vm"] = {
        "name": "gemma4-private",
        "state_bucket": BUCKET,
        "pipeline": True,
        "provisioning": "spot",
        "network": {"enable_external_ip": False},
    }
    # GKE with the Gateway: its proxy-only subnet is the bootstrap's as well.
    found["gke-gateway"] = {
        "name": "gemma4-gw",
        "platform": "gke",
        "state_bucket": BUCKET,
        "pipeline": True,
        "gke": {"capacity": "spot", "min_version": "1.34.0-gke.1626000"},
        "routing": {"gateway": True, "proxy_subnet_cidr": "10.126.0.0/23"},
    }
    return found


@pytest.mark.parametrize("name", list(_pipeline_configs()))
def test_a_pipeline_deployment_declares_nothing_only_the_owner_may_make(
    synth: Synthesizer, name: str
) -> None:
    stacks = synth(_pipeline_configs()[name])
    declared = {
        f"{stack}: {kind}.{rid}"
        for stack, doc in stacks.items()
        for kind, items in doc.get("resource", {}).items()
        if kind in OWNER_ONLY
        for rid in items
    }
    assert not declared


def test_the_bootstrap_makes_what_the_deploy_identities_may_not(
    bootstrap: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A private TPU VM's and a GKE deployment's router and NAT, the Gateway's proxy-only subnet,
    GKE's TLS secret and container API, and the project roles no deploy identity may grant."""
    import json

    from stacks.bootstrap import synth_bootstrap
    from tpudeploy.bootstrap_config import BOOTSTRAP_STACK, Bootstrap

    project = bootstrap.config.project
    extra = tuple(
        parse_config({**raw, "project": project, "state_bucket": bootstrap.config.state_bucket})
        for name, raw in _pipeline_configs().items()
        if name in ("private-tpu-vm", "gke-gateway")
    )
    outdir = tmp_path_factory.mktemp("bootstrap-extra")
    synth_bootstrap(
        Bootstrap(bootstrap.config, (*bootstrap.deployments, *extra)), outdir=str(outdir)
    )
    doc = json.loads((outdir / "stacks" / BOOTSTRAP_STACK / "cdk.tf.json").read_text())
    res = doc["resource"]
    routers = {r["name"] for r in res["google_compute_router"].values()}
    assert {"gemma4-private-router", "gemma4-gw-router"} <= routers
    (subnet,) = res["google_compute_subnetwork"].values()
    assert subnet["ip_cidr_range"] == "10.126.0.0/23"
    secrets = {s["secret_id"] for s in res["google_secret_manager_secret"].values()}
    # Issue 37: every deployment's front door serves one stored certificate, the TPU VM's too.
    assert {"gemma4-gw-tls", "gemma4-private-tls"} <= secrets
    assert "container.googleapis.com" in {
        s["service"] for s in res["google_project_service"].values()
    }
    roles = {(m["role"], m["member"]) for m in res["google_project_iam_member"].values()}
    node = f"serviceAccount:gemma4-gw-node@{project}.iam.gserviceaccount.com"
    assert ("roles/container.defaultNodeServiceAccount", node) in roles
    stops = [
        m
        for cid, m in res["google_project_iam_member"].items()
        if cid.startswith("gemma4-gw-stop-")
    ]
    assert [s["condition"]["expression"] for s in stops] == [
        "resource.type == 'container.googleapis.com/Cluster' && "
        f"resource.name.endsWith('/locations/{extra[1].zone}/clusters/gemma4-gw')"
    ]
