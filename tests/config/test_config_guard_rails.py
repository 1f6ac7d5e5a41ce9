"""The planner's guard rails as the config sees them: errors stop synth, warnings are printed."""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import pytest

from tests import cli_fork
from tests.conftest import Synthesizer, run_main
from tpudeploy import policy
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.platform import guard_rails, summary_lines

# (overrides, key named in the message, a fragment of the seed's reason)
REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"vllm": {"gpu_memory_utilization": 0.95}}, "vllm.gpu_memory_utilization", "691 s"),
    ({"vllm": {"kv_cache_dtype": "int8"}}, "vllm.kv_cache_dtype", "invalid choice"),
    ({"vllm": {"kv_cache_dtype": "nvfp4"}}, "vllm.kv_cache_dtype", "boot"),
    ({"vllm": {"kv_cache_dtype": "turboquant_k8v4"}}, "vllm.kv_cache_dtype", "boot"),
    ({"vllm": {"tensor_parallel_size": 4}}, "vllm.tensor_parallel_size", "chip"),
    ({"vllm": {"max_num_batched_tokens": 2048}}, "vllm.max_num_batched_tokens", "2496"),
]

WARNED: list[tuple[dict[str, Any], str, str]] = [
    ({"vllm": {"kv_cache_dtype": "fp8_e4m3"}}, "vllm.kv_cache_dtype", "1.000x"),
    ({"vllm": {"block_size": 32}}, "vllm.block_size", "512"),
    ({"vllm": {"max_num_batched_tokens": 3000}}, "vllm.max_num_batched_tokens", "4096"),
    (
        {"load": {"expected_clients": 64, "expected_context": 8192}},
        "load.expected_clients",
        "321",
    ),
]


@pytest.mark.parametrize(("overrides", "key", "reason"), REFUSED)
def test_refused_with_key_and_seed_reason(overrides: dict[str, Any], key: str, reason: str) -> None:
    cfg = parse_config(overrides)  # loading alone never applies the guard rails
    with pytest.raises(ConfigError) as err:
        policy.enforce(cfg, guard_rails(cfg), source="deploy.toml")
    assert key in str(err.value)
    assert reason in str(err.value)
    # The one-line problem names the file it came from, then what to change.
    assert err.value.source == "deploy.toml"
    assert str(err.value).startswith("deploy.toml: 1 problem(s) in the deployment config:")


def test_creating_commands_print_warnings_and_refuse_errors_never_both() -> None:
    cfg = parse_config({"vllm": {"kv_cache_dtype": "int8", "block_size": 64}})
    (refusal,) = policy.refusals(guard_rails(cfg))
    assert refusal.startswith("error: vllm.kv_cache_dtype = 'int8': ")
    (warning,) = policy.warnings(guard_rails(cfg))
    assert warning.startswith("warning: vllm.block_size = 64: ")


@pytest.mark.parametrize(("overrides", "key", "reason"), WARNED)
def test_warned_in_the_synth_summary(overrides: dict[str, Any], key: str, reason: str) -> None:
    cfg = parse_config(overrides)
    lines = [line for line in summary_lines(cfg) if key in line]
    assert lines, f"no line about {key} in the synth summary"
    assert any(reason in line for line in lines)


def test_override_keys_let_the_user_know_better() -> None:
    forced = parse_config(
        {"vllm": {"gpu_memory_utilization": 0.95, "force_gpu_memory_utilization": True}}
    )
    assert any("vllm.gpu_memory_utilization" in line for line in summary_lines(forced))
    quiet = parse_config({"vllm": {"kv_cache_dtype": "fp8", "force_kv_cache_dtype": True}})
    assert not any("kv_cache_dtype" in line for line in summary_lines(quiet))


