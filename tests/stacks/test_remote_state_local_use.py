"""Issue 37: remote state is not the GitOps pipeline. A teammate who runs `make state-init` and
adds the state_bucket line it prints keeps every resource their stacks declared with local state:
the node account, the secrets, the APIs, the project roles and the NAT. Only pipeline = true
leaves those to the bootstrap (stacks/bootstrap.py); a stack that stopped declaring them would
have Terraform destroy them at the next apply.

Both syntheses are the session's own (tests/conftest.py): the shipped deployments/gke.toml as a
workstation runs it (gke_local_raw: its state_bucket, without pipeline = true) and the file
itself (tests/gitops/test_gke_pipeline_identities.py synthesizes it too).
"""

from __future__ import annotations

import tomllib
from typing import Any

from stacks.secrets import REQUIRED_SERVICES
from tests.conftest import REPO_ROOT, Synthesizer, gke_local_raw, resources
from tpudeploy.config import parse_config
from tpudeploy.platform import platform_for

LOCAL = gke_local_raw()
PIPELINE = tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))


def _made(stacks: dict[str, dict[str, Any]], rtype: str, key: str) -> set[str]:
    return {str(r[key]) for doc in stacks.values() for r in resources(doc, rtype).values()}


def test_state_bucket_without_pipeline_declares_what_the_bootstrap_would(
    synth: Synthesizer,
) -> None:
    assert LOCAL["state_bucket"] and "pipeline" not in LOCAL
    cfg = parse_config(LOCAL)
    stacks = synth(LOCAL)
    # The state is the team's: every stack's backend is the bucket, one prefix per stack.
    for name, doc in stacks.items():
        assert doc["terraform"]["backend"] == {
            "gcs": {"bucket": LOCAL["state_bucket"], "prefix": f"tpudeploy/{cfg.name}/{name}"}
        }
    secrets = stacks[cfg.secrets_stack_name]
    assert cfg.service_account_id in _made(stacks, "google_service_account", "account_id")
    wanted_secrets = {secret_id for secret_id, _ in platform_for(cfg).secrets(cfg)}
    keys = set(cfg.client_key_secret_ids.values())  # one per [access] client (issue 37)
    assert wanted_secrets == {cfg.hf_token_secret_id, *keys, cfg.tls_secret_id}
    assert wanted_secrets <= _made(stacks, "google_secret_manager_secret", "secret_id")
    assert set(REQUIRED_SERVICES) <= _made(stacks, "google_project_service", "service")
    roles = set(platform_for(cfg).node_project_roles)
    assert roles and roles <= _made(stacks, "google_project_iam_member", "role")
    assert f"{cfg.name}-router" in _made(stacks, "google_compute_router", "name")
    assert resources(stacks[cfg.gke_stack_name], "google_compute_router_nat")
    assert "compile-cache" in resources(secrets, "google_storage_bucket")
    assert "removed" not in secrets  # nothing forgotten from state either
    assert not cfg.gitops_managed

    # The same file with pipeline = true leaves every one of them to the bootstrap.
    pipeline = synth(PIPELINE)
    assert parse_config(PIPELINE).gitops_managed
    for rtype in (
        "google_service_account",
        "google_secret_manager_secret",
        "google_project_service",
        "google_compute_router_nat",
        "google_storage_bucket",
    ):
        assert not any(resources(doc, rtype) for doc in pipeline.values()), rtype
