"""SCENARIO=pipeline's parts, without a full rehearsal: the bootstrap's outcome in the fake cloud
and what the deploy identity's token may then do there (tools/rehearsal/pipeline.py)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.lifecycle import Rehearsal
from tools.rehearsal.pipeline import STATE_BUCKET, bootstrap, local_state_override
from tools.rehearsal.scratch import REHEARSAL_PROJECT
from tpudeploy.config import parse_config

P = REHEARSAL_PROJECT


def _status(host: str, method: str, path: str, token: str, body: object = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{host}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_deploy_identity_reaches_what_the_bootstrap_granted_and_no_more() -> None:
    cfg = parse_config(
        {"name": "gemma4-v5e", "project": P, "state_bucket": STATE_BUCKET, "pipeline": True}
    )
    with FakeCloud() as cloud:
        email, made = bootstrap(cloud, cfg)
        assert email == f"gemma4-v5e-apply@{P}.iam.gserviceaccount.com"
        assert f"secretmanager/projects/{P}/secrets/gemma4-v5e-hf-token" in made
        assert f"storage/b/{cfg.compile_cache_bucket(P)}" in made
        token = cloud.inventory.mint_token(f"serviceAccount:{email}")
        sm = cloud.secretmanager.host
        own = f"/v1/projects/{P}/secrets/gemma4-v5e-hf-token"
        assert _status(sm, "POST", f"{own}:getIamPolicy", token, {}) == 200
        # Creating any secret, its own included, is the bootstrap's: checked on the project.
        create = f"/v1/projects/{P}/secrets?secretId=gemma4-v5e-extra"
        assert _status(sm, "POST", create, token, {"replication": {"automatic": {}}}) == 403
        # No version access at all.
        assert _status(sm, "GET", f"{own}/versions/latest:access", token) == 403
        rule = {
            "name": "gemma4-v5e-deny-all",
            "network": "default",
            "denied": [{"IPProtocol": "all"}],
        }
        firewalls = f"/compute/v1/projects/{P}/global/firewalls"
        assert _status(cloud.compute.host, "POST", firewalls, token, rule) == 200
        other = {**rule, "name": "default-allow-everything"}
        assert _status(cloud.compute.host, "POST", firewalls, token, other) == 403
        bucket = f"/storage/v1/b/{cfg.compile_cache_bucket(P)}/iam"
        assert _status(cloud.storage.host, "GET", bucket, token) == 200
        # Secret Manager names secrets by project number in conditions, the fake's one.
        bindings = cloud.inventory.policies[f"cloudresourcemanager/projects/{P}"]
        secrets = [b for b in bindings if b["role"].endswith("/tpudeploySecrets")]
        assert (
            f"projects/{iamrules.PROJECT_NUMBER}/secrets/" in secrets[0]["condition"]["expression"]
        )


def test_the_override_keeps_state_at_the_scratch_root(tmp_path: Path) -> None:
    stack_dir = tmp_path / "cdktf.out" / "deployments" / "d" / "stacks" / "d-node"
    local_state_override(stack_dir, tmp_path)
    override = json.loads((stack_dir / "rehearsal_override.tf.json").read_text())
    path = override["terraform"]["backend"]["local"]["path"]
    assert os.path.normpath(stack_dir / path) == str(tmp_path / "terraform.d-node.tfstate")


def test_the_pipeline_scenario_refuses_flex_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PROVISIONING=spot or on-demand"):
        Rehearsal(provisioning="flex-start", scenario="pipeline", workdir=tmp_path)
