"""Your own account's roles come from the stacks (issue 23 item 1): each resource type a stack
declares has its permissions, the docs list is generated from them, and `make preflight` tests
them with projects.testIamPermissions against a fake that refuses what the real API refuses."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import REPO_ROOT, Synthesizer, gke_local_raw
from tools import readme
from tools.rehearsal.fakes.resourcemanager import FakeResourceManager
from tpudeploy import identities, permissions, preflight
from tpudeploy.config import parse_config
from tpudeploy.gcp.apis import RESOURCE_MANAGER

SPOT = parse_config({"provisioning": "spot", "project": "perm-proj-1"})
FLEX = parse_config({"project": "perm-proj-1"})


def _declared(path: Path) -> set[str]:
    """Resource types a stack module declares: the provider classes it imports, and the
    terraform_resource_type of each raw TerraformResource."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        module = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
        if module.startswith("cdktf_cdktf_provider_google_beta."):
            found.add(module.rsplit(".", 1)[1])
        if module.startswith("cdktf_cdktf_provider_kubernetes.") and not module.endswith(
            ".provider"
        ):
            found.add("kubernetes_" + module.rsplit(".", 1)[1])
        if isinstance(node, ast.keyword) and node.arg == "terraform_resource_type":
            assert isinstance(node.value, ast.Constant)
            found.add(str(node.value.value))
    return found


@pytest.mark.parametrize(
    "stack",
    [
        "secrets.py",
        "tpuvm/node.py",
        "deadline_job.py",
        "gke/cluster.py",
        "gke/serving.py",
        "gke/adapter.py",
        "gke/routing_objects.py",
    ],
)
def test_every_type_a_stack_declares_has_its_permissions(stack: str) -> None:
    declared = _declared(REPO_ROOT / "stacks" / stack)
    assert declared, stack
    assert declared - set(permissions.NEEDS) == set(), stack


@pytest.mark.parametrize("overrides", [{}, {"provisioning": "spot"}, {"provisioning": "on-demand"}])
def test_the_list_is_what_each_synthesized_stack_holds(
    synth: Synthesizer, overrides: dict[str, Any]
) -> None:
    cfg = parse_config(overrides)
    stacks = synth(overrides or None)
    secrets = set(stacks[cfg.secrets_stack_name].get("resource", {}))
    node = set(stacks[cfg.node_stack_name].get("resource", {}))
    real = set(permissions.NEEDS) - {permissions.QUEUED_RESOURCE}
    assert secrets == set(permissions.resource_types(cfg, "deploy-secrets")) & real
    assert secrets | node == set(permissions.resource_types(cfg, "deploy")) & real


# The shipped GKE deployment, as tests/stacks/test_gke_synth.py synthesizes it: one synth per
# session.
GKE_RAW = gke_local_raw()  # local mode: tests/conftest.py says why


def test_the_gke_list_is_what_each_synthesized_gke_stack_holds(synth: Synthesizer) -> None:
    """Issue 25: preflight's list for a GKE deploy is generated from the GKE stacks' own types,
    data sources included (each is an API call at plan time)."""
    cfg = parse_config(GKE_RAW)
    stacks = synth(GKE_RAW)

    def types(name: str) -> set[str]:
        body = stacks[name]
        return set(body.get("resource", {})) | {f"data_{t}" for t in body.get("data", {})}

    secrets = types(cfg.secrets_stack_name)
    everything = secrets | types(cfg.gke_stack_name) | types(cfg.serving_stack_name)
    assert secrets == set(permissions.resource_types(cfg, "deploy-secrets"))
    assert everything == set(permissions.resource_types(cfg, "deploy"))
    wanted = set(permissions.project_permissions(cfg, "deploy"))
    for permission in (
        "container.clusters.create",
        "container.deployments.create",
        "container.thirdPartyObjects.create",  # ComputeClass, PodMonitoring, SecretProviderClass
        "container.clusters.getCredentials",
    ):
        assert permission in wanted
    # Nothing of the TPU VM's: a GKE deploy creates no TPU VM or queued resource; its deadline
    # job (deployments/gke.toml keeps the default max_run_duration) deletes the cluster.
    assert not {p for p in wanted if p.startswith("tpu.")}
    assert cfg.deadline_seconds is not None and "cloudscheduler.jobs.create" in wanted
    assert permissions.ACT_AS in permissions.needs(cfg, "deploy")


def test_spot_and_on_demand_need_what_the_deadline_job_needs() -> None:
    """The README's old list left these out; someone who followed it got PERMISSION_DENIED."""
    wanted = set(permissions.project_permissions(SPOT, "deploy"))
    for permission in (
        "iam.roles.create",  # the stop account's custom role
        "resourcemanager.projects.setIamPolicy",  # its project binding
        "cloudscheduler.jobs.create",  # the deadline job
    ):
        assert permission in wanted
    # A flex-start node has no deadline job, but its account's log and metric writers are
    # project bindings too (issue 38), so only the role and the job stay spot's own.
    flex = permissions.project_permissions(FLEX, "deploy")
    assert "resourcemanager.projects.setIamPolicy" in flex
    assert "iam.roles.create" not in flex and "cloudscheduler.jobs.create" not in flex
    assert permissions.ACT_AS in permissions.needs(SPOT, "deploy")
    section = readme.deploy_roles_section()
    for text in ("roles/cloudscheduler.admin", "roles/iam.roleAdmin", "NAME-stop"):
        assert text in section
    assert "`cloudscheduler.googleapis.com`" in section
    assert section in readme.DEPLOYING.read_text()


