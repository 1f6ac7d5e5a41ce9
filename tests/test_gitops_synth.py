"""GitOps synth: remote state per deployment and stack, deployments side by side, the bootstrap.

Synthesizes the committed example deployments (deployments/*.toml) and the committed
gitops.toml, so the files a user copies are the ones under test.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import REPO_ROOT, Synthesizer, resources

from tpudeploy import gitops
from tpudeploy.bootstrap import (
    BOOTSTRAP_STACK,
    BootstrapConfig,
    parse_bootstrap,
)
from tpudeploy.config import ConfigError, parse_config

BASIC_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
STAGING = "deployments/staging.toml"
PRODUCTION = "deployments/production.toml"


def overrides(rel: str) -> dict[str, Any]:
    return tomllib.loads((REPO_ROOT / rel).read_text(encoding="utf-8"))


def all_resource_types(stack: dict[str, Any]) -> set[str]:
    return set(stack.get("resource", {}))


# ---- remote state ----


def test_local_backend_without_state_bucket(synth: Synthesizer) -> None:
    stacks = synth({})
    assert set(stacks) == {"gemma4-v5e-secrets", "gemma4-v5e-node"}
    for name, stack in stacks.items():
        # Relative to cdktf.out/stacks/<stack>/: the repository root, outside the synth output.
        assert stack["terraform"]["backend"] == {
            "local": {"path": f"../../../terraform.{name}.tfstate"}
        }


@pytest.mark.parametrize("rel", [STAGING, PRODUCTION])
def test_gcs_backend_one_prefix_per_deployment_and_stack(synth: Synthesizer, rel: str) -> None:
    data = overrides(rel)
    stacks = synth(data)
    name = data["name"]
    assert set(stacks) == {f"{name}-secrets", f"{name}-node"}
    for stack_name, stack in stacks.items():
        assert stack["terraform"]["backend"] == {
            "gcs": {"bucket": data["state_bucket"], "prefix": f"tpudeploy/{name}/{stack_name}"}
        }


def _names(stack: dict[str, Any]) -> set[str]:
    """The cloud-side names a stack creates (what two deployments must never share)."""
    keys = {"name", "node_id", "account_id", "secret_id", "queued_resource_id"}
    found = set()
    for rtype, items in stack.get("resource", {}).items():
        if rtype == "google_project_service":
            continue  # APIs are project-wide on purpose (disable_on_destroy = false)
        for attrs in items.values():
            found |= {
                v
                for k, v in attrs.items()
                # A bare reference to another resource's attribute names nothing by itself.
                if k in keys and isinstance(v, str) and not re.fullmatch(r"\$\{[^}]*\}", v)
            }
    return found


def test_two_deployments_side_by_side_share_nothing(synth: Synthesizer) -> None:
    staging, production = synth(overrides(STAGING)), synth(overrides(PRODUCTION))
    assert not set(staging) & set(production)
    prefixes = [
        s["terraform"]["backend"]["gcs"]["prefix"]
        for s in [*staging.values(), *production.values()]
    ]
    assert len(set(prefixes)) == 4
    staging_names = set().union(*(_names(s) for s in staging.values()))
    production_names = set().union(*(_names(s) for s in production.values()))
    assert staging_names and production_names
    assert not staging_names & production_names, staging_names & production_names
    # Each deployment's names carry its own name (deterministic, no random suffix).
    assert all("gemma4-staging" in n for n in staging_names), staging_names


def test_synth_keeps_cdktf_out_to_one_deployment(
    synth: Synthesizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `make synth` does when deployments are synthesized one after the other."""
    from stacks.app import synth as app_synth

    staging = parse_config(overrides(STAGING))
    production = parse_config(overrides(PRODUCTION))
    synth(overrides(STAGING))  # the jsii assembly is loaded once per session
    app_synth(staging, outdir=str(tmp_path), source=STAGING)
    app_synth(production, outdir=str(tmp_path), source=PRODUCTION)
    capsys.readouterr()
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    expected = {"gemma4-prod-secrets", "gemma4-prod-node"}
    assert set(manifest["stacks"]) == expected
    assert {p.name for p in (tmp_path / "stacks").iterdir()} == expected


