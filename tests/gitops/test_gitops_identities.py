"""GitOps identities: who may obtain which account, and what each account's grants reach.

Every CEL expression the bootstrap synthesizes (the provider's attribute condition, its attribute
mapping, each IAM condition) is evaluated here with a CEL interpreter (cel-python) against sample
GitHub OIDC claims and sample resource names, never matched as text. Resource names are written
here from Google's documented formats (conditions-resource-attributes), not taken from the code
under test.
"""

from __future__ import annotations

import json
import re
from typing import Any

import celpy
import pytest

from tests.conftest import REPO_ROOT, Synthesizer, resources
from tools.rehearsal.fakes import iamrules
from tpudeploy import identities
from tpudeploy.bootstrap_config import DEPLOY_ATTRIBUTE, Bootstrap, BootstrapConfig
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.platform import platform_for

PROJECT_NUMBER = "123456789012"
PROJECT_NUMBER_REF = "${data.google_project.project.number}"
_ENV = celpy.Environment()


def cel(expression: str, activation: dict[str, Any]) -> Any:
    """Evaluate one CEL expression; an evaluation error (e.g. a missing claim) is returned, not
    raised, so a test can tell 'refused' from 'broken'."""
    program = _ENV.program(_ENV.compile(expression))
    # A dict becomes a CEL map, which evaluate() takes as its activation; the stubs type it as
    # any CEL value, and json_to_cel is public but missing from celpy's __all__.
    context: Any = celpy.json_to_cel(activation)  # type: ignore[attr-defined]
    return program.evaluate(context)


def allows(expression: str, resource_name: str, resource_type: str) -> bool:
    """IAM's verdict on one resource: CEL over the attributes that resource type provides to
    conditions (tools/rehearsal/fakes/iamrules.ATTRIBUTES, from Google's documented list); an
    attribute it does not provide never grants."""
    checked = iamrules.Checked(resource_type, resource_name, ())
    return iamrules.condition_grants(expression, checked)


def _members(boot: dict[str, Any]) -> dict[str, str]:
    """{"${google_service_account.X.member}": account id} for the accounts the bootstrap makes."""
    return {
        f"${{google_service_account.{cid}.member}}": attrs["account_id"]
        for cid, attrs in resources(boot, "google_service_account").items()
    }


def _names(boot: dict[str, Any]) -> dict[str, str]:
    """{"${google_service_account.X.name}": account id}."""
    return {
        f"${{google_service_account.{cid}.name}}": attrs["account_id"]
        for cid, attrs in resources(boot, "google_service_account").items()
    }


def _custom_permissions(boot: dict[str, Any]) -> dict[str, list[str]]:
    return {
        f"${{google_project_iam_custom_role.{cid}.id}}": attrs["permissions"]
        for cid, attrs in resources(boot, "google_project_iam_custom_role").items()
    }


# Predefined roles granted at project level, with what Google documents them to hold: viewers only
# (get/list). Anything else granted project-wide fails test_no_dangerous_unconditioned_grant.
READ_ONLY_PREDEFINED = {
    "roles/tpu.viewer",
    "roles/compute.networkViewer",
    "roles/secretmanager.viewer",
    "roles/cloudscheduler.viewer",
}
# The grants no IAM condition can narrow (docs/gitops.md, residual risks), each held to one
# service: Cloud TPU and Cloud Scheduler evaluate no resource attributes and have no
# per-resource policy.
UNSCOPABLE_SERVICE = {
    "tpudeployTpu": "tpu.",
    "tpudeployNodeStop": "tpu.",
    "tpudeployScheduler": "cloudscheduler.",
    "tpudeployGkeCreate": "container.",
}


def _project_members(bootstrap: Bootstrap) -> set[tuple[str, str]]:
    """(role, member) of the project roles the bootstrap grants to no CI identity, in the form
    the synthesized JSON holds them."""
    number = "${data.google_project.project.number}"
    return {
        (m.role, m.member)
        for dep in bootstrap.deployments
        for m in identities.project_members(
            dep, project=bootstrap.config.project, project_number=number
        )
    }