def test_the_fake_refuses_what_the_real_api_refuses() -> None:
    with FakeResourceManager() as rm:
        url = f"http://{rm.host}/v1/projects/p-1:testIamPermissions"
        bodies: list[dict[str, Any]] = [
            {"permissions": ["storage.*"]},
            {"permission": []},
            {"permissions": "a.b.c"},
        ]
        for body in bodies:
            assert requests.post(url, data=json.dumps(body), timeout=5).status_code == 400, body
        rm.held = {"a.b.c"}
        answer = requests.post(url, data=json.dumps({"permissions": ["a.b.c", "x.y.z"]}), timeout=5)
        assert answer.json() == {"permissions": ["a.b.c"]}


def test_preflight_names_each_missing_permission_and_the_role(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeResourceManager() as rm:
        monkeypatch.setenv(RESOURCE_MANAGER.emulator_env, rm.host)
        rm.held = set(permissions.project_permissions(FLEX, "deploy"))  # enough for flex-start
        assert preflight.check_permissions(FLEX, "deploy").ok
        check = preflight.check_permissions(SPOT, "deploy")
        assert not check.ok and not check.note
        for missing in ("cloudscheduler.jobs.create", "iam.roles.create"):
            assert missing in check.line
        assert "roles/cloudscheduler.admin" in check.line and "roles/iam.roleAdmin" in check.line
        rm.held = None  # an owner
        assert preflight.check_permissions(SPOT, "deploy").ok


def test_a_test_that_cannot_be_made_is_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RESOURCE_MANAGER.emulator_env, "127.0.0.1:9")
    check = preflight.check_permissions(SPOT, "deploy-secrets")
    assert check.ok and check.note and "PERMISSION_DENIED" in check.line


@pytest.mark.parametrize("platform", ["tpu-vm", "gke"])
def test_a_pipeline_deploy_identity_is_asked_for_its_own_project_grants_only(
    monkeypatch: pytest.MonkeyPatch, platform: str
) -> None:
    """Issue 41: the deploy job runs preflight as the deploy identity, whose grants on secrets,
    buckets and the cluster are conditioned (invisible to a test on the project) and which holds
    nothing of what the bootstrap makes: asking it for secretmanager.secrets.create or
    serviceusage.services.enable refused every pipeline deploy."""
    cfg = parse_config(
        {
            "name": "gemma4-pipe",
            "project": "my-proj-123",
            "state_bucket": "tfstate-bucket-1",
            "pipeline": True,
            "provisioning": "spot",
            **({"platform": platform, "gke": {"capacity": "spot"}} if platform == "gke" else {}),
        }
    )
    with FakeResourceManager() as rm:
        monkeypatch.setenv(RESOURCE_MANAGER.emulator_env, rm.host)
        unconditioned = {
            p
            for g in identities.deploy_grants(
                cfg, project="my-proj-123", project_number="1", state_bucket="tfstate-bucket-1"
            )
            if g.scope == identities.PROJECT and g.condition is None
            for p in identities.permissions(g)
        }
        rm.held = set(unconditioned)
        check = preflight.check_permissions(cfg, "deploy")
        assert check.ok, check.line
        assert "gemma4-pipe-apply" in check.line
        # The first of them missing: named, with what to run.
        missing = sorted(unconditioned)[0]
        rm.held = unconditioned - {missing}
        check = preflight.check_permissions(cfg, "deploy")
        assert not check.ok and missing in check.line and "make bootstrap" in check.line
    owner_only = {"secretmanager.secrets.create", "serviceusage.services.enable"}
    assert not owner_only & unconditioned


@pytest.mark.parametrize("platform", ["tpu-vm", "gke"])
def test_remote_state_alone_asks_your_account_for_everything_its_stacks_make(
    monkeypatch: pytest.MonkeyPatch, platform: str
) -> None:
    """Issue 37: state_bucket without pipeline = true is a teammate's local deploy with shared
    state (`make state-init`): its stacks create the node account, secrets and APIs, so preflight
    asks the caller for the permissions to make them, not for a deploy identity's."""
    cfg = parse_config(
        {
            "name": "gemma4-team",
            "project": "my-proj-123",
            "state_bucket": "tfstate-bucket-1",
            "provisioning": "spot",
            **({"platform": platform, "gke": {"capacity": "spot"}} if platform == "gke" else {}),
        }
    )
    wanted = set(permissions.project_permissions(cfg, "deploy"))
    assert {"secretmanager.secrets.create", "serviceusage.services.enable"} <= wanted
    with FakeResourceManager() as rm:
        monkeypatch.setenv(RESOURCE_MANAGER.emulator_env, rm.host)
        rm.held = wanted - {"secretmanager.secrets.create"}
        check = preflight.check_permissions(cfg, "deploy")
        assert not check.ok
        assert "your account lacks 1 permission(s)" in check.line
        assert "secretmanager.secrets.create" in check.line
