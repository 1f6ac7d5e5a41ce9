"""Sweep command construction and the runner, driven by a fake executor (no cloud)."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fake_boot_apis import FakeSecretManager
from tpudeploy import benchcli as bench_cli
from tpudeploy import facts
from tpudeploy.bench.commands import (
    RESULT_DIR_IN_CONTAINER,
    Cell,
    NodeTarget,
    bench_argv,
    cell_command,
    plan_cells,
)
from tpudeploy.bench.settings import PROFILES, BenchConfigError, SweepSettings, settings_from_table
from tpudeploy.bench.sweep import ExecResult, SweepError, run_sweep
from tpudeploy.config import parse_config

FAKE_KEY = "sk-fake-KEY-d0e5n0t-leak"
TARGET = NodeTarget("gemma4-v5e", "us-west4-a", "demo-project")


def flags(argv: Sequence[str]) -> dict[str, list[str]]:
    """Map each --flag to the values that follow it (empty for switches); --flag=value is the
    flag with its one value."""
    out: dict[str, list[str]] = {}
    current = ""
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            name, _, value = arg.partition("=")
            out[name] = [value]
            current = ""
        elif arg.startswith("--"):
            current = arg
            out[current] = []
        elif current:
            out[current].append(arg)
    return out


def bench_part(argv: Sequence[str]) -> list[str]:
    """The `vllm bench serve ...` argv inside a cell command (local or over ssh)."""
    words = shlex.split(argv[-1]) if argv[0] == "gcloud" else list(argv)
    return words[words.index("vllm") :]


# --- settings -------------------------------------------------------------------------------


def test_default_settings_are_the_seed_sweep() -> None:
    profile, settings = settings_from_table(None)
    assert profile == "full"
    assert settings.contexts == facts.CONTEXTS == (128, 1024, 8192)
    assert settings.clients == facts.CLIENTS == (1, 4, 16, 64)
    assert settings.repetitions == 3
    assert len(plan_cells(settings, base_seed=0)) == 3 * 4 * 3


def test_quick_profile_is_smaller_and_shares_request_shape() -> None:
    table = {"output_len": 128, "contexts": [512], "quick": {"clients": [2]}}
    profile, settings = settings_from_table(table, profile="quick")
    assert profile == "quick"
    assert settings.contexts == PROFILES["quick"].contexts == (128, 1024)
    assert settings.clients == (2,)
    assert settings.repetitions == 1
    assert settings.output_len == 128


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"contexts": []}, ["bench.contexts", "non-empty"]),
        ({"clients": [1, 0]}, ["bench.clients", "positive"]),
        ({"clients": [4, 4]}, ["bench.clients", "repeats"]),
        ({"repetitions": "3"}, ["bench.repetitions"]),
        ({"profile": "huge"}, ["bench.profile", "full"]),
        ({"reps": 3}, ["bench.reps", "unknown"]),
        ({"contexts": [32768]}, ["max-model-len 32768", "Lower"]),
    ],
)
def test_bad_settings_name_key_and_fix(table: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(BenchConfigError) as err:
        settings_from_table(table)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


# --- command construction -------------------------------------------------------------------


@pytest.mark.parametrize(("context", "clients"), [(128, 1), (1024, 16), (8192, 64)])
def test_bench_argv_flags_per_cell(context: int, clients: int) -> None:
    settings = SweepSettings()
    cell = Cell(context, clients, 2, 4242)
    argv = bench_argv(settings, cell, result_dir="/results/r")
    assert argv[:3] == ["vllm", "bench", "serve"]
    f = flags(argv)
    assert f["--backend"] == ["openai-chat"]
    assert f["--endpoint"] == ["/v1/chat/completions"]
    assert f["--dataset-name"] == ["random"]
    assert f["--random-input-len"] == [str(context)]
    assert f["--random-output-len"] == [str(settings.output_len)]
    assert f["--ignore-eos"] == []
    assert f["--max-concurrency"] == [str(clients)]
    expected_prompts = max(clients * settings.prompts_per_client, settings.min_prompts)
    assert f["--num-prompts"] == [str(expected_prompts)]
    assert f["--seed"] == ["4242"]
    assert f["--model"] == ["google/gemma-4-E2B-it"]
    assert f["--host"] == ["127.0.0.1"]
    assert f["--port"] == ["8000"]
    assert f["--save-result"] == []
    assert f["--result-dir"] == ["/results/r"]
    name = f["--result-filename"][0]
    assert str(context) in name and f"c{clients}" in name and "r2" in name
    # The cell travels inside the result: vLLM saves --metadata pairs at its top level.
    assert f["--metadata"] == [
        f"tpudeploy_context={context}",
        f"tpudeploy_clients={clients}",
        "tpudeploy_rep=2",
    ]
    image = "sha256:" + "0f" * 32
    with_origin = bench_argv(
        replace(settings, config_hash="c0ffee0123456789"), cell, result_dir="/r", image_id=image
    )
    assert flags(with_origin)["--metadata"][3:] == [
        "tpudeploy_config=c0ffee0123456789",
        f"tpudeploy_image={image}",
    ]


def test_every_run_has_its_own_seed() -> None:
    cells = plan_cells(SweepSettings(), base_seed=1_700_000_000)
    seeds = [cell.seed for cell in cells]
    assert len(set(seeds)) == len(seeds)
    by_cell: dict[tuple[int, int], set[int]] = {}
    for cell in cells:
        by_cell.setdefault((cell.context, cell.clients), set()).add(cell.seed)
    assert all(len(s) == 3 for s in by_cell.values())
    names = [cell.filename for cell in cells]
    assert len(set(names)) == len(names)


def test_cell_command_goes_over_iap_ssh_without_tty() -> None:
    cell = Cell(1024, 16, 1, 7)
    argv = cell_command(SweepSettings(), cell, run_id="run1", target=TARGET)
    assert argv[:7] == ["gcloud", "alpha", "compute", "tpus", "tpu-vm", "ssh", "gemma4-v5e"]
    f = flags(argv)
    assert f["--zone"] == ["us-west4-a"]
    assert f["--project"] == ["demo-project"]
    assert "--tunnel-through-iap" in argv
    assert "--ssh-flag=-T" in argv
    remote = shlex.split(f["--command"][0])
    assert remote[:5] == ["sudo", "docker", "exec", "-i", "vllm-gemma4"]
    in_container = f"{RESULT_DIR_IN_CONTAINER}/run1"
    assert bench_part(argv) == bench_argv(SweepSettings(), cell, result_dir=in_container)


def test_on_node_command_is_the_docker_exec_itself() -> None:
    argv = cell_command(SweepSettings(), Cell(128, 1, 1, 1), run_id="r", target=None)
    assert argv[:5] == ["sudo", "docker", "exec", "-i", "vllm-gemma4"]


def test_in_container_script_reads_key_from_stdin_and_returns_json(tmp_path: Path) -> None:
    """Run the real `sh -c` wrapper with a stand-in `vllm` that checks its environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "vllm"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "a = sys.argv\n"
        "d, n = a[a.index('--result-dir') + 1], a[a.index('--result-filename') + 1]\n"
        "os.makedirs(d, exist_ok=True)\n"
        "ok = os.environ.get('OPENAI_API_KEY') == os.environ['EXPECTED_KEY']\n"
        "print('benchmark chatter', flush=True)\n"
        "json.dump({'key_ok': ok, 'argv': a[1:4]}, open(os.path.join(d, n), 'w'))\n"
    )
    fake.chmod(0o755)
    argv = cell_command(SweepSettings(), Cell(128, 4, 1, 9), run_id="x", target=None)
    on_node = argv[argv.index("sh") :]  # drop `sudo docker exec -i CONTAINER`
    result_dir = tmp_path / "results"
    on_node = [w.replace(f"{RESULT_DIR_IN_CONTAINER}/x", str(result_dir)) for w in on_node]
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "EXPECTED_KEY": FAKE_KEY}
    done = subprocess.run(
        on_node, input=(FAKE_KEY + "\n").encode(), capture_output=True, env=env, check=True
    )
    assert json.loads(done.stdout) == {"key_ok": True, "argv": ["bench", "serve", "--backend"]}
    assert b"benchmark chatter" in done.stderr
    assert FAKE_KEY.encode() not in done.stdout + done.stderr