def test_no_dangerous_unconditioned_project_grant(
    boot: dict[str, Any], bootstrap: Bootstrap
) -> None:
    """No unconditioned project-level binding of a role holding setIamPolicy, delete or actAs,
    except the TPU role the API cannot scope (docs/gitops.md, residual risks), which holds tpu.*
    only."""
    custom = _custom_permissions(boot)
    members = _members(boot)
    assert set(identities.UNSCOPABLE_ROLES) == set(UNSCOPABLE_SERVICE)
    unscopable = {
        f"${{google_project_iam_custom_role.role-{k}.id}}": k for k in identities.UNSCOPABLE_ROLES
    }
    seen_unscopable = set()
    extra = _project_members(bootstrap)
    for cid, grant in resources(boot, "google_project_iam_member").items():
        if (grant["role"], grant["member"]) in extra:
            # The bootstrap's own grants to no CI identity (GKE: the nodes' role, the metrics
            # adapter's reader): tpudeploy/gke/pipeline.py project_members.
            assert grant["member"] not in members, cid
            assert "condition" not in grant
            continue
        assert grant["member"] in members, cid
        role = grant["role"]
        if role.startswith("roles/"):
            assert role in READ_ONLY_PREDEFINED, f"{cid}: predefined {role} at project level"
            assert "condition" not in grant
            continue
        perms = custom[role]
        risky = [p for p in perms if p.endswith((".setIamPolicy", ".delete", ".actAs"))]
        if "condition" in grant:
            continue
        if role in unscopable:
            seen_unscopable.add(role)
            assert all(p.startswith(UNSCOPABLE_SERVICE[unscopable[role]]) for p in perms), perms
            if unscopable[role] == "tpudeployNodeStop":
                # The deadline job's account: delete, nothing else, held by -stop accounts only.
                assert perms == ["tpu.nodes.delete"]
                assert members[grant["member"]].endswith("-stop"), cid
            assert not [p for p in perms if p.endswith((".setIamPolicy", ".actAs"))]
            assert "tpu.nodes.update" not in perms  # see stacks/tpuvm/node.py: replaced instead
            continue
        assert not risky, f"{cid}: unconditioned project grant of {risky}"
    assert seen_unscopable == set(unscopable)


def test_no_identity_can_read_a_secret_value_or_an_object_outside_state(
    boot: dict[str, Any], bootstrap: Bootstrap
) -> None:
    for perms in _custom_permissions(boot).values():
        assert not [p for p in perms if p.startswith("secretmanager.versions.")], perms
        assert not [p for p in perms if p.startswith("iam.")], perms
    predefined = {
        g["role"]
        for t in (
            "google_project_iam_member",
            "google_storage_bucket_iam_member",
            "google_service_account_iam_member",
        )
        for g in resources(boot, t).values()
        if g["role"].startswith("roles/")
    }
    assert predefined == READ_ONLY_PREDEFINED | {
        role for role, _ in _project_members(bootstrap)
    } | {
        "roles/storage.objectViewer",  # the plan identity, on the state bucket only
        "roles/iam.workloadIdentityUser",  # federation, on each CI account only
        "roles/iam.serviceAccountUser",  # on each node and deadline-job account only
    }


