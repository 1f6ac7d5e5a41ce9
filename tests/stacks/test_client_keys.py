"""Issue 37: one key secret per [access] client, declared per deployment, for two deployments of
one project on each platform (the shipped deployments/*.toml name clients): each deployment's
stacks declare and grant its own clients' secrets, and never name the other's."""

from __future__ import annotations

import json
import tomllib
from typing import Any

from tests.conftest import REPO_ROOT, Stacks, Synthesizer, resources
from tpudeploy.config import DeployConfig, parse_config


def _raw(rel: str) -> dict[str, Any]:
    return tomllib.loads((REPO_ROOT / rel).read_text(encoding="utf-8"))


def _key_ids(cfg: DeployConfig) -> set[str]:
    return set(cfg.client_key_secret_ids.values())


def _granted(stacks: Stacks) -> set[str]:
    return {
        g["secret_id"]
        for doc in stacks.values()
        for g in resources(doc, "google_secret_manager_secret_iam_member").values()
    }


def _check_pair(a: tuple[DeployConfig, Stacks], b: tuple[DeployConfig, Stacks]) -> None:
    for (cfg, stacks), (other, _) in ((a, b), (b, a)):
        assert len(cfg.client_key_secret_ids) >= 2, "the shipped config names clients"
        # Every client's secret is readable by this deployment's servers...
        assert _key_ids(cfg) <= _granted(stacks)
        # ... and nothing of the other deployment's keys is named anywhere in its stacks.
        text = json.dumps(stacks)
        for secret_id in _key_ids(other):
            assert f'"{secret_id}"' not in text and f"/{secret_id}/" not in text, secret_id


def test_two_gke_deployments_declare_their_own_clients_secrets(
    gke_pair: tuple[Stacks, Stacks],
) -> None:
    from tests.conftest import gke_configs

    raw_a, raw_b = gke_configs()
    cfgs = parse_config(raw_a), parse_config(raw_b)
    _check_pair((cfgs[0], gke_pair[0]), (cfgs[1], gke_pair[1]))
    for cfg, stacks in zip(cfgs, gke_pair, strict=True):
        declared = {
            s["secret_id"]
            for s in resources(
                stacks[cfg.secrets_stack_name], "google_secret_manager_secret"
            ).values()
        }
        assert _key_ids(cfg) <= declared
        # The front door's SecretProviderClass mounts each client's latest version.
        text = json.dumps(stacks[cfg.serving_stack_name])
        for secret_id in _key_ids(cfg):
            assert f"/secrets/{secret_id}/versions/latest" in text


def test_two_tpu_vm_deployments_grant_their_node_each_clients_secret(synth: Synthesizer) -> None:
    """deployments/staging.toml and production.toml (pipeline deployments: the bootstrap declares
    the secrets, the secrets stack grants the node account each one, by name)."""
    pair = []
    for rel in ("deployments/staging.toml", "deployments/production.toml"):
        raw = _raw(rel)
        pair.append((parse_config(raw), synth(raw)))
    _check_pair(pair[0], pair[1])
    for cfg, stacks in pair:
        grants = resources(
            stacks[cfg.secrets_stack_name], "google_secret_manager_secret_iam_member"
        )
        for secret_id in _key_ids(cfg):
            (grant,) = [g for g in grants.values() if g["secret_id"] == secret_id]
            assert grant["role"] == "roles/secretmanager.secretAccessor"
            assert grant["member"].startswith(f"serviceAccount:{cfg.service_account_id}@")