# --- runner with a fake executor ------------------------------------------------------------


def vllm_result(argv: Sequence[str]) -> dict[str, Any]:
    """A result in the shape `vllm bench serve --save-result` writes, from the run's flags."""
    f = flags(argv)
    clients = int(f["--max-concurrency"][0])
    prompts = int(f["--num-prompts"][0])
    context = int(f["--random-input-len"][0])
    out_len = int(f["--random-output-len"][0])
    tok_s = 100.0 * clients / (1 + context / 4096)
    seed = int(f["--seed"][0])
    result: dict[str, Any] = {
        "date": f"20260809-12{seed // 60 % 60:02d}{seed % 60:02d}",
        "endpoint_type": "openai-chat",
        "backend": "openai-chat",
        "label": None,
        "model_id": f["--model"][0],
        "tokenizer_id": f["--model"][0],
        "num_prompts": prompts,
    }
    # As vLLM does: each --metadata KEY=VALUE at the top level, stripped strings, before the rest.
    for pair in f.get("--metadata", []):
        key, _, value = pair.partition("=")
        result[key.strip()] = value.strip()
    return result | {
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": clients,
        "duration": prompts * out_len / tok_s,
        "completed": prompts,
        "failed": 0,
        "total_input_tokens": prompts * context,
        "total_output_tokens": prompts * out_len,
        "request_throughput": tok_s / out_len,
        "request_goodput": None,
        "output_throughput": tok_s,
        "total_token_throughput": tok_s * (1 + context / out_len),
        "mean_ttft_ms": 20.0,
        "median_ttft_ms": 19.0,
        "std_ttft_ms": 1.0,
        "p99_ttft_ms": 30.0,
        "mean_tpot_ms": 8.1,
        "median_tpot_ms": 8.0,
        "std_tpot_ms": 0.1,
        "p99_tpot_ms": 9.0,
        "mean_itl_ms": 8.1,
        "median_itl_ms": 8.0,
        "std_itl_ms": 0.1,
        "p99_itl_ms": 9.0,
    }