def test_service_account_grants_are_per_account(boot: dict[str, Any], bootstrap: Bootstrap) -> None:
    names, members = _names(boot), _members(boot)
    pool = "${google_iam_workload_identity_pool.github-pool.name}"
    got: set[tuple[str, str, str]] = set()
    for grant in resources(boot, "google_service_account_iam_member").values():
        member = members.get(grant["member"], grant["member"])
        got.add((names[grant["service_account_id"]], grant["role"], member))
    repo = bootstrap.config.github_repository
    expected = {
        (
            "tpudeploy-plan",
            "roles/iam.workloadIdentityUser",
            f"principal://iam.googleapis.com/{pool}/subject/repo:{repo}:pull_request",
        ),
        (
            "tpudeploy-plan",
            "roles/iam.workloadIdentityUser",
            f"principal://iam.googleapis.com/{pool}/subject/repo:{repo}:ref:refs/heads/main",
        ),
    }
    # Every committed pipeline deployment, TPU VM and GKE alike.
    for name in bootstrap.config.environments:
        expected |= {
            (
                f"{name}-apply",
                "roles/iam.workloadIdentityUser",
                f"principalSet://iam.googleapis.com/{pool}/attribute.{DEPLOY_ATTRIBUTE}/{name}",
            ),
            # actAs on its own node account and its own deadline job's account, nothing else.
            (f"{name}-node", "roles/iam.serviceAccountUser", f"{name}-apply"),
            (f"{name}-stop", "roles/iam.serviceAccountUser", f"{name}-apply"),
        }
    assert got == expected


# ---- every resource a deployment owns, written from Google's documented name formats ----


def _holds(dep: DeployConfig, role: str) -> bool:
    grants = identities.deploy_grants(dep, project="p", project_number="1", state_bucket="b")
    return any(g.role == role for g in grants)


def owned(dep: DeployConfig, project: str, state_bucket: str) -> list[tuple[str, str]]:
    """(resource name, resource type) of everything deployment `dep` owns: its secrets (GKE's
    TLS key too), its cache bucket, its state objects, and its platform's own: a TPU VM's five
    firewall rules, a GKE deployment's cluster."""
    n = dep.name
    state = f"projects/_/buckets/{state_bucket}/objects/tpudeploy/{n}"
    stacks = platform_for(dep).stacks(dep)
    found = [
        *(
            (f"projects/{PROJECT_NUMBER}/secrets/{sid}", "secretmanager.googleapis.com/Secret")
            for sid, _ in platform_for(dep).secrets(dep)
        ),
        (f"projects/_/buckets/{project}-{n}-xla", "storage.googleapis.com/Bucket"),
        (f"{state}/{stacks[0]}/default.tfstate", "storage.googleapis.com/Object"),
        (f"{state}/{stacks[-1]}/default.tflock", "storage.googleapis.com/Object"),
    ]
    if _holds(dep, "tpudeployFirewall"):
        found += [
            (f"projects/{project}/global/firewalls/{n}-{rule}", "compute.googleapis.com/Firewall")
            for rule in ("deny-all", "deny-all-v6", "allow-api", "allow-api-v6", "allow-iap-ssh")
        ]
    if _holds(dep, "tpudeployGkeCluster"):
        found.append(
            (f"projects/{project}/locations/{dep.zone}/clusters/{n}", iamrules.GKE_CLUSTER)
        )
    return found


def shared(project: str, state_bucket: str) -> list[tuple[str, str]]:
    """What every deployment's calls are also checked on: the project (a create's parent), the
    network (a firewall change's updatePolicy) and the state bucket (listing state objects)."""
    return [
        (f"projects/{project}", iamrules.PROJECT),
        (f"projects/{project}/global/networks/default", iamrules.NETWORK),
        (f"projects/_/buckets/{state_bucket}", iamrules.BUCKET),
    ]


def others(project: str, state_bucket: str) -> list[tuple[str, str]]:
    """Resources no deployment owns: another team's secret and bucket, the state bucket's other
    objects, a secret version (payload), another project's same-named secret."""
    return [
        (
            f"projects/{PROJECT_NUMBER}/secrets/payroll-db-password",
            "secretmanager.googleapis.com/Secret",
        ),
        ("projects/999/secrets/gemma4-staging-hf-token", "secretmanager.googleapis.com/Secret"),
        (
            f"projects/{PROJECT_NUMBER}/secrets/gemma4-staging-hf-token/versions/1",
            "secretmanager.googleapis.com/SecretVersion",
        ),
        ("projects/_/buckets/other-team-data", "storage.googleapis.com/Bucket"),
        (
            f"projects/_/buckets/{state_bucket}/objects/bootstrap.tfstate",
            "storage.googleapis.com/Object",
        ),
        (
            f"projects/{project}/global/firewalls/default-allow-ssh",
            "compute.googleapis.com/Firewall",
        ),
    ]


