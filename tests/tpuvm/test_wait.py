"""`make wait` against a loopback TPU API: phases shown, ready / failed / timeout exit codes."""

from __future__ import annotations

import io
import itertools
import shlex
from pathlib import Path

import pytest

from tests.fake_boot_apis import FakeTpu
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.iapssh import ssh_argv
from tpudeploy.tpuvm.queued_resource import TpuApi
from tpudeploy.tpuvm.wait import wait_ready

PROJECT = "test-proj"


@pytest.fixture
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT})


def run_wait(
    fake: FakeTpu, cfg: DeployConfig, monkeypatch: pytest.MonkeyPatch, *, timeout: float = 100.0
) -> tuple[int, str]:
    monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
    clock = itertools.count(0, 10)  # each poll is 10 s later
    out = io.StringIO()
    rc = wait_ready(
        cfg,
        PROJECT,
        api=TpuApi(log=io.StringIO()),
        timeout=timeout,
        interval=10,
        out=out,
        clock=lambda: float(next(clock)),
        sleep=lambda _s: None,
    )
    return rc, out.getvalue()


def test_ready_after_the_phases(cfg: DeployConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    phases = [(None, ""), ("pulling-image", ""), ("starting-vllm", ""), ("starting-vllm", "")]
    with FakeTpu([*phases, ("ready", "")]) as fake:
        rc, out = run_wait(fake, cfg, monkeypatch)
        paths = {r["path"].split("?")[0] for r in fake.requests}
        queries = [r["body"] for r in fake.requests if ":getGuestAttributes" in r["path"]]
    assert rc == 0, out
    lines = out.splitlines()
    assert [line.split("] ")[1].split(":")[0] for line in lines if line.startswith("[")] == [
        "no-report",
        "pulling-image",
        "starting-vllm",
        "ready",
    ]
    assert "[50s] ready" in out and "make smoke" in out and "make accept" in out
    node = f"/v2alpha1/projects/{PROJECT}/locations/us-west4-a/nodes/{cfg.node_id}"
    assert f"{node}:getGuestAttributes" in paths
    # Only the startup script's own namespace is asked for.
    assert queries and all(q == {"queryPath": "tpudeploy/"} for q in queries)


def test_failed_phase_exits_non_zero_with_reason_and_next_commands(
    cfg: DeployConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = (
        "secret gemma4-v5e-hf-token has no version in project test-proj. Add one with 'make secret'"
    )
    with FakeTpu([("reading-secrets", ""), ("failed", reason)]) as fake:
        rc, out = run_wait(fake, cfg, monkeypatch)
    assert rc == 1
    assert reason in out
    assert "make status" in out
    assert f"sudo docker logs --tail 100 {cfg.vllm.container_name}" in out
    # The hint is the command line tests/tpuvm/test_gcloud_commands.py has the real gcloud parse.
    ssh = shlex.join([*ssh_argv(cfg.node_id, cfg.zone, PROJECT), "--"])
    assert ssh.startswith("gcloud alpha compute tpus tpu-vm ssh ")
    assert f"{ssh} sudo docker logs --tail 100 {cfg.vllm.container_name}" in out


def test_timeout_names_the_phase_and_the_next_command(
    cfg: DeployConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeTpu([("starting-vllm", "")]) as fake:
        rc, out = run_wait(fake, cfg, monkeypatch, timeout=60)
    assert rc == 3
    assert "timed out after 1m00s in phase starting-vllm" in out
    assert "docker logs -f vllm-gemma4" in out


def test_missing_node_is_reported_not_crashed(
    cfg: DeployConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeTpu([("no-node", "")]) as fake:
        rc, out = run_wait(fake, cfg, monkeypatch, timeout=20)
    assert rc == 3
    assert "no-node: the node does not exist yet" in out
    assert "Traceback" not in out


def test_cli_wait_exits_with_the_boot_result(
    cfg: DeployConfig,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tpudeploy import cli

    config = tmp_path / "deploy.toml"
    config.write_text(f'project = "{PROJECT}"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    with FakeTpu([("ready", "")]) as fake:
        monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
        assert cli.main(["wait", "--interval", "0"]) == 0
    assert "ready" in capsys.readouterr().out


def test_cli_wait_without_credentials_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tpudeploy import cli

    config = tmp_path / "deploy.toml"
    config.write_text(f'project = "{PROJECT}"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    # An unreadable credentials file fails inside google.auth.default(), before any network.
    monkeypatch.delenv("TPU_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    assert cli.main(["wait", "--interval", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no Google Cloud credentials")
    assert "gcloud auth application-default login" in err and "Traceback" not in err


def test_ready_prints_the_boot_checks_warnings_and_wins(
    cfg: DeployConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24: what the node measured against the planner, when it says ready."""
    import json

    from tests import boot_logs
    from tpudeploy import bootcheck
    from tpudeploy.nodebuild import boot_expectations
    from tpudeploy.render import vllm_serve_args

    expected = boot_expectations(cfg, vllm_serve_args(cfg.vllm))
    check = bootcheck.report(boot_logs.vllm_log(groups=2), expected, {"cache": "hit"})
    with FakeTpu([("ready", "")], attributes={"boot-check": json.dumps(check)}) as fake:
        rc, out = run_wait(fake, cfg, monkeypatch)
    assert rc == 0
    assert "boot check: 0 warning(s), 1 open win(s) reached" in out
    assert "  win: num_kv_cache_groups=2: sliding windows reached" in out
    assert "ok:" not in out and "note:" not in out