class FakeNode:
    """Stands in for gcloud/ssh/docker: records every argv and stdin, answers like the node."""

    def __init__(self, clock: list[float], *, fail_on: int | None = None) -> None:
        self.calls: list[tuple[list[str], bytes]] = []
        self.clock = clock
        self.fail_on = fail_on
        self.cells_run = 0

    def __call__(self, argv: Sequence[str], *, stdin: bytes) -> ExecResult:
        self.calls.append((list(argv), stdin))
        if "inspect" in argv[-1]:
            lines = [
                "vllm/vllm-tpu:nightly",
                "sha256:" + "ab" * 32,
                json.dumps(["vllm/vllm-tpu@sha256:" + "cd" * 32]),
                "0.26.1rc1.dev125+ga7a204cc6",
            ]
            return ExecResult(0, ("\n".join(lines) + "\n").encode(), b"")
        self.cells_run += 1
        self.clock[0] += 30.0
        if self.fail_on == self.cells_run:
            return ExecResult(1, b"", b"Traceback ... ConnectionRefusedError\n")
        # A misbehaving client echoing the key must still never reach a file.
        stderr = b"Namespace(...)\nkey was " + stdin
        return ExecResult(0, json.dumps(vllm_result(bench_part(argv))).encode(), stderr)


def run_quick(
    tmp_path: Path, node: FakeNode, clock: list[float], *, config_hash: str | None = None
) -> tuple[Path, str]:
    _, settings = settings_from_table(None, profile="quick")
    settings = replace(settings, config_hash=config_hash)
    progress = io.StringIO()
    config = tmp_path / "deploy.toml"
    config.write_text('[bench]\nprofile = "quick"\n')
    out = tmp_path / "results"
    run_sweep(
        settings,
        out_dir=out,
        target=TARGET,
        executor=node,
        api_key=FAKE_KEY,
        profile="quick",
        config_path=config,
        base_seed=1000,
        clock=lambda: clock[0],
        progress=progress,
    )
    return out, progress.getvalue()


