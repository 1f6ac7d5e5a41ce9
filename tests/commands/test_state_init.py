"""`make state-init`: the state bucket created with every setting against the fake Cloud Storage,
and a real local Terraform state moved into another backend without loss, or refused when the
backend already holds a different state.

The migration runs Terraform 1.11.4's own gcs backend against the fake Cloud Storage (its
storage_custom_endpoint): the lock object, the state object's versions and the bucket's IAM are
the fake's. Not exercised: Google's real service, and Application Default Credentials (the
backend takes an access token here).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.rehearsal.fakes.inventory import OWNER, Inventory
from tools.rehearsal.fakes.storage import FakeStorage
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gcp.statebucket import TEAM_ROLE, StateBucketApi, StateBucketError, StateBucketSpec
from tpudeploy.stateinit import (
    MIGRATED_SUFFIX,
    STATE_OBJECT,
    StateInitError,
    state_init,
    state_prefix,
)

PROJECT = "state-proj"
STACK = "gemma4-v5e-secrets"

needs_terraform = pytest.mark.skipif(
    shutil.which("terraform") is None, reason="Terraform is not on PATH"
)


@pytest.fixture
def gcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeStorage]:
    inventory = Inventory()
    inventory.enable(PROJECT, "storage.googleapis.com")
    with FakeStorage(inventory) as fake:
        assert isinstance(fake, FakeStorage)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake.host)
        yield fake


def run(cfg: DeployConfig, root: Path, **kwargs: object) -> str:
    out = io.StringIO()

    def no_synth() -> Path:
        raise AssertionError("no synth expected")

    args: dict[str, object] = {
        "stacks": (STACK,),
        "api": StateBucketApi.from_env,
        "synthesize": no_synth,
        "config_file": str(root / "deploy.toml"),
        "root": root,
        "out": out,
    }
    args.update(kwargs)
    state_init(cfg, PROJECT, **args)  # type: ignore[arg-type]
    return out.getvalue()


def test_creates_the_bucket_with_every_setting_and_prints_the_line(
    gcs: FakeStorage, tmp_path: Path
) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text(f'project = "{PROJECT}"\n', encoding="utf-8")
    before = config.read_bytes()
    text = run(parse_config({"project": PROJECT}), tmp_path)
    bucket = gcs.inventory.get("storage", f"b/{PROJECT}-tfstate")
    assert bucket is not None, text
    assert bucket["_project"] == PROJECT
    assert bucket["versioning"] == {"enabled": True}
    assert bucket["iamConfiguration"]["uniformBucketLevelAccess"] == {"enabled": True}
    assert bucket["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    assert bucket["location"] == "US-WEST4"
    rule = bucket["lifecycle"]["rule"]
    assert rule == [
        {"action": {"type": "Delete"}, "condition": {"isLive": False, "numNewerVersions": 10}}
    ]
    assert "force_destroy" not in json.dumps(bucket) and "forceDestroy" not in bucket
    # The line to add is printed; the config is never edited.
    assert f'state_bucket = "{PROJECT}-tfstate"' in text
    assert config.read_bytes() == before
    # That line only (issue 37): pipeline = true would hand the node account and secrets to a
    # GitOps bootstrap, and the next apply would destroy them.
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("add this line to")))
    assert lines[start + 1].strip() == f'state_bucket = "{PROJECT}-tfstate"'
    assert not any(line.strip() == "pipeline = true" for line in lines)
    assert "only that line: remote state changes no resource" in lines[start + 2]
    # The grants: what the operator needs, what teammates need, none given.
    assert "storage.buckets.create on project state-proj" in text
    assert f"roles/storage.objectAdmin on gs://{PROJECT}-tfstate" in text
    assert "grants given: none" in text
    assert not gcs.inventory.policy("storage", f"b/{PROJECT}-tfstate")


def test_dry_run_calls_nothing(gcs: FakeStorage, tmp_path: Path) -> None:
    (tmp_path / f"terraform.{STACK}.tfstate").write_text('{"serial": 1}', encoding="utf-8")
    text = run(parse_config({"project": PROJECT}), tmp_path, dry_run=True)
    assert gcs.requests == []
    assert f"would move {tmp_path / f'terraform.{STACK}.tfstate'}" in text
    assert f"gs://{PROJECT}-tfstate/tpudeploy/gemma4-v5e/{STACK}/default.tfstate" in text
    assert (tmp_path / f"terraform.{STACK}.tfstate").exists()


def test_an_existing_bucket_without_versioning_is_refused(gcs: FakeStorage, tmp_path: Path) -> None:
    api = StateBucketApi.from_env()
    body = StateBucketSpec("shared-tfstate", "US-WEST4").body()
    body["versioning"] = {"enabled": False}
    api.session.post(
        f"{api.base_url}/storage/v1/b", params={"project": PROJECT}, json=body, timeout=5
    )
    with pytest.raises(StateInitError, match=r"gs://shared-tfstate exists but lacks .*versioning"):
        run(parse_config({"project": PROJECT, "state_bucket": "shared-tfstate"}), tmp_path)


def test_a_bucket_name_someone_else_holds_is_refused_with_the_fix(
    gcs: FakeStorage, tmp_path: Path
) -> None:
    gcs.inventory.enable("other-proj", "storage.googleapis.com")
    api = StateBucketApi.from_env()
    api.insert("other-proj", StateBucketSpec("x-tfstate", "US"))
    with pytest.raises(StateBucketError, match=r"'x-tfstate' is taken .*STATE_BUCKET="):
        api.insert(PROJECT, StateBucketSpec("x-tfstate", "US"))


TEAMMATE = "user:teammate@example.com"
# The fake's opaque access tokens (no secret: the fake maps them to principals).
OWNER_TOKEN = "owner-token"  # noqa: S105
TEAMMATE_TOKEN = "teammate-token"  # noqa: S105


@pytest.fixture
def backend(gcs: FakeStorage, monkeypatch: pytest.MonkeyPatch) -> FakeStorage:
    """Terraform's own gcs backend pointed at the fake: the variables the backend reads for
    storage_custom_endpoint and access_token (developer.hashicorp.com/terraform/language/
    backend/gcs: GOOGLE_BACKEND_STORAGE_CUSTOM_ENDPOINT, GOOGLE_OAUTH_ACCESS_TOKEN)."""
    gcs.inventory.tokens[OWNER_TOKEN] = OWNER
    gcs.inventory.tokens[TEAMMATE_TOKEN] = TEAMMATE
    monkeypatch.setenv("GOOGLE_BACKEND_STORAGE_CUSTOM_ENDPOINT", f"http://{gcs.host}/storage/v1/")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", OWNER_TOKEN)
    monkeypatch.setenv("CHECKPOINT_DISABLE", "1")
    return gcs


def _terraform(folder: Path, *args: str, token: str = OWNER_TOKEN) -> str:
    return subprocess.run(
        ["terraform", f"-chdir={folder}", *args, "-no-color"],
        check=True,
        capture_output=True,
        text=True,
        # Without STORAGE_EMULATOR_HOST, which the Go client behind the backend also honours
        # (then it sends no credentials, which the fake takes as the owner's): the backend
        # reaches the fake through storage_custom_endpoint, with `token` as the caller.
        env={
            **{k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"},
            "GOOGLE_OAUTH_ACCESS_TOKEN": token,
        },
    ).stdout


def _stack(folder: Path, backend: dict[str, Any], value: str) -> Path:
    """A stack with no provider (terraform_data is built in) and the given backend block."""
    folder.mkdir(parents=True)
    doc = {
        "terraform": {"backend": backend},
        "resource": {"terraform_data": {"marker": {"input": value}}},
    }
    (folder / "main.tf.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


def _gcs(cfg: DeployConfig) -> dict[str, Any]:
    """The backend block stacks/common.py declares for a stack of `cfg` (same bucket, prefix)."""
    return {"gcs": {"bucket": cfg.state_bucket, "prefix": state_prefix(cfg, STACK)}}


def _apply(folder: Path) -> None:
    _terraform(folder, "init", "-input=false")
    _terraform(folder, "apply", "-auto-approve", "-input=false")


def _bucket_state(gcs: FakeStorage, cfg: DeployConfig) -> dict[str, Any]:
    bucket = gcs.inventory.get("storage", f"b/{cfg.state_bucket}") or {}
    versions = bucket["_objects"][f"{state_prefix(cfg, STACK)}/{STATE_OBJECT}"]
    state: dict[str, Any] = json.loads(versions[-1][1])
    return state


CFG = parse_config({"project": PROJECT, "state_bucket": "team-tfstate"})


@needs_terraform
def test_local_state_moves_into_the_bucket_without_loss(
    backend: FakeStorage, tmp_path: Path
) -> None:
    local = tmp_path / f"terraform.{STACK}.tfstate"
    made = _stack(tmp_path / "made-here", {"local": {"path": str(local)}}, "deployed")
    _apply(made)
    original = json.loads(local.read_text(encoding="utf-8"))
    outdir = tmp_path / "out"
    _stack(outdir / "stacks" / STACK, _gcs(CFG), "deployed")
    text = run(CFG, tmp_path, synthesize=lambda: outdir)
    assert backend.inventory.get("storage", "b/team-tfstate") is not None
    moved = _bucket_state(backend, CFG)
    assert moved["lineage"] == original["lineage"]
    # Terraform may number the pushed snapshot past the empty one the backend's init wrote.
    assert moved["serial"] >= original["serial"]
    assert moved["resources"] == original["resources"]
    # Kept, not deleted; no longer where a config without state_bucket would read it.
    assert not local.exists()
    kept = json.loads(local.with_name(local.name + MIGRATED_SUFFIX).read_text(encoding="utf-8"))
    assert kept == original
    assert f"{STACK}: moved" in text
    # Terraform in the stack folder now plans against the bucket: nothing to create.
    plan = _terraform(outdir / "stacks" / STACK, "plan", "-input=false", "-detailed-exitcode")
    assert "No changes" in plan
    # A teammate with the role state-init names reads the same state; without it, nobody.
    elsewhere = _stack(tmp_path / "teammate", _gcs(CFG), "deployed")
    with pytest.raises(subprocess.CalledProcessError) as refused:
        _terraform(elsewhere, "init", "-input=false", token=TEAMMATE_TOKEN)
    assert "403" in refused.value.stderr
    backend.inventory.policy("storage", "b/team-tfstate").append(
        {"role": TEAM_ROLE, "members": [TEAMMATE]}
    )
    _terraform(elsewhere, "init", "-input=false", "-reconfigure", token=TEAMMATE_TOKEN)
    listed = _terraform(elsewhere, "state", "list", token=TEAMMATE_TOKEN)
    assert listed.split() == ["terraform_data.marker"]
    # A second state-init finds nothing to move and changes nothing.
    again = run(CFG, tmp_path, synthesize=lambda: outdir)
    assert "no local state to move" in again
    assert _bucket_state(backend, CFG) == moved


@needs_terraform
def test_a_different_state_in_the_bucket_is_never_overwritten(
    backend: FakeStorage, tmp_path: Path
) -> None:
    local = tmp_path / f"terraform.{STACK}.tfstate"
    _apply(_stack(tmp_path / "mine", {"local": {"path": str(local)}}, "mine"))
    StateBucketApi.from_env().insert(PROJECT, StateBucketSpec("team-tfstate", "US-WEST4"))
    # A teammate already deployed this stack from the bucket.
    _apply(_stack(tmp_path / "teammate", _gcs(CFG), "theirs"))
    theirs = _bucket_state(backend, CFG)
    local_before = local.read_bytes()
    outdir = tmp_path / "out"
    _stack(outdir / "stacks" / STACK, _gcs(CFG), "mine")
    with pytest.raises(StateInitError, match=r"already holds state for .* that differs"):
        run(CFG, tmp_path, synthesize=lambda: outdir)
    assert _bucket_state(backend, CFG) == theirs
    assert local.read_bytes() == local_before


@needs_terraform
def test_two_deployments_share_the_bucket_never_a_state_file(
    backend: FakeStorage, tmp_path: Path
) -> None:
    """Two deployments of one project, one bucket: each stack's state under its own prefix;
    moving the second neither sees nor touches the first's."""
    moved = {}
    for name, value in (("team-a", "a"), ("team-b", "b")):
        cfg = parse_config({"project": PROJECT, "name": name, "state_bucket": "team-tfstate"})
        stack = f"{name}-secrets"
        root = tmp_path / name
        local = root / f"terraform.{stack}.tfstate"
        _apply(_stack(root / "made", {"local": {"path": str(local)}}, value))
        outdir = root / "out"
        block = {"gcs": {"bucket": "team-tfstate", "prefix": state_prefix(cfg, stack)}}
        _stack(outdir / "stacks" / stack, block, value)
        run(cfg, root, stacks=(stack,), synthesize=lambda outdir=outdir: outdir)
        moved[name] = json.loads(local.with_name(local.name + MIGRATED_SUFFIX).read_text())
    objects = backend.objects("team-tfstate")
    for name, original in moved.items():
        key = f"tpudeploy/{name}/{name}-secrets/{STATE_OBJECT}"
        assert key in objects
        bucket = backend.inventory.get("storage", "b/team-tfstate") or {}
        state = json.loads(bucket["_objects"][key][-1][1])
        assert state["lineage"] == original["lineage"]
        assert state["resources"] == original["resources"]
    assert moved["team-a"]["lineage"] != moved["team-b"]["lineage"]
