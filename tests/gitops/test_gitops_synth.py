"""GitOps synth: remote state per deployment and stack, deployments side by side, the bootstrap.

Synthesizes the committed example deployments (deployments/*.toml) and the committed
gitops.toml, so the files a user copies are the ones under test.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer, resources
from tpudeploy import gitops
from tpudeploy.bootstrap_config import (
    BOOTSTRAP_STACK,
    Bootstrap,
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
        # Relative to cdktf.out/deployments/<deployment>/stacks/<stack>/: the repository root,
        # outside the synth output.
        assert stack["terraform"]["backend"] == {
            "local": {"path": f"../../../../../terraform.{name}.tfstate"}
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


def test_bootstrap_keeps_its_state_local(boot: dict[str, Any]) -> None:
    assert boot["terraform"]["backend"] == {
        "local": {"path": f"../../../../terraform.{BOOTSTRAP_STACK}.tfstate"}
    }


def test_bootstrap_synth_on_a_fresh_clone(bootstrap_outdir: Path) -> None:
    """Issue 23, item 4: `make bootstrap-synth` with no cdktf.out yet failed with ENOENT on
    mkdir 'cdktf.out/bootstrap' (cdktf creates the last folder only); the session fixture
    synthesizes exactly there, through the same function as stacks.bootstrap.main."""
    assert bootstrap_outdir.parts[-2:] == ("cdktf.out", "bootstrap")
    assert (bootstrap_outdir / "stacks" / BOOTSTRAP_STACK / "cdk.tf.json").is_file()
    assert (bootstrap_outdir / "manifest.json").is_file()


def test_state_bucket_settings(boot: dict[str, Any], bootstrap_cfg: BootstrapConfig) -> None:
    bucket = resources(boot, "google_storage_bucket")["state"]
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


def test_one_deploy_identity_one_node_and_one_stop_account_per_deployment(
    boot: dict[str, Any], bootstrap: Bootstrap
) -> None:
    ids = sorted(a["account_id"] for a in resources(boot, "google_service_account").values())
    expected = [bootstrap.config.plan_account_id]
    for name in bootstrap.config.environments:  # the committed deployments/*.toml
        cfg = parse_config({"name": name})
        expected += [cfg.deploy_account_id, cfg.service_account_id, cfg.stop_account_id]
    assert ids == sorted(expected)
    assert "google_service_account_key" not in boot["resource"]


def test_pipeline_secrets_stack_references_the_bootstrap_node_account(synth: Synthesizer) -> None:
    """The bootstrap creates the node account and enables the APIs; the deployment's secrets
    stack must neither create them (two owners would fight) nor need the rights to."""
    data = overrides(STAGING)
    stacks = synth(data)
    secrets = stacks[f"{data['name']}-secrets"]
    assert not resources(secrets, "google_service_account")
    assert not resources(secrets, "google_project_service")
    email = f"{data['name']}-node@${{var.project}}.iam.gserviceaccount.com"
    members = [
        g["member"]
        for rtype in ("google_secret_manager_secret_iam_member", "google_storage_bucket_iam_member")
        for g in resources(secrets, rtype).values()
    ]
    assert members and set(members) == {f"serviceAccount:{email}"}
    # Local use (no state_bucket) keeps creating both, as before.
    local = synth({})["gemma4-v5e-secrets"]
    assert resources(local, "google_service_account")
    assert resources(local, "google_project_service")


def test_bootstrap_enables_what_the_deployments_use(boot: dict[str, Any]) -> None:
    from stacks.secrets import REQUIRED_SERVICES

    enabled = {s["service"] for s in resources(boot, "google_project_service").values()}
    assert set(REQUIRED_SERVICES) <= enabled
    assert all(
        s["disable_on_destroy"] is False for s in resources(boot, "google_project_service").values()
    )


def test_no_basic_roles_and_no_keys_anywhere(
    boot: dict[str, Any], synth: Synthesizer, tmp_path: Path
) -> None:
    documents = [boot, *synth(overrides(STAGING)).values(), *synth({}).values()]
    for doc in documents:
        assert "google_service_account_key" not in all_resource_types(doc)
        text = json.dumps(doc)
        for role in BASIC_ROLES:
            assert f'"{role}"' not in text, role


def test_bootstrap_outputs_name_the_repository_variables(boot: dict[str, Any]) -> None:
    workflows = "\n".join(
        p.read_text(encoding="utf-8") for p in (REPO_ROOT / ".github/workflows").glob("*.yml")
    )
    used = set(re.findall(r"vars\.(GCP_[A-Z_]+)", workflows))
    assert used <= set(boot["output"]), used - set(boot["output"])


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
        pipeline=True,
    )


BASE = {
    "project": "my-project-1",
    "github_repository": "o/r",
    "github_repository_id": 4242,
    "github_repository_owner_id": 7,
    "state_bucket": "tfstate-x",
}


def test_environments_default_to_pipeline_deployments() -> None:
    cfg = parse_bootstrap(BASE, deployments=[_deployment("staging", "tfstate-x")], source="t")
    assert cfg.environments == ("staging",)
    assert cfg.deploy_subjects == ("repo:o/r:environment:staging",)


def test_an_environment_naming_a_file_without_the_pipeline_key_is_refused() -> None:
    """Issue 37: deploy.toml with state_bucket alone is local use with shared state; an
    environment naming it is refused with the file and the key, not "no such deployment"."""
    local = gitops.Deployment(
        name="gemma",
        config="deploy.toml",
        provisioning="flex-start",
        project=None,
        zone="us-west4-a",
        state_bucket="tfstate-x",
    )
    with pytest.raises(ConfigError) as err:
        parse_bootstrap(
            {**BASE, "environments": ["staging", "gemma"]},
            deployments=[_deployment("staging", "tfstate-x")],
            source="gitops.toml",
            others=[local],
        )
    (said,) = err.value.problems
    assert said.startswith(
        "environments = 'gemma': deploy.toml declares it without pipeline = true"
    )
    assert said.endswith(
        "Fix: add pipeline = true to deploy.toml, or drop 'gemma' from environments"
    )


def test_an_environment_without_a_deployment_file_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        parse_bootstrap(
            {**BASE, "environments": ["staging", "prodution"]},
            deployments=[
                _deployment("staging", "tfstate-x"),
                _deployment("production", "tfstate-x"),
            ],
            source="gitops.toml",
        )
    (problem,) = err.value.problems
    assert problem.startswith("environments = 'prodution': no pipeline deployment has this name")
    assert "known: production, staging" in problem


def test_too_many_environments_for_the_condition_are_refused() -> None:
    names = [f"env-{i:03d}-with-a-long-name"[:24] for i in range(60)]
    deployments = [_deployment(n, "tfstate-x") for n in names]
    with pytest.raises(ConfigError, match="over Workload Identity Federation's 4096"):
        parse_bootstrap(BASE, deployments=deployments, source="gitops.toml")


def test_the_old_shared_deploy_account_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="deploy_account_id = 'x-deploy': unknown key"):
        parse_bootstrap(
            {**BASE, "deploy_account_id": "x-deploy"},
            deployments=[_deployment("staging", "tfstate-x")],
            source="gitops.toml",
        )


@pytest.mark.parametrize(
    ("data", "deployments", "match"),
    [
        (BASE, [_deployment("staging", "other-bucket")], "deploy identity cannot write"),
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
        # Issue 21, defect 6: the numeric ids are required, and the message says where to read
        # them.
        (
            {k: v for k, v in BASE.items() if k != "github_repository_id"},
            [_deployment("staging", "tfstate-x")],
            r"github_repository_id = \(unset\): required\. Fix: add `github_repository_id = N` "
            r"with N from `gh api repos/OWNER/NAME --jq \.id`",
        ),
        (
            {k: v for k, v in BASE.items() if k != "github_repository_owner_id"},
            [_deployment("staging", "tfstate-x")],
            r"github_repository_owner_id = \(unset\): required\..*--jq \.owner\.id",
        ),
        ({**BASE, "github_repository_id": "abc"}, [], "a string where a whole number belongs"),
    ],
)
def test_bootstrap_config_refusals(
    data: dict[str, Any], deployments: list[gitops.Deployment], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_bootstrap(data, deployments=deployments, source="gitops.toml")


def test_a_pipeline_secrets_stack_forgets_what_the_bootstrap_now_owns(synth: Synthesizer) -> None:
    """The secrets and the cache bucket moved to the bootstrap (issue 21, defect 1): a pipeline
    deployment made before keeps them in its secrets stack's state, and dropping them from the
    configuration would destroy the token's versions. `removed` blocks forget exactly the
    addresses a secrets stack declared them at, never destroying them (Terraform >= 1.7)."""
    local = synth({})["gemma4-v5e-secrets"]
    declared = {
        f"{rtype}.{rid}"
        for rtype in ("google_secret_manager_secret", "google_storage_bucket")
        for rid in resources(local, rtype)
    }
    pipeline = synth(overrides(STAGING))["gemma4-staging-secrets"]
    removed = pipeline["removed"]
    # Staging names a client beyond "default" ([access]): its key secret's address too (a
    # `removed` block for an address never in the state is a no-op).
    clients = parse_config(overrides(STAGING)).access.clients
    extra = {f"google_secret_manager_secret.api-key-{c}" for c in clients if c != "default"}
    assert extra, "staging names a second client"
    assert {block["from"] for block in removed} == declared | extra
    assert all(block["lifecycle"] == {"destroy": False} for block in removed)
    assert ">= 1.7.0" in pipeline["terraform"]["required_version"]
    assert not resources(pipeline, "google_secret_manager_secret")
    assert not resources(pipeline, "google_storage_bucket")
