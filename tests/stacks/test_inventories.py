"""Each shipped deployment's contract, compared against its inventory (tests/inventories/).

One file per configuration the repository ships (deploy.toml flex-start and its spot and
on-demand variants, every deployments/*.toml, the GitOps bootstrap): what exists, where it
binds, who may reach it, who may read what. A reader sees a deployment on one screen.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer
from tests.inventory import WRITE_ENV, assert_inventory, inventory
from tpudeploy.bootstrap_config import BOOTSTRAP_STACK


def _toml(rel: str) -> dict[str, Any]:
    return tomllib.loads((REPO_ROOT / rel).read_text(encoding="utf-8"))


# (inventory name, raw config): the project is set so that the contract shows real names.
CONFIGS: dict[str, dict[str, Any]] = {
    "flex-start": {**_toml("deploy.toml"), "project": "my-proj-123"},
    "spot": {**_toml("deploy.toml"), "project": "my-proj-123", "provisioning": "spot"},
    "on-demand": {
        **_toml("deploy.toml"),
        "project": "my-proj-123",
        "provisioning": "on-demand",
        "network": {"allowed_cidrs": ["203.0.113.0/24"], "enable_external_ip": False},
    },
    **{
        f"deployments-{p.stem}": _toml(f"deployments/{p.name}")
        for p in sorted((REPO_ROOT / "deployments").glob("*.toml"))
    },
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_deployment_contract(synth: Synthesizer, name: str) -> None:
    stacks = synth(CONFIGS[name])
    actual = {stack: inventory(doc) for stack, doc in sorted(stacks.items())}
    assert_inventory(name, actual)


def test_bootstrap_contract(bootstrap_outdir: Path) -> None:
    path = bootstrap_outdir / "stacks" / BOOTSTRAP_STACK / "cdk.tf.json"
    assert_inventory("bootstrap", {BOOTSTRAP_STACK: inventory(json.loads(path.read_text()))})


def test_a_changed_contract_fails_with_what_to_paste(
    synth: Synthesizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison can fail, and says what to do: one opened port is a different contract."""
    monkeypatch.delenv(WRITE_ENV, raising=False)
    stacks = synth(CONFIGS["spot"])
    actual = {stack: inventory(doc) for stack, doc in sorted(stacks.items())}
    node = next(v for k, v in actual.items() if k.endswith("-node"))
    rule = next(r for k, r in node["resources"].items() if k.endswith("allow-iap-ssh"))
    rule["source_ranges"] = ["0.0.0.0/0"]
    with pytest.raises(AssertionError) as err:
        assert_inventory("spot", actual)
    assert "0.0.0.0/0" in str(err.value)
    assert "TPUDEPLOY_WRITE_INVENTORIES=1" in str(err.value)
