"""The node's boot check (tpudeploy/bootcheck.py) on the build log's own boot and on boots that
differ from it: each gap names the right warning; the open wins are reported with figures."""

from __future__ import annotations

import pytest

from tests import boot_logs
from tpudeploy import bootcheck, facts, planner
from tpudeploy.config import DeployConfig
from tpudeploy.nodebuild import boot_expectations
from tpudeploy.render import vllm_serve_args

COLD = {"pull_s": 41, "restore_s": 0, "vllm_s": boot_logs.COLD_BOOT_S, "cache": "miss"}


@pytest.fixture(scope="module")
def expected() -> dict[str, object]:
    cfg = DeployConfig()
    return boot_expectations(cfg, vllm_serve_args(cfg.vllm))


def by_check(findings: list[dict[str, str]], check: str) -> list[dict[str, str]]:
    return [f for f in findings if f["check"] == check]


def levels(findings: list[dict[str, str]]) -> dict[str, str]:
    return {f["check"]: f["level"] for f in findings if f["level"] in ("warning", "win")}


def test_the_build_logs_boot_parses_to_its_numbers() -> None:
    m = bootcheck.parse_log(boot_logs.vllm_log())
    assert m["hbm_limit_gib"] == 15.75 and m["hbm_limit_cap_gib"] == 14.49
    assert m["hbm_used_gib"] == 8.97 and m["hbm_avail_gib"] == 5.52
    assert (m["num_blocks"], m["block_size"], m["kv_tokens"]) == (5021, 64, facts.KV_POOL_TOKENS)
    assert m["kv_cache_groups"] == 1 and m["kv_dtype"] == "bfloat16"
    assert m["vllm_version"] == boot_logs.VERSION
    # 857 s cold of which 685 s compile: the rest is download and load before the memory line.
    assert m["compile_s"] == facts.COMPILE_S
    assert m["load_s"] == facts.COLD_BOOT_S - facts.COMPILE_S
    assert "dtype" not in m["non_default_args"]  # type: ignore[operator]
    assert "limit_mm_per_prompt" in m["non_default_args"]  # type: ignore[operator]
    # Keys of nested dicts are not arguments.
    assert "image" not in m["non_default_args"]  # type: ignore[operator]


def test_the_wrapped_memory_line_of_the_build_log_parses_too() -> None:
    # The build log prints the line wrapped over two lines for the page.
    text = (
        "Memory statistics | total_hbm_limit_gb=15.75GiB | total_hbm_limit_cap_gb=14.49GiB\n"
        "                  | total_hbm_used_gb=8.97GiB   | total_hbm_avail_gb=5.52GiB\n"
    )
    m = bootcheck.parse_log(text)
    assert (m["hbm_limit_cap_gib"], m["hbm_used_gib"], m["hbm_avail_gib"]) == (14.49, 8.97, 5.52)
    # Later tpu-inference logs a KV-connector reserve between used and avail.
    later = text.replace(
        "| total_hbm_avail", "| kv_connector_hbm_reserve_gb=0.0GiB | total_hbm_avail"
    )
    assert bootcheck.parse_log(later)["hbm_avail_gib"] == 5.52


def test_the_build_logs_boot_matches_the_planner(expected: dict[str, object]) -> None:
    result = bootcheck.report(boot_logs.vllm_log(), expected, COLD)
    assert levels(result["findings"]) == {}, result["findings"]  # type: ignore[arg-type]
    assert result["verdict"] == "matches the planner and the build log"
    kv = by_check(result["findings"], "kv-pool")[0]  # type: ignore[arg-type]
    pool = planner.kv_pool()
    # The planner's own figure against the measured one (build log: 321,536 vs 321,344).
    assert f"planner {pool.tokens:,}" in kv["text"] and f"{facts.KV_POOL_TOKENS:,}" in kv["text"]
    assert "-0.06%" in kv["text"]
    flags = by_check(result["findings"], "flags")  # type: ignore[arg-type]
    confirmed = [f for f in flags if f["level"] == "ok"]
    assert confirmed and "--gpu-memory-utilization" in confirmed[0]["text"]
    # --port 8000 and --tensor-parallel-size 1 restate vLLM's defaults: a note, not a warning.
    assert any("--port" in f["text"] and f["level"] == "note" for f in flags)