Conditioned = tuple[str, list[str]]


def _conditions_by_account(boot: dict[str, Any]) -> dict[str, list[Conditioned]]:
    """{account id: [(condition with the project number filled in, the role's permissions)]}."""
    members, custom = _members(boot), _custom_permissions(boot)
    found: dict[str, list[Conditioned]] = {}
    for rtype in ("google_project_iam_member", "google_storage_bucket_iam_member"):
        for grant in resources(boot, rtype).values():
            if "condition" in grant:
                expr = grant["condition"]["expression"].replace(PROJECT_NUMBER_REF, PROJECT_NUMBER)
                entry = (expr, custom[grant["role"]])
                found.setdefault(members[grant["member"]], []).append(entry)
    return found


def reaches(grants: list[Conditioned], name: str, rtype: str) -> bool:
    """Some grant's role holds a permission IAM checks on this type of resource, and its
    condition holds on this one (a condition alone says nothing of the permissions it gates)."""
    return any(
        allows(expr, name, rtype) and any(iamrules.CHECKED_ON[p] == rtype for p in perms)
        for expr, perms in grants
    )


def test_each_deploy_identity_reaches_only_its_own_resources(
    boot: dict[str, Any], bootstrap: Bootstrap
) -> None:
    cfg = bootstrap.config
    by_account = _conditions_by_account(boot)
    deploy_ids = {d.deploy_account_id for d in bootstrap.deployments}
    assert deploy_ids <= set(by_account)
    # The only other conditioned grants: GKE's deadline jobs', on their own clusters.
    assert {a for a in by_account if a not in deploy_ids} == {
        d.stop_account_id for d in bootstrap.deployments if _holds(d, "tpudeployGkeCluster")
    }
    network = (f"projects/{cfg.project}/global/networks/default", "compute.googleapis.com/Network")
    state_bucket = (f"projects/_/buckets/{cfg.state_bucket}", "storage.googleapis.com/Bucket")
    everything = {
        dep.name: owned(dep, cfg.project, cfg.state_bucket) for dep in bootstrap.deployments
    }
    for dep in bootstrap.deployments:
        conditions = by_account[dep.deploy_account_id]
        assert len(conditions) == 4  # state, secrets, cache bucket, firewall (GKE: cluster)

        def reach(name: str, rtype: str) -> bool:
            return reaches(conditions, name, rtype)  # noqa: B023

        for resource in everything[dep.name]:
            assert reach(*resource), (dep.name, resource)
        for other, theirs in everything.items():
            if other != dep.name:
                for resource in theirs:
                    assert not reach(*resource), (dep.name, "reaches", resource)
        for resource in others(cfg.project, cfg.state_bucket):
            assert not reach(*resource), (dep.name, "reaches", resource)
        # Shared containers, reached only for what their permission needs: listing object names
        # in the state bucket, and updatePolicy to add its own rules to the network.
        assert reach(*state_bucket)
        assert reach(*network) == _holds(dep, "tpudeployFirewall")


def test_a_name_prefix_never_reaches_a_longer_deployment_name() -> None:
    """Deployment `gemma4` must not reach `gemma4-staging`'s resources (nor `gemma4-x`'s
    state): conditions use exact names and a slash-terminated state prefix."""
    short, long_ = parse_config({"name": "gemma4"}), parse_config({"name": "gemma4-staging"})
    grants = identities.deploy_grants(
        short, project="my-project-1", project_number=PROJECT_NUMBER, state_bucket="tfstate-x"
    )
    conditions = [
        (g.condition.expression, list(identities.permissions(g))) for g in grants if g.condition
    ]
    for resource in owned(long_, "my-project-1", "tfstate-x"):
        assert not reaches(conditions, *resource), resource
    for resource in owned(short, "my-project-1", "tfstate-x"):
        assert reaches(conditions, *resource), resource