def test_the_seeds_config_is_quiet_but_for_its_moving_tag() -> None:
    cfg = parse_config({})
    assert guard_rails(cfg) == []
    summary = summary_lines(cfg)
    # The seed's vllm/vllm-tpu:nightly moves every day (issue 24): one warning, then the
    # summary itself (cost, billing stop, $ per million tokens and the cell it assumes, what the
    # idle stop would save on flex-start (issue 39), what is not counted, endpoint, KV pool,
    # safe concurrency).
    assert [line.split(":", 1)[0] for line in summary] == [
        "warning",
        "cost",
        "billing stops",
        "$/M (flex-start)",
        "idle stop",
        "not counted",
        "endpoint",
        "KV pool",
        "safe concurrency",
        "dashboard",
        "alerts",
        "watching",
    ]
    assert summary[-2].startswith("alerts: the policies notify nobody")
    # The node's Ops Agent ships vLLM's metrics: the no-server alert is declared on it too.
    assert "No vLLM server reporting" in summary[-3]
    assert summary[0].startswith("warning: vllm.image = 'vllm/vllm-tpu:nightly': a tag")
    assert summary[1].startswith("cost: $0.6000/h (flex-start")
    assert "on its own after max run duration 4 h" in summary[2]


def test_spot_with_no_end_is_a_loud_destroy_reminder() -> None:
    """max_run_duration = "none": make synth prints the monthly cost of forgetting."""
    summary = summary_lines(parse_config({"provisioning": "spot", "max_run_duration": "none"}))
    (billing,) = [line for line in summary if line.startswith("billing stops")]
    assert "NOTHING stops spot but make destroy" in billing
    assert "$422/month" in billing


def test_spot_by_default_ends_at_its_deadline() -> None:
    summary = summary_lines(parse_config({"provisioning": "spot"}))
    (billing,) = [line for line in summary if line.startswith("billing stops")]
    assert "at the deadline, deploy time + 8 h" in billing
    assert "$4.62 per run" in billing  # 8 h x $0.5779
    assert "make extend BY=2h" in billing


def test_make_synth_refuses_a_guard_rail_without_traceback(tmp_path: Path) -> None:
    result, outdir = run_main(tmp_path, "[vllm]\ngpu_memory_utilization = 0.95\n")
    assert result.returncode == 2
    assert "vllm.gpu_memory_utilization" in result.stderr and "0.92" in result.stderr
    assert "Traceback" not in result.stderr
    assert not outdir.exists()


# ---- policy applies to what is about to be created, never to looking or stopping -------------

REFUSED_TOML = 'project = "policy-proj-1"\n[vllm]\ngpu_memory_utilization = 0.95\n'


def _cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    import os

    config = tmp_path / "deploy.toml"
    config.write_text(REFUSED_TOML)
    return cli_fork.run(
        [*args],
        env={**os.environ, "DEPLOY_CONFIG": str(config), **(env or {})},
        timeout=60,
    )


def test_a_refused_config_can_still_list_its_stacks_for_destroy(tmp_path: Path) -> None:
    result = _cli(tmp_path, "stacks", "--node")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["gemma4-v5e-node"]


def test_a_refused_config_passes_the_destroy_check_but_not_the_deploy_check(
    tmp_path: Path,
) -> None:
    assert _cli(tmp_path, "check", "--destroy").returncode == 0
    deploy = _cli(tmp_path, "check", "--deploy")
    assert deploy.returncode == 2
    assert "vllm.gpu_memory_utilization" in deploy.stderr


def test_status_of_a_refused_config_still_answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fake_tpu_api import FakeTpuApi
    from tpudeploy.cli import main

    config = tmp_path / "deploy.toml"
    config.write_text(REFUSED_TOML)
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    with FakeTpuApi() as api:
        monkeypatch.setenv("TPU_EMULATOR_HOST", api.host)
        assert main(["status"]) == 0
    assert "NOT_FOUND" in capsys.readouterr().out


