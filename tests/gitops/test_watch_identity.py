"""The upstream watch's own identity: obtained only by upstream-watch.yml's jobs of its own
environment on main, holding a deploy identity's grants on its own `<name>-watch` deployment and
nothing of the watched one. One bootstrap synth of a copy of the repository whose staging
deployment has `[watch] enabled = true` (the shipped file keeps it off)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer, resources
from tests.gitops.test_gitops_identities import (
    PROJECT_NUMBER,
    PROJECT_NUMBER_REF,
    _custom_permissions,
    _members,
    admitted_accounts,
    allows,
    env_token,
    reaches,
)
from tools.rehearsal.fakes import iamrules
from tpudeploy import identities
from tpudeploy.bootstrap_config import WATCH_WORKFLOW, Bootstrap, load_bootstrap
from tpudeploy.config import ConfigError

STAGING = "gemma4-staging"
WATCH = f"{STAGING}-watch"


def _repo(tmp: Path, watch: str) -> Path:
    shutil.copy(REPO_ROOT / "gitops.toml", tmp / "gitops.toml")
    shutil.copytree(REPO_ROOT / "deployments", tmp / "deployments")
    staging = tmp / "deployments" / "staging.toml"
    text = staging.read_text(encoding="utf-8")
    # Replace the shipped [watch] table (off) with this one.
    head, _, _ = text.partition("\n[watch]")
    staging.write_text(head + "\n" + watch, encoding="utf-8")
    return tmp


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Bootstrap:
    root = _repo(tmp_path_factory.mktemp("watch-repo"), "[watch]\nenabled = true\n")
    return load_bootstrap(root / "gitops.toml", root=root)


@pytest.fixture(scope="module")
def watch_boot(
    synth: Synthesizer, watched: Bootstrap, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    from stacks.bootstrap import synth_bootstrap
    from tpudeploy.bootstrap_config import BOOTSTRAP_STACK

    synth({})  # shares the session's jsii load
    outdir = tmp_path_factory.mktemp("watch-boot")
    synth_bootstrap(watched, outdir=str(outdir))
    path = outdir / "stacks" / BOOTSTRAP_STACK / "cdk.tf.json"
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def test_only_the_watch_workflow_on_main_in_its_environment_gets_the_watch_identity(
    watch_boot: dict[str, Any], watched: Bootstrap
) -> None:
    cfg = watched.config
    assert cfg.watch_environments == (WATCH,)
    assert admitted_accounts(watch_boot, env_token(cfg, WATCH, workflow=WATCH_WORKFLOW)) == {
        f"{WATCH}-apply"
    }
    refused = [
        env_token(cfg, WATCH, workflow="deploy.yml"),  # a deploy job naming the watch's env
        env_token(cfg, WATCH, workflow=WATCH_WORKFLOW, ref="refs/heads/feature"),
        env_token(cfg, WATCH, workflow=WATCH_WORKFLOW, ref="refs/pull/7/merge"),
        env_token(cfg, WATCH, workflow="evil.yml"),
        env_token(cfg, WATCH, workflow=WATCH_WORKFLOW, repo="evil/fork"),
        # The watch's workflow naming the watched deployment's environment: no deploy identity.
        env_token(cfg, STAGING, workflow=WATCH_WORKFLOW),
    ]
    for token in refused:
        assert admitted_accounts(watch_boot, token) == set(), token
    # The deploy identities are untouched: staging's own still comes from deploy.yml.
    assert admitted_accounts(watch_boot, env_token(cfg, STAGING)) == {f"{STAGING}-apply"}


def test_the_watch_identity_reaches_its_own_deployment_only(
    watch_boot: dict[str, Any], watched: Bootstrap
) -> None:
    members = _members(watch_boot)
    (watch,) = watched.watches
    assert watch.name == WATCH and watch.provisioning == "flex-start"
    accounts = {a["account_id"] for a in resources(watch_boot, "google_service_account").values()}
    assert {f"{WATCH}-apply", f"{WATCH}-node", f"{WATCH}-stop"} <= accounts
    secrets = {
        s["secret_id"] for s in resources(watch_boot, "google_secret_manager_secret").values()
    }
    assert {f"{WATCH}-hf-token", f"{WATCH}-api-key"} <= secrets
    conditions = [
        (g["role"], g["condition"]["expression"].replace(PROJECT_NUMBER_REF, PROJECT_NUMBER))
        for rtype in ("google_project_iam_member", "google_storage_bucket_iam_member")
        for g in resources(watch_boot, rtype).values()
        if members.get(g["member"]) == f"{WATCH}-apply" and "condition" in g
    ]
    sm_type = "secretmanager.googleapis.com/Secret"
    own_key = f"projects/{PROJECT_NUMBER}/secrets/{WATCH}-api-key"
    staging_key = f"projects/{PROJECT_NUMBER}/secrets/{STAGING}-api-key"
    readers = [e for r, e in conditions if r == "roles/secretmanager.secretAccessor"]
    assert len(readers) == 1
    assert allows(readers[0], own_key, sm_type)
    assert not allows(readers[0], staging_key, sm_type)
    own_token = f"projects/{PROJECT_NUMBER}/secrets/{WATCH}-hf-token"
    assert not allows(readers[0], own_token, sm_type)
    # Its custom roles, each on what IAM checks it on: its own deployment's, never staging's.
    custom = _custom_permissions(watch_boot)
    held = [(e, custom[r]) for r, e in conditions if r in custom]
    state = "projects/_/buckets/my-gemma-project-tfstate/objects/tpudeploy"
    obj, bucket = "storage.googleapis.com/Object", "storage.googleapis.com/Bucket"
    firewall = "compute.googleapis.com/Firewall"
    fw = "projects/my-gemma-project/global/firewalls"
    for own, theirs, rtype in [
        (own_key, staging_key, sm_type),
        (
            f"{state}/{WATCH}/{WATCH}-node/default.tfstate",
            f"{state}/{STAGING}/{STAGING}-node/default.tfstate",
            obj,
        ),
        (
            f"projects/_/buckets/my-gemma-project-{WATCH}-xla",
            f"projects/_/buckets/my-gemma-project-{STAGING}-xla",
            bucket,
        ),
        (f"{fw}/{WATCH}-allow-api", f"{fw}/{STAGING}-allow-api", firewall),
    ]:
        assert reaches(held, own, rtype), own
        assert not reaches(held, theirs, rtype), theirs


def test_the_watch_identity_may_read_its_nodes_guest_attributes(
    watch_boot: dict[str, Any],
) -> None:
    """make wait reads the watch node's guest attributes, which IAM checks as tpu.nodes.get on
    the node (the TPU fake's rule, iamrules.CHECKED_ON). A TPU node gives conditions no
    attribute, so only a project grant without a condition (or one CEL grants without one)
    reaches it: the watch identity holds one, through its deploy role."""
    members = _members(watch_boot)
    custom = _custom_permissions(watch_boot)
    assert iamrules.CHECKED_ON["tpu.nodes.get"] == iamrules.TPU_NODE
    node = f"projects/my-gemma-project/locations/us-west4-a/nodes/{WATCH}"
    reading = [
        g
        for g in resources(watch_boot, "google_project_iam_member").values()
        if members.get(g["member"]) == f"{WATCH}-apply"
        and "tpu.nodes.get" in custom.get(g["role"], [])
    ]
    assert reading
    assert any(
        "condition" not in g or allows(g["condition"]["expression"], node, iamrules.TPU_NODE)
        for g in reading
    )


def test_the_watch_grants_are_a_deploy_identitys_plus_its_own_key() -> None:
    from tpudeploy.config import parse_config

    watch = parse_config({"name": WATCH, "provisioning": "flex-start"})
    kw = {"project": "p", "project_number": "1", "state_bucket": "s"}
    deploy = identities.deploy_grants(watch, **kw)
    grants = identities.watch_grants(watch, **kw)
    assert [(g.role, g.scope) for g in grants[:-1]] == [(g.role, g.scope) for g in deploy]
    assert "upstream-watch.yml only" in grants[0].reason
    assert grants[-1].role == "roles/secretmanager.secretAccessor" and grants[-1].condition


def test_without_a_watch_the_federation_is_unchanged(bootstrap: Bootstrap) -> None:
    assert bootstrap.watches == () and bootstrap.config.watch_environments == ()
    assert WATCH_WORKFLOW not in bootstrap.config.attribute_condition
    assert "attribute.watch_environment" not in bootstrap.config.attribute_mapping


def test_a_watch_name_too_long_is_refused_by_the_bootstrap(tmp_path: Path) -> None:
    root = _repo(tmp_path, "[watch]\nenabled = true\n")
    staging = root / "deployments" / "staging.toml"
    text = staging.read_text(encoding="utf-8").replace(
        f'name = "{STAGING}"', 'name = "gemma4-staging-xyzw"'
    )
    staging.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="at most 18 characters"):
        load_bootstrap(root / "gitops.toml", root=root)