# ---- who may obtain which account: provider condition + attribute mapping + bindings ----


def claims(cfg: BootstrapConfig, kind: str, **extra: str) -> dict[str, str]:
    """A GitHub Actions OIDC token's claims (default subject format)."""
    repo = cfg.github_repository
    base = {
        "repository": repo,
        "repository_id": str(cfg.github_repository_id),
        "repository_owner_id": str(cfg.github_repository_owner_id),
    }
    tokens = {
        # pull_request event: ref is the merge ref, workflow as in the pull request's branch
        "pull_request": {
            "sub": f"repo:{repo}:pull_request",
            "ref": "refs/pull/7/merge",
            "job_workflow_ref": f"{repo}/.github/workflows/pull-request.yml@refs/pull/7/merge",
        },
        "drift": {
            "sub": f"repo:{repo}:ref:refs/heads/main",
            "ref": "refs/heads/main",
            "job_workflow_ref": f"{repo}/.github/workflows/drift.yml@refs/heads/main",
        },
    }
    token = {**base, **tokens.get(kind, {}), **extra}
    return token


def env_token(
    cfg: BootstrapConfig,
    env: str,
    *,
    ref: str = "refs/heads/main",
    workflow: str = "deploy.yml",
    repo: str | None = None,
) -> dict[str, str]:
    repo = repo or cfg.github_repository
    return {
        "repository": repo,
        "repository_id": str(cfg.github_repository_id),
        "repository_owner_id": str(cfg.github_repository_owner_id),
        "sub": f"repo:{repo}:environment:{env}",
        "environment": env,
        "ref": ref,
        "job_workflow_ref": f"{repo}/.github/workflows/{workflow}@{ref}",
    }


def admitted_accounts(boot: dict[str, Any], token: dict[str, str]) -> set[str]:
    """The service accounts a token can impersonate: the provider's condition must hold, then
    a workloadIdentityUser binding must match its subject or its mapped attribute."""
    (provider,) = resources(boot, "google_iam_workload_identity_pool_provider").values()
    verdict = cel(provider["attribute_condition"], {"assertion": token})
    assert isinstance(verdict, celpy.celtypes.BoolType), verdict
    if not verdict:
        return set()
    mapped = {}
    for key, expr in provider["attribute_mapping"].items():
        value = cel(expr, {"assertion": token})
        assert isinstance(value, celpy.celtypes.StringType), (key, value)
        mapped[key] = str(value)
    pool = "${google_iam_workload_identity_pool.github-pool.name}"
    names = _names(boot)
    out = set()
    for grant in resources(boot, "google_service_account_iam_member").values():
        if grant["role"] != "roles/iam.workloadIdentityUser":
            continue
        member = grant["member"]
        subject = f"principal://iam.googleapis.com/{pool}/subject/"
        attribute = f"principalSet://iam.googleapis.com/{pool}/attribute."
        if member.startswith(subject):
            match = mapped["google.subject"] == member.removeprefix(subject)
        else:
            assert member.startswith(attribute), member
            key, _, value = member.removeprefix(attribute).partition("/")
            match = mapped[f"attribute.{key}"] == value
        if match:
            out.add(names[grant["service_account_id"]])
    return out