def test_runner_writes_results_metadata_and_progress(tmp_path: Path) -> None:
    clock = [0.0]
    node = FakeNode(clock)
    out, progress = run_quick(tmp_path, node, clock)
    _, settings = settings_from_table(None, profile="quick")
    cells = plan_cells(settings, base_seed=1000)
    assert node.cells_run == len(cells) == 4
    for cell in cells:
        saved = json.loads((out / cell.filename).read_text())
        assert saved["max_concurrency"] == cell.clients
        assert saved["total_input_tokens"] / saved["completed"] == cell.context
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["image"]["repo_digests"] == ["vllm/vllm-tpu@sha256:" + "cd" * 32]
    assert meta["image"]["vllm_version"] == "0.26.1rc1.dev125+ga7a204cc6"
    assert meta["base_seed"] == 1000
    assert [c["seed"] for c in meta["cells"]] == [c.seed for c in cells]
    assert meta["finished"]
    assert (out / "config.toml").read_text() == (tmp_path / "deploy.toml").read_text()
    for number in range(1, 5):
        assert f"[{number}/4]" in progress
    assert "elapsed 30s" in progress and "elapsed 2m00s" in progress
    assert "left" in progress


def test_key_never_in_argv_or_files(tmp_path: Path) -> None:
    clock = [0.0]
    node = FakeNode(clock)
    out, progress = run_quick(tmp_path, node, clock)
    cell_calls = [(argv, stdin) for argv, stdin in node.calls if "vllm bench serve" in argv[-1]]
    assert cell_calls
    for argv, _ in node.calls:
        assert not any(FAKE_KEY in arg for arg in argv)
    for _, stdin in cell_calls:
        assert stdin == (FAKE_KEY + "\n").encode()
    assert FAKE_KEY not in progress
    for path in out.rglob("*"):
        if path.is_file():
            assert FAKE_KEY not in path.read_text(), path


def test_metadata_values_are_public_and_name_the_server(tmp_path: Path) -> None:
    """--metadata rides on the ssh command line (a process list shows it): no secret in it."""
    clock = [0.0]
    node = FakeNode(clock)
    run_quick(tmp_path, node, clock, config_hash="0123456789abcdef")
    cell_calls = [argv for argv, _ in node.calls if "vllm bench serve" in argv[-1]]
    assert len(cell_calls) == 4
    public = re.compile(r"tpudeploy_(context|clients|rep)=\d+|tpudeploy_config=[0-9a-f]{16}"
                        r"|tpudeploy_image=sha256:[0-9a-f]{64}"
                        r"|tpudeploy_digest=vllm/vllm-tpu@sha256:[0-9a-f]{64}"
                        r"|tpudeploy_vllm=[0-9a-z.+]+")  # fmt: skip
    for argv in cell_calls:
        pairs = flags(bench_part(argv))["--metadata"]
        assert len(pairs) == 7
        assert all(public.fullmatch(pair) for pair in pairs), pairs
        assert not any(FAKE_KEY in pair for pair in pairs)
        assert "tpudeploy_image=sha256:" + "ab" * 32 in pairs  # what the node's docker reported
        # The build the node served, as make pin would hold it (issue 24).
        assert "tpudeploy_digest=vllm/vllm-tpu@sha256:" + "cd" * 32 in pairs
        assert "tpudeploy_vllm=0.26.1rc1.dev125+ga7a204cc6" in pairs


