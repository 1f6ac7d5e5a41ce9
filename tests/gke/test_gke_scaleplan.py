"""`make plan-scale` against the build log's tables: the KV wall, the TTFT medians, $/M tokens."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from tpudeploy import cli, platform
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import replicaplan, scaleplan

ROOT = Path(__file__).resolve().parents[2]
GKE_TOML = ROOT / "deployments" / "gke.toml"


def _cfg(**load: object) -> DeployConfig:
    return parse_config({"platform": "gke", "load": load})


def _plan(clients: int, context: int, ttft_ms: int | None = None) -> scaleplan.ScalePlan:
    return scaleplan.scale_plan(_cfg(), clients=clients, context=context, ttft_ms=ttft_ms)


def test_64_clients_at_8k_need_two_replicas_or_more_by_the_kv_wall() -> None:
    """Build log: 64 x 8,192 = 524,288 KV tokens wanted against 321,344 resident."""
    # the build log's measured-good --kv-cache-memory-bytes gives its exact 5,021 x 64 pool
    seed = parse_config({"platform": "gke", "vllm": {"kv_cache_memory_bytes": 5_923_602_432}})
    exact = scaleplan.scale_plan(seed, clients=64, context=8192, ttft_ms=None)
    assert exact.base.pool.tokens == 321_344
    assert exact.replicas == 3
    p = _plan(64, 8192)  # the estimated pool (within a few blocks of it) says the same
    assert p.replicas_by_kv_wall >= 2
    # 250,000 // 8,192 = 30 streams per replica under the rule of thumb: 64 need three
    assert (p.base.safe_clients_per_replica, p.replicas) == (30, 3)
    assert p.load_per_replica == 22


@pytest.mark.parametrize(
    ("clients", "context", "spot_per_million"),
    # The build log's $/M output tokens table, spot column (its cost section).
    [(64, 128, 0.107), (64, 1024, 0.128), (16, 1024, 0.162), (16, 8192, 0.402), (1, 128, 1.298)],
)
def test_the_measured_cost_rows_reproduce_on_one_replica(
    clients: int, context: int, spot_per_million: float
) -> None:
    p = _plan(clients, context)
    assert p.replicas == 1
    assert p.cell == (context, clients)
    report = "\n".join(scaleplan.report(_cfg(), p))
    assert f"the chips alone ${spot_per_million:.3f}/M" in report
    # the idle floor (cluster fee, system node, NAT, load balancer) only adds to it
    per_million = p.per_million()
    assert per_million is not None and per_million > spot_per_million


def test_the_measured_ttft_points_reproduce() -> None:
    """Build log: median TTFT 98.8 ms at 16 clients and 247.3 ms at 64, 128 tokens of context;
    11,734 ms at 64 x 8K."""
    assert scaleplan.median_ttft_ms(128, 16) == pytest.approx(98.8)
    assert scaleplan.median_ttft_ms(128, 64) == pytest.approx(247.3)
    assert scaleplan.median_ttft_ms(8192, 64) == pytest.approx(11_734)
    # between cells: linear; past 64 clients nothing was measured
    assert 98.8 < (scaleplan.median_ttft_ms(128, 40) or 0) < 247.3
    assert scaleplan.median_ttft_ms(128, 65) is None
    # a context between rows reads the longer row (TTFT grows with context)
    assert scaleplan.median_ttft_ms(2000, 1) == pytest.approx(289.4)


def test_a_ttft_target_adds_replicas_where_the_kv_wall_does_not() -> None:
    # 64 short-context clients fit one replica's KV pool many times over ...
    assert _plan(64, 128).replicas == 1
    # ... and one replica meets a 248 ms median (247.3 measured at 64) ...
    assert _plan(64, 128, ttft_ms=248).replicas == 1
    # ... but not 99 ms: 98.8 was measured at 16 clients, so 64 need four replicas
    tight = _plan(64, 128, ttft_ms=99)
    assert tight.ttft_clients_per_replica == 16
    assert tight.replicas == 4
    assert any("untrustworthy" in note for note in tight.notes)  # the log's starred cell
    # the replicas' price follows: four chips and the floor
    assert tight.hourly() == tight.base.hourly(4)


def test_targets_come_from_the_plan_not_from_typed_numbers() -> None:
    kv_wall = _plan(64, 8192)
    # without a TTFT target: issue 25's HPA rule, the same number the HPA gets today
    cfg = _cfg(expected_clients=64, expected_context=8192)
    assert (
        kv_wall.targets.waiting_per_replica
        == replicaplan.replica_plan(cfg).autoscaling.waiting_target
    )
    assert kv_wall.targets.waiting_per_replica == math.ceil(30 * 0.25)
    assert kv_wall.targets.running_per_replica == 30
    # KV use at the wall: 250,000 of 321,344 tokens, rounded down
    assert kv_wall.targets.kv_cache_usage == 0.77
    # a TTFT target: the running streams drop to what meets it, and any queue is a miss
    tight = _plan(64, 128, ttft_ms=99)
    assert (tight.targets.running_per_replica, tight.targets.waiting_per_replica) == (16, 1)
    # a longer context lowers the streams the KV wall allows, and the queue target with them
    assert _plan(64, 1024).targets.running_per_replica > kv_wall.targets.running_per_replica
    assert _plan(64, 1024).targets.waiting_per_replica > kv_wall.targets.waiting_per_replica


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--clients", "abc", "--context", "1024"], ["CLIENTS='abc'", "whole number", "CLIENTS="]),
        (["--clients", "0", "--context", "1024"], ["CLIENTS='0'", "at least 1"]),
        (["--clients", "4", "--context", "-5"], ["CONTEXT='-5'", "at least 1"]),
        (["--clients", "4", "--context", "99999"], ["CONTEXT=99999", "max_model_len", "lower"]),
        (
            ["--clients", "4", "--context", "128", "--ttft-ms", "10"],
            ["TTFT_MS=10", "15.9 ms", "raise TTFT_MS to 16"],
        ),
        (["--clients", "4", "--context", "128", "--ttft-ms", "1.5"], ["TTFT_MS='1.5'"]),
    ],
)
def test_bad_input_is_refused_with_key_value_reason_and_fix(
    args: list[str],
    words: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEPLOY_CONFIG", str(GKE_TOML))
    assert cli.main(["plan-scale", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    for word in words:
        assert word in err


def test_unset_load_names_both_ways_to_give_it() -> None:
    with pytest.raises(scaleplan.ScalePlanError) as raised:
        scaleplan.resolve_inputs(_cfg(), clients=None, context="1024", ttft_ms=None)
    assert "CLIENTS is unset" in str(raised.value)
    assert "[load] expected_clients" in str(raised.value)


def test_the_synth_summary_states_the_plan_for_the_configured_load() -> None:
    cfg = _cfg(expected_clients=64, expected_context=8192, target_ttft_ms=700)
    lines = "\n".join(platform.summary_lines(cfg))
    assert "scale plan: 64 client(s) at 8,192 tokens of context, median TTFT <= 700 ms" in lines
    # 594.4 ms at 16 clients, 11,734 at 64: 700 ms allows 16 streams, so 64 clients need 4
    assert "replicas: 4 (KV wall 3 at 30 per replica, TTFT 4 at 16 per replica)" in lines
    assert "vllm:num_requests_running 16" in lines
    assert "scale plan" not in "\n".join(platform.summary_lines(_cfg()))  # no [load], no plan


def test_make_plan_scale_passes_the_variables_through() -> None:
    result = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "-o", "node_modules/.installed", "plan-scale",
         "CLIENTS=64", "CONTEXT=8192", "TTFT_MS=700", f"DEPLOY_CONFIG={GKE_TOML}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "median TTFT <= 700 ms" in result.stdout
    assert "replicas: 4" in result.stdout


def test_the_hpa_is_given_the_planners_queue_target() -> None:
    from tpudeploy.gke import pod

    kv_wall = _cfg(expected_clients=64, expected_context=8192)
    assert (
        pod.hpa_waiting_target(kv_wall)
        == replicaplan.replica_plan(kv_wall).autoscaling.waiting_target
    )
    tight = _cfg(expected_clients=64, expected_context=128, target_ttft_ms=99)
    assert pod.hpa_waiting_target(tight) == 1


def test_an_unreachable_ttft_in_load_is_refused_before_synth() -> None:
    from tpudeploy import policy
    from tpudeploy.config import ConfigError
    from tpudeploy.platform import guard_rails

    cfg = _cfg(expected_clients=4, expected_context=8192, target_ttft_ms=200)
    with pytest.raises(ConfigError) as raised:
        policy.enforce(cfg, guard_rails(cfg), source="gke.toml")
    assert "load.target_ttft_ms = 200" in str(raised.value)
    assert "289.4 ms" in str(raised.value) and "raise it to 290" in str(raised.value)
    assert scaleplan.findings(_cfg(expected_context=8192, target_ttft_ms=290)) == []


def test_a_kv_wall_past_the_measured_clients_says_so() -> None:
    p = _plan(64, 1024)  # 244 streams fit the pool; the sweep stopped at 64
    assert any("not known here" in note for note in p.notes)
    assert not _plan(64, 8192).notes


def test_make_plan_scale_never_shell_parses_a_value() -> None:
    result = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "-o", "node_modules/.installed", "plan-scale",
         "CLIENTS=6'4;echo", "CONTEXT=1024", f"DEPLOY_CONFIG={GKE_TOML}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert 'error: CLIENTS="6\'4;echo": not a whole number of clients' in result.stderr