def test_deploy_identity_only_from_its_environment_on_main_from_the_deploy_workflows(
    boot: dict[str, Any], bootstrap_cfg: BootstrapConfig
) -> None:
    cfg = bootstrap_cfg
    for env in ("gemma4-staging", "gemma4-prod"):
        for workflow in ("deploy.yml", "destroy.yml", "recover.yml"):
            assert admitted_accounts(boot, env_token(cfg, env, workflow=workflow)) == {
                f"{env}-apply"
            }
    refused = [
        env_token(cfg, "gemma4-prod", ref="refs/heads/feature"),  # a branch naming the env
        env_token(cfg, "gemma4-prod", ref="refs/pull/7/merge"),  # a pull request's own copy
        env_token(cfg, "gemma4-prod", workflow="evil.yml"),  # another workflow on main
        env_token(cfg, "gemma4-prod", workflow="pull-request.yml"),
        env_token(cfg, "gemma4-prod", repo="evil/fork"),  # another repository
        env_token(cfg, "unknown-env"),  # no deployment of that name
        # deploy.yml as committed on a branch, claiming ref main in the job: the workflow ref
        # names the branch, so it is refused.
        {
            **env_token(cfg, "gemma4-prod"),
            "job_workflow_ref": f"{cfg.github_repository}/.github/workflows/deploy.yml"
            "@refs/heads/x",
        },
    ]
    for token in refused:
        assert admitted_accounts(boot, token) == set(), token
    # The provider's condition alone refuses each of them (the mapping repeats the checks, so
    # the end-to-end verdict above would hide a weakened condition).
    (provider,) = resources(boot, "google_iam_workload_identity_pool_provider").values()
    for token in refused:
        verdict = cel(provider["attribute_condition"], {"assertion": token})
        assert isinstance(verdict, celpy.celtypes.BoolType) and not verdict, token


def test_plan_identity_only_for_pull_requests_and_main(
    boot: dict[str, Any], bootstrap_cfg: BootstrapConfig
) -> None:
    cfg = bootstrap_cfg
    assert admitted_accounts(boot, claims(cfg, "pull_request")) == {"tpudeploy-plan"}
    assert admitted_accounts(boot, claims(cfg, "drift")) == {"tpudeploy-plan"}
    branch = claims(
        cfg,
        "drift",
        sub=f"repo:{cfg.github_repository}:ref:refs/heads/feature",
        ref="refs/heads/feature",
    )
    assert admitted_accounts(boot, branch) == set()
    fork = claims(cfg, "pull_request", repository="evil/fork", sub="repo:evil/fork:pull_request")
    assert admitted_accounts(boot, fork) == set()


def test_a_pull_request_that_edits_a_workflow_gets_nothing_more(
    boot: dict[str, Any], bootstrap_cfg: BootstrapConfig
) -> None:
    """A pull request can change deploy.yml in its branch and add `environment: gemma4-prod` to
    any job: the token then carries the environment subject, the merge ref and the branch's copy
    of the workflow, and obtains nothing (not even the plan identity)."""
    cfg = bootstrap_cfg
    repo = cfg.github_repository
    for workflow in ("deploy.yml", "pull-request.yml"):
        token = env_token(cfg, "gemma4-prod", ref="refs/pull/7/merge", workflow=workflow)
        assert admitted_accounts(boot, token) == set()
    # The mapping alone (without the provider's condition) also refuses it: defence in depth.
    (provider,) = resources(boot, "google_iam_workload_identity_pool_provider").values()
    gate = provider["attribute_mapping"][f"attribute.{DEPLOY_ATTRIBUTE}"]
    assert (
        str(cel(gate, {"assertion": env_token(cfg, "gemma4-prod", ref="refs/pull/7/merge")})) == "-"
    )
    assert str(cel(gate, {"assertion": claims(cfg, "pull_request")})) == "-"
    assert str(cel(gate, {"assertion": env_token(cfg, "gemma4-prod")})) == "gemma4-prod"
    assert repo in gate