def test_example_deployments_are_the_pipeline(tmp_path: Path) -> None:
    names = {d.config: d.name for d in gitops.pipeline_deployments(REPO_ROOT)}
    assert names[STAGING] == "gemma4-staging"
    assert names[PRODUCTION] == "gemma4-prod"


# ---- bootstrap ----


@pytest.fixture
def boot(bootstrap_outdir: Path) -> dict[str, Any]:
    path = bootstrap_outdir / "stacks" / BOOTSTRAP_STACK / "cdk.tf.json"
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def test_bootstrap_keeps_its_state_local(boot: dict[str, Any]) -> None:
    assert boot["terraform"]["backend"] == {
        "local": {"path": f"../../../../terraform.{BOOTSTRAP_STACK}.tfstate"}
    }


def test_state_bucket_settings(boot: dict[str, Any], bootstrap_cfg: BootstrapConfig) -> None:
    (bucket,) = resources(boot, "google_storage_bucket").values()
    assert bucket["name"] == bootstrap_cfg.state_bucket
    assert bucket["force_destroy"] is False
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    assert bucket["versioning"] == {"enabled": True}
    assert bucket["lifecycle"] == {"prevent_destroy": True}
    (rule,) = bucket["lifecycle_rule"]
    assert rule["action"] == {"type": "Delete"}
    assert rule["condition"]["with_state"] == "ARCHIVED"
    assert rule["condition"]["num_newer_versions"] == bootstrap_cfg.noncurrent_versions


def test_deployments_use_the_bootstrap_bucket(bootstrap_cfg: BootstrapConfig) -> None:
    for dep in gitops.pipeline_deployments(REPO_ROOT):
        assert dep.state_bucket == bootstrap_cfg.state_bucket, dep.config


def _accounts(boot: dict[str, Any]) -> dict[str, str]:
    """{member expression: account id} of the service accounts the bootstrap creates."""
    return {
        f"${{google_service_account.{cid}.member}}": attrs["account_id"]
        for cid, attrs in resources(boot, "google_service_account").items()
    }


def _project_roles(boot: dict[str, Any]) -> dict[str, set[str]]:
    members = _accounts(boot)
    roles: dict[str, set[str]] = {}
    for attrs in resources(boot, "google_project_iam_member").values():
        roles.setdefault(members[attrs["member"]], set()).add(attrs["role"])
    return roles


def test_only_the_roles_the_stacks_need(
    boot: dict[str, Any], bootstrap_cfg: BootstrapConfig
) -> None:
    roles = _project_roles(boot)
    custom = "${google_project_iam_custom_role.%s.id}"
    assert roles == {
        bootstrap_cfg.deploy_account_id: {
            "roles/tpu.admin",
            "roles/compute.securityAdmin",
            "roles/serviceusage.serviceUsageAdmin",
            "roles/iam.serviceAccountUser",
            custom % "deployer-role",
        },
        bootstrap_cfg.plan_account_id: {
            "roles/tpu.viewer",
            "roles/compute.networkViewer",
            "roles/secretmanager.viewer",
            "roles/iam.serviceAccountViewer",
            "roles/serviceusage.serviceUsageViewer",
            custom % "planner-role",
        },
    }
    # Broad predefined roles the custom role replaces.
    granted = set().union(*roles.values())
    assert not granted & {
        "roles/iam.serviceAccountAdmin",
        "roles/secretmanager.admin",
        "roles/storage.admin",
    }