def test_sweep_results_report_by_content_even_renamed(tmp_path: Path) -> None:
    """make bench output, renamed to vLLM's default names, still lands in the right cells."""
    from tpudeploy.bench.report import build_report

    clock = [0.0]
    out, _ = run_quick(tmp_path, FakeNode(clock), clock, config_hash="0123456789abcdef")
    for path in list(out.glob("ctx*.json")):
        saved = json.loads(path.read_text())
        vllm_name = f"concurrency{saved['max_concurrency']}-gemma-4-E2B-it-{saved['date']}"
        path.rename(out / f"openai-chat-infqps-{vllm_name}.json")
    report = build_report(out)
    (group,) = report.groups
    assert (group.key.config, group.key.image) == ("0123456789abcdef", "sha256:" + "ab" * 32)
    _, settings = settings_from_table(None, profile="quick")
    assert set(group.cells) == {(ctx, c) for ctx in settings.contexts for c in settings.clients}
    for (context, clients), cell in group.cells.items():
        (run,) = cell.runs
        assert run.context_from == "metadata" and run.clients == clients
        # vllm_result's throughput for that context and concurrency.
        assert run.output_throughput == pytest.approx(100.0 * clients / (1 + context / 4096))
    assert not report.skipped


def test_odd_image_id_stops_the_sweep(tmp_path: Path) -> None:
    def node(argv: Sequence[str], *, stdin: bytes) -> ExecResult:
        return ExecResult(0, b"vllm/vllm-tpu:nightly\nlatest please\n[]\n0.26\n", b"")

    with pytest.raises(SweepError, match="not sha256:<64 hex>"):
        run_sweep(SweepSettings(), out_dir=tmp_path / "r", target=TARGET, executor=node)


def test_failed_cell_stops_with_clear_error_and_resume_skips_done(tmp_path: Path) -> None:
    clock = [0.0]
    node = FakeNode(clock, fail_on=3)
    with pytest.raises(SweepError) as err:
        run_quick(tmp_path, node, clock)
    assert "exited 1" in str(err.value) and "resume" in str(err.value)
    done = sorted(p.name for p in (tmp_path / "results").glob("ctx*.json"))
    assert len(done) == 2
    second = FakeNode(clock)
    out, _ = run_quick(tmp_path, second, clock)
    assert second.cells_run == 2
    assert len(list(out.glob("ctx*.json"))) == 4


def test_missing_container_is_one_clear_error(tmp_path: Path) -> None:
    def no_container(argv: Sequence[str], *, stdin: bytes) -> ExecResult:
        return ExecResult(1, b"", b"Error: No such object: vllm-gemma4\n")

    with pytest.raises(SweepError) as err:
        run_sweep(SweepSettings(), out_dir=tmp_path / "r", target=TARGET, executor=no_container)
    assert "vllm-gemma4" in str(err.value) and "deploy" in str(err.value)


