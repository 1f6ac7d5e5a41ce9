"""Each deployment synthesizes into its own folder, so one deployment's synth never breaks
another's deploy (issue 15: `DEPLOY_CONFIG=deployments/staging.toml make synth`, then `make
deploy`, failed with ENOENT on cdktf.out/stacks/gemma4-staging-node)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import main
from tests.conftest import REPO_ROOT, Synthesizer, terraform_env
from tools.rehearsal import schema
from tools.rehearsal.mirror import lock_file, write_mirror
from tpudeploy import terraform as terraform_mod
from tpudeploy.config import DeployConfig, parse_config

STAGING = "deployments/staging.toml"


def staging() -> DeployConfig:
    return parse_config(tomllib.loads((REPO_ROOT / STAGING).read_text(encoding="utf-8")))


def test_every_deployment_has_its_own_folder() -> None:
    default, other = parse_config({}), staging()
    assert terraform_mod.synth_outdir(default) == Path("cdktf.out/deployments/gemma4-v5e")
    assert terraform_mod.synth_outdir(other) == Path("cdktf.out/deployments/gemma4-staging")


def test_two_deployments_synthesized_one_after_the_other_both_stay_deployable(
    synth: Synthesizer, tmp_path: Path, capsys: pytest.CaptureFixture[str], terraform: str
) -> None:
    """What `make synth` does for staging, then for the default deployment, as the cdktf CLI
    then reads it: each folder's manifest names its own stacks, and Terraform (with the
    rehearsal's stand-in google-beta, offline) initializes and validates every one in place."""
    from stacks.app import synth as app_synth

    synth({})  # the jsii assembly is loaded once per session
    first, second = staging(), parse_config({})
    for cfg in (first, second):
        app_synth(cfg, outdir=str(tmp_path / terraform_mod.synth_outdir(cfg)), source="test")
    capsys.readouterr()
    env = stand_in_terraform(tmp_path / "tf")
    lock = lock_file(tmp_path / "tf", env=env)
    for cfg in (first, second):
        outdir = tmp_path / terraform_mod.synth_outdir(cfg)
        manifest: dict[str, Any] = json.loads((outdir / "manifest.json").read_text())
        assert set(manifest["stacks"]) == {cfg.secrets_stack_name, cfg.node_stack_name}
        for stack in manifest["stacks"].values():
            folder = outdir / stack["workingDirectory"]
            assert (outdir / stack["synthesizedStackPath"]).is_file(), stack
            shutil.copy(lock, folder / ".terraform.lock.hcl")
            # -backend=false: staging keeps its state in GCS; nothing here may reach a cloud.
            for args in (["init", "-backend=false", "-input=false"], ["validate", "-no-color"]):
                done = subprocess.run(
                    [terraform, *args],
                    cwd=folder,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=180,
                    check=False,
                )
                assert done.returncode == 0, f"{stack['name']}: {done.stdout}{done.stderr}"


def stand_in_terraform(root: Path) -> dict[str, str]:
    """Terraform's environment with the rehearsal's stand-in google-beta as the only provider."""
    config = write_mirror(
        root, python=sys.executable, repo=REPO_ROOT, schema=schema.stand_in_schema()
    )
    return {
        **terraform_env(root),
        "TF_CLI_CONFIG_FILE": str(config),
        "HTTPS_PROXY": "http://127.0.0.1:9",
    }


def test_main_writes_to_the_deployments_folder_unless_cdktf_names_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`make synth` (no CDKTF_OUTDIR) writes to the deployment's folder; the cdktf CLI's
    --output (CDKTF_OUTDIR) wins."""
    written: list[str] = []
    monkeypatch.setattr("stacks.app.synth", lambda cfg, *, outdir, source: written.append(outdir))
    # Only where it writes matters here: no synth cache, nothing written in the repository.
    monkeypatch.setattr("tpudeploy.synthcache.fresh", lambda outdir, key: False)
    monkeypatch.setattr("tpudeploy.synthcache.record", lambda outdir, key: None)
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "staging.toml"
    config.write_text((REPO_ROOT / STAGING).read_text(encoding="utf-8"))
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.delenv("CDKTF_OUTDIR", raising=False)
    assert main.main() == 0
    monkeypatch.setenv("CDKTF_OUTDIR", str(tmp_path / "elsewhere"))
    assert main.main() == 0
    assert written == ["cdktf.out/deployments/gemma4-staging", str(tmp_path / "elsewhere")]


@pytest.mark.parametrize(
    "outdir", ["cdktf.out/deployments/gemma4-v5e", "cdktf.out", "somewhere/deeper/than/usual"]
)
def test_local_state_stays_at_the_repository_root_whatever_the_folder(outdir: str) -> None:
    """A plain `cdktf deploy` (cdktf.json's cdktf.out) and the Makefile's folder keep state in
    the same file, so changing how a deployment is synthesized never loses its state."""
    stack_dir = REPO_ROOT / outdir / "stacks" / "gemma4-v5e-node"
    reference = terraform_mod.local_state_reference(stack_dir, "gemma4-v5e-node")
    assert not os.path.isabs(reference)
    assert (stack_dir / reference).resolve() == REPO_ROOT / "terraform.gemma4-v5e-node.tfstate"