def test_custom_roles_hold_no_data_access(boot: dict[str, Any]) -> None:
    custom = resources(boot, "google_project_iam_custom_role")
    deployer = set(custom["deployer-role"]["permissions"])
    planner = set(custom["planner-role"]["permissions"])
    # Never the token's value, never objects, never the power to grant itself an identity.
    for perm in deployer | planner:
        assert not perm.startswith(("secretmanager.versions.", "storage.objects.")), perm
    assert "iam.serviceAccounts.setIamPolicy" not in deployer
    assert "iam.serviceAccountKeys.create" not in deployer
    assert all(re.search(r"\.(get|list|getIamPolicy)$", p) for p in planner), planner


def test_no_basic_roles_and_no_keys_anywhere(
    boot: dict[str, Any], synth: Synthesizer, tmp_path: Path
) -> None:
    documents = [boot, *synth(overrides(STAGING)).values(), *synth({}).values()]
    for doc in documents:
        assert "google_service_account_key" not in all_resource_types(doc)
        text = json.dumps(doc)
        for role in BASIC_ROLES:
            assert f'"{role}"' not in text, role


def test_state_bucket_grants_are_bucket_level(boot: dict[str, Any]) -> None:
    members = _accounts(boot)
    grants = {
        members[a["member"]]: (a["bucket"], a["role"])
        for a in resources(boot, "google_storage_bucket_iam_member").values()
    }
    bucket = "${google_storage_bucket.state.name}"
    assert grants == {
        "tpudeploy-deploy": (bucket, "roles/storage.objectAdmin"),
        # Plans run with -lock=false (pull-request.yml, drift.yml): reading is enough.
        "tpudeploy-plan": (bucket, "roles/storage.objectViewer"),
    }


def test_federation_grants(boot: dict[str, Any], bootstrap_cfg: BootstrapConfig) -> None:
    repo = bootstrap_cfg.github_repository
    pool = "principal://iam.googleapis.com/${google_iam_workload_identity_pool.github-pool.name}"
    grants: dict[str, set[str]] = {}
    for attrs in resources(boot, "google_service_account_iam_member").values():
        assert attrs["role"] == "roles/iam.workloadIdentityUser"
        sa = attrs["service_account_id"].split(".")[1]
        grants.setdefault(sa, set()).add(attrs["member"])
    assert grants["deploy-sa"] == {
        f"{pool}/subject/repo:{repo}:environment:{env}" for env in ("gemma4-prod", "gemma4-staging")
    }
    assert grants["plan-sa"] == {
        f"principalSet{pool.removeprefix('principal')}/attribute.repository/{repo}"
    }


def _admits(condition: str, **claims: str) -> bool:
    """Evaluate the provider's CEL condition (==, &&, ||, parentheses, '...' literals only)."""
    assert re.fullmatch(r"[\w\s.=&|()'/:-]+", condition), condition
    expr = condition.replace("&&", " and ").replace("||", " or ")
    assertion = SimpleNamespace(**{"repository_id": "", **claims})
    return bool(eval(expr, {"__builtins__": {}}, {"assertion": assertion}))  # noqa: S307


@pytest.mark.parametrize(
    ("claims", "admitted"),
    [
        ({"sub": "repo:{r}:pull_request"}, True),
        ({"sub": "repo:{r}:ref:refs/heads/main"}, True),
        ({"sub": "repo:{r}:environment:gemma4-staging"}, True),
        ({"sub": "repo:{r}:environment:gemma4-prod"}, True),
        ({"sub": "repo:{r}:ref:refs/heads/feature"}, False),
        ({"sub": "repo:{r}:environment:other"}, False),
        ({"sub": "repo:{r}:environment:gemma4-prod", "repository": "evil/fork"}, False),
        ({"sub": "repo:evil/fork:pull_request", "repository": "evil/fork"}, False),
    ],
)
def test_provider_condition_restricts_the_repository(
    boot: dict[str, Any], bootstrap_cfg: BootstrapConfig, claims: dict[str, str], admitted: bool
) -> None:
    (provider,) = resources(boot, "google_iam_workload_identity_pool_provider").values()
    assert provider["oidc"] == {"issuer_uri": "https://token.actions.githubusercontent.com"}
    assert provider["attribute_mapping"]["google.subject"] == "assertion.sub"
    assert provider["attribute_mapping"]["attribute.repository"] == "assertion.repository"
    repo = bootstrap_cfg.github_repository
    token = {"repository": repo, **claims}
    token["sub"] = token["sub"].format(r=repo)
    assert _admits(provider["attribute_condition"], **token) is admitted


