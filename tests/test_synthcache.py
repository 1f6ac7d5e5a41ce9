"""main.py reuses the last synth only when every input and the output on disk are unchanged."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import run_main
from tpudeploy import synthcache


def fake_output(outdir: Path) -> None:
    (outdir / "stacks" / "s").mkdir(parents=True)
    (outdir / "manifest.json").write_text("{}")
    (outdir / "stacks" / "s" / "cdk.tf.json").write_text('{"resource": {}}')


def test_any_input_changes_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    (root / "stacks").mkdir(parents=True)
    (root / "stacks" / "node.py").write_text("A = 1\n")
    (root / "main.py").write_text("")
    config = tmp_path / "deploy.toml"
    config.write_text('project = "p-12345"\n')
    out = tmp_path / "out"
    key = synthcache.input_key(config, out, root=root)
    assert synthcache.input_key(config, out, root=root) == key
    config.write_text('project = "p-67890"\n')
    assert synthcache.input_key(config, out, root=root) != key
    config.write_text('project = "p-12345"\n')
    (root / "stacks" / "node.py").write_text("A = 2\n")
    assert synthcache.input_key(config, out, root=root) != key
    (root / "stacks" / "node.py").write_text("A = 1\n")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "other-project")
    assert synthcache.input_key(config, out, root=root) != key
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    assert synthcache.input_key(config, tmp_path / "elsewhere", root=root) != key
    assert synthcache.input_key(config, out, root=root) == key


def test_edited_output_or_the_switch_means_a_new_synth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_output(tmp_path)
    synthcache.record(tmp_path, "k")
    assert synthcache.fresh(tmp_path, "k")
    assert not synthcache.fresh(tmp_path, "other inputs")
    monkeypatch.setenv(synthcache.DISABLE_ENV, "0")
    assert not synthcache.fresh(tmp_path, "k")
    monkeypatch.delenv(synthcache.DISABLE_ENV)
    (tmp_path / "stacks" / "s" / "cdk.tf.json").write_text('{"resource": {"x": {}}}')
    assert not synthcache.fresh(tmp_path, "k")
    synthcache.record(tmp_path, "k")
    (tmp_path / "manifest.json").unlink()
    assert not synthcache.fresh(tmp_path, "k")


def test_main_reuses_an_unchanged_synth_and_redoes_a_changed_one(tmp_path: Path) -> None:
    first, outdir = run_main(tmp_path, 'project = "cache-test-1"\n')
    assert first.returncode == 0, first.stderr
    written = (outdir / "stacks" / "gemma4-v5e-node" / "cdk.tf.json").read_text()
    stamp = json.loads((outdir / synthcache.STAMP).read_text())

    start = time.monotonic()
    again, _ = run_main(tmp_path, 'project = "cache-test-1"\n')
    assert again.returncode == 0, again.stderr
    assert "unchanged since the last synth" in again.stdout
    # No jsii load: well under the seconds a synth costs.
    assert time.monotonic() - start < 5
    assert (outdir / "stacks" / "gemma4-v5e-node" / "cdk.tf.json").read_text() == written
    assert "KV pool" in again.stdout  # the same summary as a synth
    # The seed's image is a moving tag: warned exactly once, by a synth and by its reuse.
    for run in (first, again):
        assert run.stdout.count("a tag, not a digest") == 1, run.stdout
        assert run.stdout.count("`make pin`") == 1

    changed, _ = run_main(tmp_path, 'project = "cache-test-2"\n')
    assert changed.returncode == 0, changed.stderr
    assert "unchanged since the last synth" not in changed.stdout
    assert "synthesized deployment" in changed.stdout
    assert "cache-test-2" in (outdir / "stacks" / "gemma4-v5e-node" / "cdk.tf.json").read_text()
    assert json.loads((outdir / synthcache.STAMP).read_text()) != stamp