def test_a_different_block_count_warns_with_the_gap(expected: dict[str, object]) -> None:
    result = bootcheck.report(boot_logs.vllm_log(blocks=4500), expected, COLD)
    assert levels(result["findings"]) == {"kv-pool": "warning"}  # type: ignore[arg-type]
    kv = by_check(result["findings"], "kv-pool")[0]  # type: ignore[arg-type]
    assert "4,500 blocks x 64 = 288,000 tokens" in kv["text"]
    assert "safe concurrency" in kv["meaning"] and "fp8" in kv["meaning"]


def test_a_second_kv_cache_group_is_the_open_win_with_the_planners_figures(
    expected: dict[str, object],
) -> None:
    result = bootcheck.report(boot_logs.vllm_log(groups=2), expected, COLD)
    assert levels(result["findings"]) == {"kv-groups": "win"}  # type: ignore[arg-type]
    win = by_check(result["findings"], "kv-groups")[0]  # type: ignore[arg-type]
    assert "num_kv_cache_groups=2: sliding windows reached" in win["text"]
    ratio = planner.sliding_window_ratio(facts.SLIDING_WINDOW_WIN_CONTEXT)
    assert round(ratio, 1) == facts.SLIDING_WINDOW_WIN_RATIO  # the build log's 2.8x
    assert f"{ratio:.2f}x" in win["meaning"] and "16,384-token" in win["meaning"]
    assert "19 -> 55" in win["meaning"]  # 321,536 // 16,384 now; windowed from the pool bytes


def test_int8_sized_weights_are_the_other_open_win(expected: dict[str, object]) -> None:
    log = boot_logs.vllm_log(used_gib=4.49, avail_gib=10.0, blocks=9092)
    result = bootcheck.report(log, expected, COLD)
    found = levels(result["findings"])  # type: ignore[arg-type]
    assert found["weights"] == "win"
    win = by_check(result["findings"], "weights")[0]  # type: ignore[arg-type]
    assert "int8" in win["text"] and "KV tokens" in win["meaning"]


def test_a_slow_boot_warns_and_says_what_it_costs(expected: dict[str, object]) -> None:
    slow = {**COLD, "vllm_s": 1200}
    result = bootcheck.report(boot_logs.vllm_log(boot_s=1200, compile_s=1028), expected, slow)
    assert levels(result["findings"]) == {"boot": "warning"}  # type: ignore[arg-type]
    boot = by_check(result["findings"], "boot")[0]  # type: ignore[arg-type]
    assert "cold boot 1200 s to ready, build log 857 s" in boot["text"]
    assert "compile 1028 s" in boot["text"] and "preemption" in boot["meaning"]
    # Within a quarter of the reference is no warning; a warm boot is held to 497 s.
    ok = bootcheck.report(boot_logs.vllm_log(), expected, {**COLD, "vllm_s": 1000})
    assert "boot" not in levels(ok["findings"])  # type: ignore[arg-type]
    warm = {**COLD, "vllm_s": 700, "cache": "hit"}
    assert levels(bootcheck.report(boot_logs.vllm_log(), expected, warm)["findings"]) == {  # type: ignore[arg-type]
        "boot": "warning"
    }


def test_a_restated_default_that_shows_up_as_non_default_warns(
    expected: dict[str, object],
) -> None:
    args = boot_logs.NON_DEFAULT_ARGS.replace("{", "{'kv_cache_dtype': 'auto', ", 1)
    result = bootcheck.report(boot_logs.vllm_log(non_default_args=args), expected, COLD)
    assert levels(result["findings"]) == {"flags": "warning"}  # type: ignore[arg-type]
    assert "--kv-cache-dtype" in by_check(result["findings"], "flags")[0]["text"]  # type: ignore[arg-type]


def test_an_fp8_allocation_when_bf16_was_asked_warns(expected: dict[str, object]) -> None:
    result = bootcheck.report(boot_logs.vllm_log(kv_dtype="float8_e4m3fn"), expected, COLD)
    assert levels(result["findings"]) == {"kv-dtype": "warning"}  # type: ignore[arg-type]