# --- CLI ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key_flag", ["env", "secret"])
def test_cli_run_key_sources_stay_off_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key_flag: str
) -> None:
    clock = [0.0]
    node = FakeNode(clock)
    monkeypatch.setattr(bench_cli, "subprocess_executor", node)
    monkeypatch.setenv("BENCH_KEY", FAKE_KEY)
    args = ["run", "--node", "n1", "--zone", "us-west4-a", "--profile", "quick"]
    args += ["--out", str(tmp_path / "o")]
    args += ["--api-key-env", "BENCH_KEY"] if key_flag == "env" else ["--api-key-secret", "vk"]
    with FakeSecretManager({"vk": [FAKE_KEY]}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert bench_cli.main([*args, "--project", "bench-proj-1"]) == 0
    if key_flag == "secret":
        assert [r["path"] for r in sm.requests] == [
            "/v1/projects/bench-proj-1/secrets/vk/versions/latest:access"
        ]
    else:
        assert sm.requests == []
    for argv, _ in node.calls:
        assert not any(FAKE_KEY in arg for arg in argv)
        assert argv[:2] != ["gcloud", "secrets"]  # Secret Manager only through gcp.secretmanager
    cell_stdins = {stdin for argv, stdin in node.calls if "vllm bench serve" in argv[-1]}
    assert cell_stdins == {(FAKE_KEY + "\n").encode()}


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_cli.main(["run", "--profile", "quick"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --node and --zone") and err.count("\n") == 1


def test_cli_plan_prints_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_cli.main(["plan", "--profile", "quick", "--node", "n", "--zone", "z"]) == 0
    lines = capsys.readouterr().out.splitlines()
    commands = [shlex.split(line) for line in lines if not line.startswith("#")]
    assert len(commands) == 4
    assert all(c[0] == "gcloud" and "--tunnel-through-iap" in c for c in commands)


def test_cli_plan_takes_node_and_sweep_from_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text(
        'project = "demo-project"\nzone = "us-west4-a"\nname = "bench-box"\n'
        '[vllm]\ncontainer_name = "served"\nport = 8100\n'
        "[bench]\ncontexts = [256]\nclients = [2, 8]\nrepetitions = 2\noutput_len = 64\n"
    )
    assert bench_cli.main(["plan", "--config", str(config)]) == 0
    commands = [shlex.split(x) for x in capsys.readouterr().out.splitlines() if x[0] != "#"]
    assert len(commands) == 1 * 2 * 2
    for argv in commands:
        assert argv[6] == "bench-box"
        assert flags(argv)["--zone"] == ["us-west4-a"]
        assert flags(argv)["--project"] == ["demo-project"]
        assert shlex.split(argv[-1])[4] == "served"
        f = flags(bench_part(argv))
        assert f["--port"] == ["8100"]
        assert f["--random-input-len"] == ["256"]
        assert f["--random-output-len"] == ["64"]


def test_cli_config_hash_follows_the_serving_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same serving config, same tpudeploy_config; another vllm flag, another one."""

    def config_pairs(text: str) -> set[str]:
        config = tmp_path / "deploy.toml"
        config.write_text('zone = "us-west4-a"\n' + text)
        assert bench_cli.main(["plan", "--config", str(config), "--profile", "quick"]) == 0
        commands = [shlex.split(x) for x in capsys.readouterr().out.splitlines() if x[0] != "#"]
        pairs = {p for argv in commands for p in flags(bench_part(argv))["--metadata"]}
        assert "tpudeploy_image=IMAGE_ID" in pairs  # filled in by run from the node's docker
        return {p for p in pairs if p.startswith("tpudeploy_config=")}

    base = config_pairs("")
    assert len(base) == 1 and re.fullmatch(r"tpudeploy_config=[0-9a-f]{16}", next(iter(base)))
    assert config_pairs('name = "other-name"\n') == base  # not a serving setting
    assert config_pairs("[vllm]\nmax_num_batched_tokens = 8192\n") != base


def test_no_key_by_default_and_the_named_secret_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM listens on the node's loopback without a key (the TLS proxy checks it), so `make
    bench` reads no secret unless told; --api-key-secret reads it through Secret Manager's API
    like make smoke."""
    cfg = parse_config({"project": "bench-proj-1"})
    args = argparse.Namespace(api_key_env=None, api_key_secret=None, project=None, route="replica")
    with FakeSecretManager({cfg.api_key_secret_id: ["old-key", "k3y-value\n"]}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert bench_cli._api_key(args, cfg) == ""
        assert sm.requests == []
        args.api_key_secret = cfg.api_key_secret_id
        assert bench_cli._api_key(args, cfg) == "k3y-value"
        # Through the Gateway each replica's front door checks the key: the deployment's own.
        gateway = argparse.Namespace(
            api_key_env=None, api_key_secret=None, project=None, route="gateway"
        )
        assert bench_cli._api_key(gateway, cfg) == "k3y-value"
    assert [r["path"] for r in sm.requests] == 2 * [
        f"/v1/projects/bench-proj-1/secrets/{cfg.api_key_secret_id}/versions/latest:access"
    ]


def test_api_key_secret_without_a_project_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    args = ["run", "--node", "n1", "--zone", "us-west4-a", "--api-key-secret", "vk"]
    assert bench_cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --api-key-secret vk: no project to read it from; pass --project")
    assert err.count("\n") == 1


def test_a_missing_api_key_secret_says_how_to_create_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--node", "n1", "--zone", "us-west4-a", "--api-key-secret", "vk"]
    with FakeSecretManager({}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert bench_cli.main([*args, "--project", "bench-proj-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read the API key: secret vk (or a version of it) does not")
    assert "`make api-key`" in err and err.count("\n") == 1
