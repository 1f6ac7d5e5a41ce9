"""Static scans: checkov on the synthesized Terraform JSON, shellcheck on the rendered scripts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Synthesizer, resources
from tools.scan import SKIPS, scan
from tpudeploy.config import parse_config
from tpudeploy.render import node_metadata

SHELLCHECK = Path(sys.executable).with_name("shellcheck")
SPOT = {"provisioning": "spot"}
NODE = "gemma4-v5e-node"


def _layout(root: Path, stacks: dict[str, dict[str, Any]]) -> Path:
    """A cdktf.out-shaped directory (stacks/<name>/cdk.tf.json), as tools/scan.py expects."""
    for name, doc in stacks.items():
        path = root / "stacks" / name / "cdk.tf.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return root


def _counts(result: subprocess.CompletedProcess[str]) -> tuple[int, int]:
    m = re.search(r"Passed checks: (\d+), Failed checks: (\d+)", result.stdout)
    assert m, f"no checkov summary:\n{result.stdout}\n{result.stderr}"
    return int(m[1]), int(m[2])


def test_every_skip_is_justified() -> None:
    assert SKIPS, "tools/scan.py skips nothing: drop this test's premise"
    for check, reason in SKIPS.items():
        assert re.fullmatch(r"CKV2?_[A-Z]+_\d+", check), check
        assert reason.strip(), check


def test_checkov_passes_on_the_synthesized_stacks(synth: Synthesizer, tmp_path: Path) -> None:
    # The default (flex-start) and the spot deployment in one run: stacks are renamed per config.
    stacks = {
        f"{label}-{name}": doc
        for label, overrides in (("flex", {}), ("spot", SPOT))
        for name, doc in synth(overrides).items()
    }
    result = scan(_layout(tmp_path / "cdktf.out", stacks))
    passed, failed = _counts(result)
    assert failed == 0, result.stdout
    assert passed > 0, result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


def test_checkov_fails_on_a_public_firewall(synth: Synthesizer, tmp_path: Path) -> None:
    # Negative control: the same scan must be able to fail. SSH opened to the world and the API
    # port opened without a source range are what the stacks exist to prevent.
    stacks = synth(SPOT)
    rules = resources(stacks[NODE], "google_compute_firewall")
    (ssh,) = (r for r in rules.values() if r.get("allow", [{}])[0].get("ports") == ["22"])
    ssh["source_ranges"] = ["0.0.0.0/0"]
    stacks[NODE]["resource"]["google_compute_firewall"]["public-vllm"] = {
        "name": "public-vllm",
        "network": "default",
        "direction": "INGRESS",
        "allow": [{"protocol": "tcp", "ports": ["8443"]}],
        "source_ranges": ["0.0.0.0/0"],
    }
    result = scan(_layout(tmp_path / "cdktf.out", stacks))
    _, failed = _counts(result)
    assert failed > 0, result.stdout
    assert result.returncode != 0
    assert "CKV_GCP_2" in result.stdout  # "unrestricted ssh access"


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"vllm": {"num_precompile_workers": 4, "vllm_xla_check_recompilation": True}},
    ],
    ids=["default", "extra-env"],
)
def test_shellcheck_passes_on_the_rendered_scripts(
    overrides: dict[str, Any], tmp_path: Path
) -> None:
    metadata = node_metadata(parse_config(overrides))
    scripts = {k: v for k, v in metadata.items() if k.endswith("-script")}
    assert "startup-script" in scripts
    if overrides:
        assert "-e NUM_PRECOMPILE_WORKERS=4" in scripts["startup-script"]
        assert "-e VLLM_XLA_CHECK_RECOMPILATION=1" in scripts["startup-script"]
    for key, text in scripts.items():
        path = tmp_path / f"{key}.sh"
        path.write_text(text, encoding="utf-8")
        result = subprocess.run(
            [str(SHELLCHECK), "--shell=bash", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"{key}:\n{result.stdout}{result.stderr}"


def test_shellcheck_can_fail(tmp_path: Path) -> None:
    path = tmp_path / "bad.sh"
    path.write_text("#!/usr/bin/env bash\nrm -rf $DIR/*\n", encoding="utf-8")
    result = subprocess.run(
        [str(SHELLCHECK), str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0
    assert "SC2086" in result.stdout