def test_a_log_without_the_lines_is_unverified_not_fine(expected: dict[str, object]) -> None:
    result = bootcheck.report("INFO:     Application startup complete.\n", expected, COLD)
    found = levels(result["findings"])  # type: ignore[arg-type]
    assert found == {"memory": "warning", "kv-pool": "warning"}
    assert result["verdict"] != "matches the planner and the build log"


def test_top_level_keys_skips_nested_and_quoted_colons() -> None:
    text = "{'a': {'b': 1}, 'c': 'x: y', \"d\": [1, {'e': 2}], 'f': Enum.X}"
    assert bootcheck.top_level_keys(text) == ["a", "c", "d", "f"]


def test_build_keeps_repo_digests_only() -> None:
    digest = "vllm/vllm-tpu@sha256:" + "a" * 64
    built = bootcheck.build(
        boot_logs.vllm_log(),
        "vllm/vllm-tpu:nightly",
        digest,
        "",
        "nginx:1.30.5",
        "sha256:" + "b" * 64,
        "nginx version: nginx/1.30.5",
    )
    assert built["vllm"] == {  # the version from the log when the image could not be asked
        "image": "vllm/vllm-tpu:nightly",
        "digest": digest,
        "versions": {"vllm": boot_logs.VERSION},
    }
    # A bare sha256 is the config-blob ID `docker images` prints: never published as a digest.
    assert built["proxy"] == {
        "image": "nginx:1.30.5",
        "digest": "",
        "versions": {"nginx": "1.30.5"},
    }


def test_the_boot_check_parses_as_python_3_8_and_imports_the_standard_library_only() -> None:
    """It runs under the TPU VM image's python3 and the serving image's (tpudeploy/cacheguard.py
    keeps the same rule)."""
    import ast

    from tpudeploy.render import boot_check_source

    tree = ast.parse(boot_check_source(), feature_version=(3, 8))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "datetime", "importlib", "json", "re", "sys"}


def test_the_rendered_metadata_fits_compute_engines_limits() -> None:
    """Compute Engine: a metadata value is at most 262,144 bytes (256 KiB) and all keys and
    values under 512 KB (cloud.google.com/compute/docs/reference/rest/v1/Metadata, items[]);
    the boot check rides inside the startup script."""
    from tpudeploy.render import node_metadata

    md = node_metadata(DeployConfig())
    sizes = {key: len(value.encode()) for key, value in md.items()}
    assert max(sizes.values()) <= 262_144, sizes
    assert sum(len(k.encode()) for k in md) + sum(sizes.values()) < 512 * 1000


def test_the_weights_dtype_is_read_from_the_engines_config_line() -> None:
    """vLLM logs its whole config once ("Initializing a V1 LLM engine (v...) with config: ...
    dtype=torch.bfloat16, ... quantization=None, ..."): the weights as the engine resolved
    them, whatever the flags asked."""
    m = bootcheck.parse_log(boot_logs.vllm_log())
    assert m["weights_dtype"] == "bfloat16" and "quantization" not in m
    fp8 = bootcheck.parse_log(boot_logs.vllm_log(weights_dtype="bfloat16", quantization="fp8"))
    assert fp8["quantization"] == "fp8"
    # The speculative config printed before dtype= does not confuse it (its own fields differ).
    spec = (
        "SpeculativeConfig(method='mtp', model='google/gemma-4-E2B-it-assistant', "
        "num_spec_tokens=4)"
    )
    assert bootcheck.parse_log(boot_logs.vllm_log(speculative_config=spec))["weights_dtype"] == (
        "bfloat16"
    )
    # kv_cache_dtype= later on the line is not the weights' dtype.
    assert bootcheck.parse_log(boot_logs.vllm_log(weights_dtype="float32"))["weights_dtype"] == (
        "float32"
    )


def test_the_kv_cache_groups_say_whether_sliding_windows_are_on() -> None:
    from tpudeploy.tune.bootverdict import Capabilities

    off = Capabilities.of(bootcheck.parse_log(boot_logs.vllm_log()))
    assert off.kv_cache_groups == 1 and off.sliding_windows is False
    assert off.kv_tokens == facts.KV_POOL_TOKENS and off.kv_dtype == "bfloat16"
    on = Capabilities.of(bootcheck.parse_log(boot_logs.vllm_log(groups=2, blocks=14_000)))
    assert on.sliding_windows is True and on.kv_tokens == 14_000 * 64