def test_cdktf_destroy_can_synthesize_a_refused_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    synth: Synthesizer,
) -> None:
    """`cdktf destroy` runs main.py first; with TPUDEPLOY_COMMAND=destroy (set by the Makefile)
    a config the guard rails refuse still synthesizes, so its node can be destroyed. main.main()
    runs in this process, on the session's jsii load: the command, not the process, decides."""
    import main

    synth({})  # the jsii assembly is loaded once per session
    config = tmp_path / "deploy.toml"
    config.write_text(REFUSED_TOML)
    outdir = tmp_path / "out"
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.setenv("CDKTF_OUTDIR", str(outdir))
    monkeypatch.setenv("TPUDEPLOY_COMMAND", "destroy")
    assert main.main() == 0, capsys.readouterr().err
    assert (outdir / "stacks" / "gemma4-v5e-node" / "cdk.tf.json").is_file()
    # The wait for the bindings is announced before it starts (a first synth is never silent).
    assert capsys.readouterr().out.startswith(
        f"synthesizing deployment 'gemma4-v5e' from {config} into {outdir}: loading cdktf"
    )
    # Without the destroy switch, the same config is refused before anything is written.
    monkeypatch.delenv("TPUDEPLOY_COMMAND")
    monkeypatch.setenv("CDKTF_OUTDIR", str(tmp_path / "refused"))
    capsys.readouterr()
    assert main.main() == 2
    assert "vllm.gpu_memory_utilization" in capsys.readouterr().err
    assert not (tmp_path / "refused").exists()


def test_every_guard_rail_names_a_key_the_config_has() -> None:
    """A refusal under a key that does not exist (it once said tpu.accelerator_type) sends the
    user looking for a setting they cannot find."""
    from tpudeploy.config import DeployConfig

    def exists(path: str) -> bool:
        model: Any = DeployConfig
        for part in path.split("."):
            fields = getattr(model, "model_fields", {})
            if part not in fields:
                return False
            model = fields[part].annotation
        return True

    configs: list[dict[str, Any]] = [o for o, _, _ in REFUSED + WARNED]
    for overrides in configs:
        for finding in guard_rails(parse_config(overrides)):
            assert exists(finding.key), f"{finding.key} is not a config key ({overrides})"


def test_an_unknown_chip_is_refused_once_with_the_fix() -> None:
    """One message for a chip without data, not three that contradict each other."""
    with pytest.raises(ConfigError) as err:
        parse_config({"accelerator_type": "v6e-1", "runtime_version": "v2-alpha-tpuv6e"})
    (problem,) = err.value.problems
    assert problem.startswith("accelerator_type = 'v6e-1': unknown TPU generation 'v6e'")
    assert problem.endswith("Fix: use 'v5litepod-1'")


@pytest.mark.parametrize(
    ("key", "value"),
    # max_run_duration is not here: it ends spot and on-demand too (their deadline job).
    [("flex_start_timeout", "2h"), ("allow_untested_flex_zone", True)],
)
@pytest.mark.parametrize("provisioning", ["spot", "on-demand"])
def test_a_key_without_effect_for_the_provisioning_model_is_warned(
    key: str, value: object, provisioning: str
) -> None:
    cfg = parse_config({"provisioning": provisioning, key: value})
    (warning,) = policy.warnings(guard_rails(cfg))
    assert warning.startswith(f"warning: {key} = ")
    assert f"has no effect with provisioning = '{provisioning}'" in warning
    assert 'provisioning = "flex-start"' in warning
    # Under flex-start the same key does what it says: nothing to warn about.
    assert policy.warnings(guard_rails(parse_config({key: value}))) == []


def test_make_check_prints_the_synth_summary_and_its_warnings(tmp_path: Path) -> None:
    """`make check` said "valid" and nothing else while `make cost` warned that 64 clients x
    8,192 tokens overflow the KV pool: it now ends as `make synth` does, without cdktf."""
    config = tmp_path / "deploy.toml"
    config.write_text("[load]\nexpected_clients = 64\nexpected_context = 8192\n")
    result = cli_fork.run(
        ["check"],
        env={**os.environ, "DEPLOY_CONFIG": str(config)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    cfg = parse_config({"load": {"expected_clients": 64, "expected_context": 8192}})
    expected = summary_lines(cfg, today=datetime.date.today())
    assert any(line.startswith("warning: load.expected_clients") for line in expected)
    assert result.stdout.splitlines()[-len(expected) :] == expected
