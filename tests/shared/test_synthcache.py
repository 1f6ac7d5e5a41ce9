"""main.py reuses the last synth only when every input and the output on disk are unchanged."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import Synthesizer, run_main
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
    # A capacity ladder's rung is another node in another zone: named by the walk, or recorded.
    monkeypatch.setenv("TPUDEPLOY_RUNG", "2")
    assert synthcache.input_key(config, out, root=root) != key
    monkeypatch.delenv("TPUDEPLOY_RUNG")
    (tmp_path / "tpudeploy.gemma4-v5e.rung.json").write_text('{"rung": 2}')
    assert synthcache.input_key(config, out, root=root) != key


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


def main_in_process(
    tmp_path: Path,
    config_text: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, Path]:
    """main.main() in this process (sharing the session's jsii load; the synths are what the
    test compares, not the process), with run_main's config file and output directory."""
    import main

    config = tmp_path / "deploy.toml"
    config.write_text(config_text)
    outdir = tmp_path / "out"
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.setenv("CDKTF_OUTDIR", str(outdir))
    capsys.readouterr()
    code = main.main()
    return code, capsys.readouterr().out, outdir


def test_main_reuses_an_unchanged_synth_and_redoes_a_changed_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    synth: Synthesizer,
) -> None:
    synth({})  # the jsii assembly is loaded once per session
    code, first, outdir = main_in_process(
        tmp_path, 'project = "cache-test-1"\n', monkeypatch, capsys
    )
    assert code == 0
    assert "synthesized deployment" in first
    written = (outdir / "stacks" / "gemma4-v5e-node" / "cdk.tf.json").read_text()
    stamp = json.loads((outdir / synthcache.STAMP).read_text())

    # The reuse runs as `make synth` and each cdktf command run it: a new process, which must
    # not load the jsii assembly at all.
    monkeypatch.delenv("DEPLOY_CONFIG")
    monkeypatch.delenv("CDKTF_OUTDIR")
    start = time.monotonic()
    again, _ = run_main(tmp_path, 'project = "cache-test-1"\n')
    assert again.returncode == 0, again.stderr
    assert "unchanged since the last synth" in again.stdout
    # No jsii load: well under the seconds a synth costs.
    assert time.monotonic() - start < 5
    assert (outdir / "stacks" / "gemma4-v5e-node" / "cdk.tf.json").read_text() == written
    assert "KV pool" in again.stdout  # the same summary as a synth
    # The seed's image is a moving tag: warned exactly once, by a synth and by its reuse.
    for out in (first, again.stdout):
        assert out.count("a tag, not a digest") == 1, out
        assert out.count("`make pin`") == 1

    code, changed, _ = main_in_process(tmp_path, 'project = "cache-test-2"\n', monkeypatch, capsys)
    assert code == 0
    assert "unchanged since the last synth" not in changed
    assert "synthesized deployment" in changed
    assert "cache-test-2" in (outdir / "stacks" / "gemma4-v5e-node" / "cdk.tf.json").read_text()
    assert json.loads((outdir / synthcache.STAMP).read_text()) != stamp

    # The first config again (the watch's pinned build after its candidate): put back, no synth.
    code, back, _ = main_in_process(tmp_path, 'project = "cache-test-1"\n', monkeypatch, capsys)
    assert code == 0
    assert "synthesized deployment" not in back
    assert "put back" in back
    assert (outdir / "stacks" / "gemma4-v5e-node" / "cdk.tf.json").read_text() == written
    assert json.loads((outdir / synthcache.STAMP).read_text()) == stamp


def test_the_cli_context_of_no_relative_module_is_no_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cdktf CLI runs the app with CDKTF_CONTEXT_JSON={"cdktfRelativeModules": []}; `tpudeploy
    recover` (the first step of `make deploy`) runs main.py itself without it. Both write the
    same JSON, so both must find the other's synth: the rehearsal's flex-start deploys after a
    destroy synthesized twice, each run overwriting the other's stamp."""
    config = tmp_path / "deploy.toml"
    config.write_text('project = "p-12345"\n')
    out = tmp_path / "out"
    monkeypatch.delenv("CDKTF_CONTEXT_JSON", raising=False)
    plain = synthcache.input_key(config, out)
    monkeypatch.setenv("CDKTF_CONTEXT_JSON", '{"cdktfRelativeModules":[]}')
    assert synthcache.input_key(config, out) == plain
    # A context that can change the output still changes the key.
    monkeypatch.setenv("CDKTF_CONTEXT_JSON", '{"cdktfRelativeModules":["./modules/x"]}')
    assert synthcache.input_key(config, out) != plain
    monkeypatch.setenv("CDKTF_CONTEXT_JSON", '{"cdktfRelativeModules":[],"other":1}')
    assert synthcache.input_key(config, out) != plain


def test_a_kept_synth_is_put_back_only_untouched_and_only_the_last_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_output(tmp_path)
    node = tmp_path / "stacks" / "s" / "cdk.tf.json"
    synthcache.record(tmp_path, "a")
    synthcache.keep(tmp_path, "a")
    node.write_text('{"resource": {"b": {}}}')  # another config's synth, one stack more
    (tmp_path / "stacks" / "b-only").mkdir()
    (tmp_path / "stacks" / "b-only" / "cdk.tf.json").write_text("{}")
    synthcache.record(tmp_path, "b")
    synthcache.keep(tmp_path, "b")
    assert not synthcache.fresh(tmp_path, "a")
    assert not synthcache.restore(tmp_path, "never synthesized")
    assert synthcache.restore(tmp_path, "a")
    assert node.read_text() == '{"resource": {}}'
    assert not (tmp_path / "stacks" / "b-only").exists()  # as a synth prunes other stacks
    assert synthcache.fresh(tmp_path, "a")
    assert synthcache.restore(tmp_path, "b")
    assert node.read_text() == '{"resource": {"b": {}}}'
    # An edited copy is never put back.
    kept_a = tmp_path / synthcache.KEPT / "a" / "stacks" / "s" / "cdk.tf.json"
    kept_a.write_text('{"resource": {"edited": {}}}')
    assert not synthcache.restore(tmp_path, "a")
    assert node.read_text() == '{"resource": {"b": {}}}'
    # Off: nothing kept, nothing put back.
    monkeypatch.setenv(synthcache.DISABLE_ENV, "0")
    assert not synthcache.restore(tmp_path, "b")
    synthcache.keep(tmp_path, "off")
    assert not (tmp_path / synthcache.KEPT / "off").exists()
    monkeypatch.delenv(synthcache.DISABLE_ENV)
    # Bounded: the KEEP most recently kept or put back.
    for n in range(synthcache.KEEP + 2):
        synthcache.record(tmp_path, f"k{n}")
        synthcache.keep(tmp_path, f"k{n}")
        time.sleep(0.01)  # distinct modification times
    kept = sorted(p.name for p in (tmp_path / synthcache.KEPT).iterdir())
    assert kept == [f"k{n}" for n in range(2, synthcache.KEEP + 2)]