def test_the_repository_is_pinned_by_its_immutable_ids(bootstrap_cfg: BootstrapConfig) -> None:
    """Issue 21, defect 6: a repository deleted and re-created under the same name (or an owner
    renamed and the name taken) carries other ids and gets nothing, on every path."""
    cfg = bootstrap_cfg
    for token in (env_token(cfg, "gemma4-prod"), claims(cfg, "pull_request"), claims(cfg, "drift")):
        assert cel(cfg.attribute_condition, {"assertion": token})
        for claim in ("repository_id", "repository_owner_id"):
            other = {**token, claim: "1"}
            assert not cel(cfg.attribute_condition, {"assertion": other}), (claim, token)
        gate = _mapping_gate(cfg)
        assert str(cel(gate, {"assertion": {**token, "repository_id": "1"}})) == "-"


def _mapping_gate(cfg: BootstrapConfig) -> str:
    return cfg.attribute_mapping[f"attribute.{DEPLOY_ATTRIBUTE}"]


# ---- the node stack of a pipeline deployment: no in-place TPU update ----


def test_pipeline_vm_is_replaced_not_patched(synth: Synthesizer) -> None:
    data = {**json.loads(json.dumps(_staging())), "provisioning": "spot"}
    node = synth(data)[f"{data['name']}-node"]
    (vm,) = resources(node, "google_tpu_v2_vm").values()
    assert vm["lifecycle"]["replace_triggered_by"] == ["terraform_data.node-spec"]
    spec = resources(node, "terraform_data")["node-spec"]["input"]
    # Every field the TPU API would patch in place is in the trigger.
    assert spec["metadata"] == vm["metadata"]
    assert spec["labels"] == vm["labels"] and spec["tags"] == vm["tags"]
    assert spec["description"] == vm["description"]


@pytest.mark.parametrize("provisioning", ["spot", "on-demand"])
def test_local_vm_is_replaced_when_what_the_boot_reads_changes(
    synth: Synthesizer, provisioning: str
) -> None:
    """google-beta patches metadata in place and the startup script runs at boot only (issue 21,
    defect 3): every VM deployment replaces its node when the metadata changes."""
    node = synth({"provisioning": provisioning})["gemma4-v5e-node"]
    vm = resources(node, "google_tpu_v2_vm")["node"]
    assert vm["lifecycle"]["replace_triggered_by"] == ["terraform_data.node-spec"]
    spec = resources(node, "terraform_data")["node-spec"]["input"]
    # The boot's inputs only: a label or tag edit is patched in place, which the boot never reads.
    assert spec == {"metadata": vm["metadata"]}


def _staging() -> dict[str, Any]:
    import tomllib

    return tomllib.loads((REPO_ROOT / "deployments/staging.toml").read_text(encoding="utf-8"))


def test_grant_table_in_the_gitops_page_lists_every_grant() -> None:
    text = (REPO_ROOT / "docs" / "gitops.md").read_text(encoding="utf-8")
    table = identities.grant_table()
    assert table in text
    for role in identities.CUSTOM_ROLES:
        assert re.search(rf"`{role}`", table), role


# The firewall condition d90ced4 shipped: its network branch names a resource that provides no
# resource.name, so it never granted compute.networks.updatePolicy (issue 21, defect 2).
OLD_FIREWALL = (
    "resource.name in ['projects/p-1/global/firewalls/gemma4-x-deny-all'] || "
    "resource.name == 'projects/p-1/global/networks/default'"
)