def test_repository_id_pins_the_condition(bootstrap_cfg: BootstrapConfig) -> None:
    pinned = bootstrap_cfg.model_copy(update={"github_repository_id": 42})
    repo = pinned.github_repository
    sub = f"repo:{repo}:pull_request"
    assert _admits(pinned.attribute_condition, repository=repo, sub=sub, repository_id="42")
    assert not _admits(pinned.attribute_condition, repository=repo, sub=sub, repository_id="7")


def test_bootstrap_outputs_name_the_repository_variables(boot: dict[str, Any]) -> None:
    workflows = "\n".join(
        p.read_text(encoding="utf-8") for p in (REPO_ROOT / ".github/workflows").glob("*.yml")
    )
    used = set(re.findall(r"vars\.(GCP_[A-Z_]+)", workflows))
    assert used <= set(boot["output"]), used - set(boot["output"])


def test_checkov_passes_on_the_bootstrap(bootstrap_outdir: Path) -> None:
    from tools.scan import BOOTSTRAP_SKIPS, SKIPS, scan, skips_for

    assert skips_for(bootstrap_outdir) == {**SKIPS, **BOOTSTRAP_SKIPS}
    assert all(reason.strip() for reason in BOOTSTRAP_SKIPS.values())
    result = scan(bootstrap_outdir)
    assert result.returncode == 0, result.stdout + result.stderr
    m = re.search(r"Passed checks: (\d+), Failed checks: (\d+)", result.stdout)
    assert m and int(m[1]) > 0 and int(m[2]) == 0, result.stdout


def test_bootstrap_skips_do_not_reach_deployments(synth: Synthesizer) -> None:
    from tools.scan import SKIPS, skips_for

    assert skips_for(synth.outdir({})) == SKIPS


# ---- bootstrap config validation (no synth) ----


def _deployment(name: str, bucket: str | None, project: str | None = None) -> gitops.Deployment:
    return gitops.Deployment(
        name=name,
        config=f"deployments/{name}.toml",
        provisioning="flex-start",
        project=project,
        zone="us-west4-a",
        state_bucket=bucket,
    )


BASE = {"project": "my-project-1", "github_repository": "o/r", "state_bucket": "tfstate-x"}


def test_environments_default_to_pipeline_deployments() -> None:
    cfg = parse_bootstrap(BASE, deployments=[_deployment("staging", "tfstate-x")], source="t")
    assert cfg.environments == ("staging",)
    assert cfg.deploy_subjects == ("repo:o/r:environment:staging",)


@pytest.mark.parametrize(
    ("data", "deployments", "match"),
    [
        (BASE, [_deployment("staging", "other-bucket")], "deploy account cannot write"),
        (BASE, [_deployment("staging", "tfstate-x", "another-proj")], "CI accounts hold no role"),
        (BASE, [], "no GitHub environment may deploy"),
        ({**BASE, "github_repository": "https://github.com/o/r"}, [], "owner/name"),
        ({**BASE, "environments": ["Prod!"]}, [], "not a deployment name"),
        ({**BASE, "rogue": 1, "environments": ["staging"]}, [], "unknown key"),
        (
            {"github_repository": "o/r", "state_bucket": "b-1", "environments": ["a-b"]},
            [],
            "project",
        ),
    ],
)
def test_bootstrap_config_refusals(
    data: dict[str, Any], deployments: list[gitops.Deployment], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_bootstrap(data, deployments=deployments, source="gitops.toml")
