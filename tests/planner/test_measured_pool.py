"""A build that windows its sliding layers holds more KV than the build log's one-group pool:
with its measured pool in the config, the KV wall and every guard rail on it follow the
measurement and say so (issue 40)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests import boot_logs
from tools.tune_example import Effect, write
from tpudeploy import bootcheck, facts, planner
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.nodebuild import boot_expectations
from tpudeploy.platform import guard_rails
from tpudeploy.render import vllm_serve_args
from tpudeploy.tune.arms import BASELINE
from tpudeploy.tune.ranking import write_report

# What a windowed build's boot log would say: two KV cache groups, 14,000 blocks of 64 tokens.
WINDOWED_LOG = boot_logs.vllm_log(groups=2, blocks=14_000)
MEASURED = bootcheck.parse_log(WINDOWED_LOG)
SOURCE = "tune-results/x/windowed/round-1.boot.json"


def windowed(load: dict[str, Any] | None = None) -> dict[str, Any]:
    table = {
        "tokens": MEASURED["kv_tokens"],
        "kv_cache_groups": MEASURED["kv_cache_groups"],
        "source": SOURCE,
    }
    return {"vllm": {"measured_kv_pool": table}, **({"load": load} if load else {})}


def test_the_load_guard_follows_the_measured_pool_and_says_so() -> None:
    load = {"expected_clients": 64, "expected_context": 8192}  # 524,288 tokens
    # The build log's pool: past the wall (the build log's own 64 x 8,192 fell from 400 tok/s).
    (found,) = [f for f in guard_rails(parse_config({"load": load})) if "load." in f.key]
    assert found.severity == "warning"
    # The windowed build's 896,000 tokens: under its safe line, no finding at all.
    assert MEASURED["kv_tokens"] == 14_000 * 64
    assert [f for f in guard_rails(parse_config(windowed(load))) if "load." in f.key] == []
    # Past the measured wall: the finding names the measured pool and where it was read.
    heavy = {"expected_clients": 128, "expected_context": 8192}  # 1,048,576 tokens
    (past,) = [f for f in guard_rails(parse_config(windowed(heavy))) if "load." in f.key]
    assert f"against a {MEASURED['kv_tokens']:,}-token pool" in past.message
    assert (
        SOURCE in past.message and f"not the build log's {facts.KV_POOL_TOKENS:,}" in past.message
    )


def test_the_plan_and_the_boot_check_use_the_measured_pool() -> None:
    cfg = parse_config(windowed())
    pool = planner.kv_pool(measured=cfg.vllm.measured_pool)
    assert pool.tokens == MEASURED["kv_tokens"] and SOURCE in pool.measured_note
    expected = boot_expectations(cfg, vllm_serve_args(cfg.vllm))
    # Every later boot of this build is checked against what it measured, not the arithmetic.
    assert expected["kv_tokens"] == MEASURED["kv_tokens"]
    report = bootcheck.report(WINDOWED_LOG, expected, {"vllm_s": 857, "cache": "miss"})
    found = report["findings"]
    assert isinstance(found, list)
    kv = [f for f in found if f["check"] == "kv-pool"]
    assert kv and kv[0]["level"] == "ok", kv


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        (
            {"tokens": 321_344, "kv_cache_groups": 1, "source": "a"},
            "kv_cache_groups = 1: sliding windows off",
        ),
        ({"tokens": 900_000, "kv_cache_groups": 2}, "missing 'source'"),
        ({"tokens": 0, "kv_cache_groups": 2, "source": "a"}, "tokens = 0 must be"),
        ({"tokens": 900_000, "kv_cache_groups": 0, "source": "a"}, "kv_cache_groups = 0 must"),
        (
            {"tokens": 900_000, "kv_cache_groups": 2, "source": "a", "image": "x"},
            "takes exactly tokens, kv_cache_groups, source (unknown 'image')",
        ),
        (
            {"tokens": 900_000, "kv_cache_groups": 2, "source": " "},
            ": source must say which boot measured it (a boot record's path). Fix:",
        ),
        # A number written as a string (TOML "900000") is not a count.
        (
            {"tokens": "900000", "kv_cache_groups": 2, "source": "a"},
            "tokens = '900000' must be a whole number",
        ),
        ({"tokens": 900_000, "kv_cache_groups": 2, "source": 3}, "source must say which boot"),
    ],
)
def test_a_measurement_that_is_not_one_is_refused_naming_the_key(
    table: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"vllm": {"measured_kv_pool": table}})
    text = str(info.value)
    assert "vllm.measured_kv_pool" in text and needle in text and "Fix:" in text


def test_a_measured_pool_is_kept_and_said_as_written() -> None:
    cfg = parse_config(windowed())
    assert cfg.vllm.measured_pool == (
        MEASURED["kv_tokens"],
        f"2 KV cache groups, sliding windows on: {SOURCE}",
    )
    assert parse_config({}).vllm.measured_pool is None


def test_the_tune_report_prints_the_line_that_plans_with_a_windowed_build(tmp_path: Path) -> None:
    boot = (facts.COLD_BOOT_S, facts.COMPILE_S)
    effects = {
        BASELINE: Effect(1.0, 0.01, boot=boot),
        "win": Effect(1.0, 0.01, boot=boot, kv_cache_groups=2),
    }
    write(tmp_path, effects)
    text = write_report(tmp_path, baseline=BASELINE, price_per_hour=None, plots=False).read_text()
    assert "| win | 3 |" in text and "2 (sliding windows ON)" in text
    line = next(x for x in text.splitlines() if x.startswith("- **win** (round 1) windows"))
    assert 'source = "win/round-1.boot.json"' in line and "kv_cache_groups = 2" in line
    # The printed table is one the config accepts.
    table = line.split("measured_kv_pool = ", 1)[1].strip("` ")
    parsed = tomllib.loads(f"measured_kv_pool = {table}")["measured_kv_pool"]
    assert parse_config({"vllm": {"measured_kv_pool": parsed}}).vllm.measured_pool is not None


@pytest.mark.parametrize(
    "vllm",
    [
        {"gpu_memory_utilization": 0.6},  # the arithmetic's pool: 27,904 tokens
        {"kv_cache_memory_bytes": 100_000_000},  # a pinned pool: 5,376 tokens
    ],
)
def test_the_one_request_guard_follows_the_measured_pool(vllm: dict[str, Any]) -> None:
    """A pool the arithmetic sizes under max_model_len refuses the config; the build's measured
    pool (896,000 tokens) holds one request, so the same settings pass with it."""

    def fit(data: dict[str, Any]) -> list[str]:
        return [f.message for f in guard_rails(parse_config(data)) if f.key == "vllm.max_model_len"]

    (refused,) = fit({"vllm": vllm})
    assert "one request does not fit" in refused and "measured" not in refused
    measured = windowed()
    measured["vllm"].update(vllm)
    assert fit(measured) == []
