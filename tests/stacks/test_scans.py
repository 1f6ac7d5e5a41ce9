"""Static scans: checkov on the synthesized Terraform JSON, shellcheck on the rendered scripts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer, resources
from tools.scan import (
    BOOTSTRAP_SKIPS,
    GKE_SKIPS,
    SKIPS,
    Scan,
    ScanError,
    judge,
    scan_all,
    skips_for,
)
from tpudeploy.config import parse_config
from tpudeploy.render import node_metadata

SHELLCHECK = Path(sys.executable).with_name("shellcheck")
SPOT = {"provisioning": "spot"}
NODE = "gemma4-v5e-node"
GKE = tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))


def _layout(root: Path, stacks: dict[str, dict[str, Any]]) -> Path:
    """A cdktf.out-shaped directory (stacks/<name>/cdk.tf.json), as tools/scan.py expects."""
    for name, doc in stacks.items():
        path = root / "stacks" / name / "cdk.tf.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return root


def _public_firewall(synth: Synthesizer) -> dict[str, dict[str, Any]]:
    """The spot deployment with SSH opened to the world and the API port opened without a source
    range: what the stacks exist to prevent (the negative control below)."""
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
    return stacks


# A checkov run (its start-up alone is ~5 s of CPU; the scan of the synthesized stacks, the
# bootstrap and the GKE stacks ~10 s more, and the synths it scans): the slow tier, which CI runs.
checkov_run = pytest.mark.slow_tier


@pytest.fixture(scope="module")
def scans(
    synth: Synthesizer, bootstrap_outdir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Scan]:
    """Every checkov verdict of the suite from one checkov run (its start-up is ~5 s of CPU),
    each output directory judged with its own skips (tools/scan.py's scan_all)."""
    root = tmp_path_factory.mktemp("checkov")
    # The default (flex-start) and the spot deployment in one directory: stacks are renamed.
    vm = {
        f"{label}-{name}": doc
        for label, overrides in (("flex", {}), ("spot", SPOT))
        for name, doc in synth(overrides).items()
    }
    outdirs = {
        "vm": _layout(root / "vm" / "cdktf.out", vm),
        "public-firewall": _layout(root / "public" / "cdktf.out", _public_firewall(synth)),
        "bootstrap": bootstrap_outdir,
        "gke": synth.outdir(GKE),
    }
    return dict(zip(outdirs, scan_all(list(outdirs.values())), strict=True))


def test_every_skip_is_justified() -> None:
    assert SKIPS, "tools/scan.py skips nothing: drop this test's premise"
    for check, reason in SKIPS.items():
        assert re.fullmatch(r"CKV2?_[A-Z]+_\d+", check), check
        assert reason.strip(), check


@checkov_run
def test_checkov_passes_on_the_synthesized_stacks(scans: dict[str, Scan]) -> None:
    result = scans["vm"]
    assert result.failed == (), result.report()
    assert result.passed > 0 and result.ok, result.report()


@checkov_run
def test_checkov_fails_on_a_public_firewall(scans: dict[str, Scan]) -> None:
    # Negative control: the same scan must be able to fail, in the run the others pass in.
    result = scans["public-firewall"]
    assert not result.ok, result.report()
    assert "CKV_GCP_2" in {f.check_id for f in result.failed}  # "unrestricted ssh access"


@checkov_run
def test_checkov_passes_on_the_bootstrap(scans: dict[str, Scan], bootstrap_outdir: Path) -> None:
    assert skips_for(bootstrap_outdir) == {**SKIPS, **BOOTSTRAP_SKIPS}
    assert all(reason.strip() for reason in BOOTSTRAP_SKIPS.values())
    # Project-wide serviceAccountUser is gone, so its checks run again (and must pass).
    assert not {"CKV_GCP_41", "CKV_GCP_49", "CKV_GCP_125"} & set(skips_for(bootstrap_outdir))
    result = scans["bootstrap"]
    assert result.ok, result.report()


@checkov_run
def test_checkov_passes_on_the_gke_stacks(scans: dict[str, Scan], synth: Synthesizer) -> None:
    """Its Kubernetes checks included; the GKE skips (tools/scan.py GKE_SKIPS) apply to GKE
    outputs only, each with its reason."""
    assert skips_for(synth.outdir(GKE)) == {**SKIPS, **GKE_SKIPS}
    result = scans["gke"]
    assert result.ok, result.report()


def test_a_skip_applies_to_its_own_output_directory_only() -> None:
    """One run judges every directory with its own skips: a check skipped for GKE outputs still
    fails a TPU VM output in the same run, as two runs with their own --skip-check would."""

    def check(path: str, check_id: str) -> dict[str, str]:
        return {"file_path": path, "check_id": check_id, "check_name": "n", "resource": "r.x"}

    report = {
        "results": {
            "failed_checks": [
                check("/0/a.tf.json", "CKV_GCP_12"),
                check("/1/b.tf.json", "CKV_GCP_12"),
            ],
            "passed_checks": [
                check("/0/a.tf.json", "CKV_GCP_1"),
                check("/10/c.tf.json", "CKV_GCP_1"),
            ],
        }
    }
    vm = judge(Path("vm"), "/0/", [report], SKIPS)
    gke = judge(Path("gke"), "/1/", [report], {**SKIPS, **GKE_SKIPS})
    assert [(f.check_id, f.file) for f in vm.failed] == [("CKV_GCP_12", "a.tf.json")]
    assert (vm.passed, vm.skipped) == (1, 0) and not vm.ok
    assert (gke.failed, gke.passed, gke.skipped) == ((), 0, 1)
    # Everything skipped judges nothing: not a pass, and the report says why.
    assert not gke.ok and "NOT A PASS: no check passed" in gke.report()
    assert "NOT A PASS" not in vm.report()
    # "/1/" is not a prefix of "/10/": directory 10's results are its own.
    assert judge(Path("x"), "/10/", [report], SKIPS).passed == 1


@checkov_run
def test_what_checkov_cannot_parse_is_an_error_never_a_pass(tmp_path: Path) -> None:
    """A stack checkov cannot read is ScanError, not a verdict of zero failures; no stack at
    all is refused before checkov runs."""
    (tmp_path / "stacks" / "broken").mkdir(parents=True)
    (tmp_path / "stacks" / "broken" / "cdk.tf.json").write_text('{"resource": 5}')
    with pytest.raises(ScanError, match=r"could not parse \['broken.tf.json'\]"):
        scan_all([tmp_path])
    with pytest.raises(SystemExit, match="no synthesized stacks"):
        scan_all([tmp_path / "nothing"])


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