def test_updatepolicy_reaches_the_network_by_type_and_rules_only_by_name() -> None:
    dep = parse_config({"name": "gemma4-x"})
    (firewall,) = [
        g.condition.expression
        for g in identities.deploy_grants(
            dep, project="p-1", project_number=PROJECT_NUMBER, state_bucket="b-1"
        )
        if g.role == "tpudeployFirewall" and g.condition
    ]
    net = iamrules.NETWORK
    for network in ("default", "vpc"):
        assert allows(firewall, f"projects/p-1/global/networks/{network}", net)
    assert allows(firewall, "projects/p-1/global/firewalls/gemma4-x-deny-all", iamrules.FIREWALL)
    for other in ("default-allow-ssh", "gemma4-y-deny-all", "gemma4-x-deny-all-2"):
        assert not allows(firewall, f"projects/p-1/global/firewalls/{other}", iamrules.FIREWALL)
    # What the old condition did: the network branch is never true, so no rule could change.
    assert not allows(OLD_FIREWALL, "projects/p-1/global/networks/default", net)
    assert allows(
        OLD_FIREWALL, "projects/p-1/global/firewalls/gemma4-x-deny-all", iamrules.FIREWALL
    )


def test_every_conditioned_permission_is_granted_on_what_it_is_checked_on(
    bootstrap: Bootstrap,
) -> None:
    """Issue 21, defects 1 and 2, as one rule: for each permission of each conditional grant,
    the condition must hold on some resource of the type IAM checks that permission on
    (iamrules.CHECKED_ON) that the deployment needs. secretmanager.secrets.create (checked on
    the project) and compute.networks.updatePolicy (on the network, which carries no name)
    failed this on d90ced4."""
    cfg = bootstrap.config
    for dep in bootstrap.deployments:
        needed = [
            *owned(dep, cfg.project, cfg.state_bucket),
            *shared(cfg.project, cfg.state_bucket),
        ]
        grants = identities.deploy_grants(
            dep, project=cfg.project, project_number=PROJECT_NUMBER, state_bucket=cfg.state_bucket
        )
        for grant in grants:
            if grant.condition is None:
                continue
            for permission in identities.permissions(grant):
                kind = iamrules.CHECKED_ON[permission]
                candidates = [name for name, rtype in needed if rtype == kind]
                assert any(allows(grant.condition.expression, n, kind) for n in candidates), (
                    f"{dep.name}: {grant.role} holds {permission}, checked on a {kind}, and its "
                    f"condition grants it on none of {candidates}"
                )


def test_the_bootstrap_creates_each_pipeline_deployments_secrets_and_bucket(
    boot: dict[str, Any], bootstrap: Bootstrap
) -> None:
    """What no deploy identity can create (the create is checked on the project)."""
    secrets = {a["secret_id"] for a in resources(boot, "google_secret_manager_secret").values()}
    buckets = {a["name"] for a in resources(boot, "google_storage_bucket").values()}
    for dep in bootstrap.deployments:
        assert {dep.hf_token_secret_id, dep.api_key_secret_id} <= secrets
        assert dep.compile_cache_bucket(bootstrap.config.project) in buckets
    for perms in _custom_permissions(boot).values():
        assert "secretmanager.secrets.create" not in perms
        assert "storage.buckets.create" not in perms


@pytest.mark.xfail(
    strict=True,
    reason="UNFINISHED (issue 36 item 10, kept in issue 41): a pipeline deployment's stop "
    "account is granted by the GitOps bootstrap, which knows no deadline, so its grant has no "
    "request.time end and the deadline job's yearly cron run still deletes whatever has the "
    "node's (GKE: the cluster's) name; a local deployment's grant ends with the deadline "
    "(stacks/deadline_job.py). Letting the deploy identity write the grant itself would take "
    "setIamPolicy on the project, narrowed at best to the stop role by "
    "iam.googleapis.com/modifiedGrantsByRole (IAM, 'Set limits on granting roles'), which "
    "limits the role, never the member or its condition: a GKE deploy identity could then "
    "grant itself container.clusters.delete on every cluster of the project, another "
    "deployment's included. Isolation between deployments was chosen over the time bound",
)
def test_a_pipeline_deployments_stop_grant_ends_with_its_deadline(bootstrap: Bootstrap) -> None:
    assert bootstrap.deployments
    for dep in bootstrap.deployments:
        for grant in identities.stop_grants(dep):
            assert grant.condition is not None, grant
            assert "request.time" in grant.condition.expression, grant
