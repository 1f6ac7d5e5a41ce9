"""Each guard rail fires on its bad value and stays quiet on the seed's configuration."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tpudeploy import facts
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.planner import guards
from tpudeploy.planner.capacity import kv_pool
from tpudeploy.planner.geometry import GIB
from tpudeploy.planner.guards import (
    VLLM_KV_CACHE_DTYPES,
    Finding,
    check_settings,
)

SEED = DeployConfig()
_TOP = ("accelerator_type",)
_LOAD = ("expected_clients", "expected_context")


def replace(cfg: DeployConfig, geometry: dict[str, Any] | None = None, **flat: Any) -> DeployConfig:
    """The config with keys changed by their flat names (`geometry` for [model_geometry]),
    WITHOUT validation: the guard rails must judge whatever a config could hold, including
    values the schema would refuse."""
    top = {k: flat.pop(k) for k in _TOP if k in flat}
    load = {k: flat.pop(k) for k in _LOAD if k in flat}
    return cfg.model_copy(
        update={
            "vllm": cfg.vllm.model_copy(update=flat),
            "load": cfg.load.model_copy(update=load),
            "model_geometry": cfg.model_geometry.model_copy(update=geometry or {}),
            **top,
        }
    )


def only(settings: DeployConfig, key: str) -> list[Finding]:
    return [f for f in check_settings(settings) if f.key == key]


def refused(settings: DeployConfig) -> list[Finding]:
    return [f for f in check_settings(settings) if f.severity == "error"]


def says(finding: Finding, severity: str, key: str, value: object) -> str:
    """The finding as the user reads it, checked to name its severity, key and value first."""
    assert (finding.severity, finding.key, finding.value) == (severity, key, value)
    text = str(finding)
    assert text.startswith(f"{severity}: {key} = {value!r}: ")
    if finding.override:
        assert text.endswith(f" (if you know better, set {finding.override} = true)")
    return text


def test_seed_config_is_quiet() -> None:
    assert check_settings(SEED) == []
    # The seed's intended load (16 clients at 8K) is inside the safe line too.
    assert check_settings(replace(SEED, expected_clients=16, expected_context=8192)) == []


def test_vllm_enum_has_the_seeds_16_values() -> None:
    assert len(VLLM_KV_CACHE_DTYPES) == 16


@pytest.mark.parametrize("value", [0.93, 0.94, 0.95])
def test_memory_utilization_above_092_refused(value: float) -> None:
    (finding,) = only(replace(SEED, gpu_memory_utilization=value), "vllm.gpu_memory_utilization")
    assert finding.severity == "error"
    assert "691 s" in finding.message and "0.92" in finding.message
    assert finding.override == "vllm.force_gpu_memory_utilization"
    forced = replace(SEED, gpu_memory_utilization=value, force_gpu_memory_utilization=True)
    assert [f.severity for f in check_settings(forced)] == ["warning"]


def test_memory_utilization_095_message_says_short() -> None:
    (finding,) = only(replace(SEED, gpu_memory_utilization=0.95), "vllm.gpu_memory_utilization")
    assert "37 MiB short" in finding.message


@pytest.mark.parametrize("value", [0.5, 0.0, 1.5])
def test_memory_utilization_too_low_or_nonsense_refused(value: float) -> None:
    (finding,) = only(replace(SEED, gpu_memory_utilization=value), "vllm.gpu_memory_utilization")
    assert finding.severity == "error"


@pytest.mark.parametrize("value", ["fp8", "fp8_e4m3", "fp8_e5m2"])
def test_fp8_kv_warned(value: str) -> None:
    (finding,) = only(replace(SEED, kv_cache_dtype=value), "vllm.kv_cache_dtype")
    assert finding.severity == "warning"
    assert "1.000x" in finding.message
    assert finding.override == "vllm.force_kv_cache_dtype"
    assert only(replace(SEED, kv_cache_dtype=value, force_kv_cache_dtype=True), "x") == []


def test_int8_kv_refused_as_not_in_enum() -> None:
    (finding,) = only(replace(SEED, kv_cache_dtype="int8"), "vllm.kv_cache_dtype")
    assert finding.severity == "error"
    assert "invalid choice: 'int8'" in finding.message


@pytest.mark.parametrize(
    "value",
    [
        "int8_per_token_head",
        "turboquant_k8v4",
        "turboquant_3bit_nc",
        "nvfp4",
        "fp8_inc",
        "fp8_ds_mla",
    ],
)
def test_boot_killing_kv_dtypes_refused(value: str) -> None:
    (finding,) = only(replace(SEED, kv_cache_dtype=value), "vllm.kv_cache_dtype")
    assert finding.severity == "error"
    assert "kills the server at boot" in finding.message
    assert finding.override is None


def test_untested_kv_dtype_warned() -> None:
    (finding,) = only(replace(SEED, kv_cache_dtype="int4_per_token_head"), "vllm.kv_cache_dtype")
    assert finding.severity == "warning"
    assert only(replace(SEED, kv_cache_dtype="bfloat16"), "vllm.kv_cache_dtype") == []


def test_tensor_parallel_over_chips_refused() -> None:
    (finding,) = only(replace(SEED, tensor_parallel_size=4), "vllm.tensor_parallel_size")
    assert finding.severity == "error"
    assert "1 chip" in finding.message


def test_tensor_parallel_with_one_kv_head_refused_even_with_chips() -> None:
    settings = replace(SEED, accelerator_type="v5litepod-4", tensor_parallel_size=4)
    (finding,) = only(settings, "vllm.tensor_parallel_size")
    assert finding.severity == "error"
    assert "4x the KV memory" in finding.message
    assert only(replace(settings, tensor_parallel_size=1), "vllm.tensor_parallel_size") == []


def test_batched_tokens_below_multimodal_floor_refused() -> None:
    (finding,) = only(replace(SEED, max_num_batched_tokens=2048), "vllm.max_num_batched_tokens")
    assert finding.severity == "error"
    assert "max_tokens_per_mm_item (2496) is larger than max_num_batched_tokens (2048)" in (
        finding.message
    )
    assert "4096" in finding.message


def test_floor_only_applies_with_chunking_disabled_and_modalities_on() -> None:
    chunked = replace(SEED, max_num_batched_tokens=2048, disable_chunked_mm_input=False)
    text_only = replace(SEED, max_num_batched_tokens=2048, limit_mm_per_prompt={"image": 0})
    assert refused(chunked) == []
    assert refused(text_only) == []


def test_non_power_of_two_batched_tokens_noted() -> None:
    (finding,) = only(replace(SEED, max_num_batched_tokens=2496), "vllm.max_num_batched_tokens")
    assert finding.severity == "note"
    assert "24.7%" in finding.message and "4096" in finding.message


def test_block_size_set_by_hand_warned() -> None:
    (finding,) = only(replace(SEED, block_size=32), "vllm.block_size")
    assert finding.severity == "warning"
    assert "pick 64" in finding.message


def test_load_past_the_pool_warned_and_past_safe_line_noted() -> None:
    (wall,) = only(
        replace(SEED, expected_clients=64, expected_context=8192), "load.expected_clients"
    )
    assert wall.severity == "warning"
    assert "524,288" in wall.message
    (line,) = only(
        replace(SEED, expected_clients=34, expected_context=8192), "load.expected_clients"
    )
    assert line.severity == "note"
    too_long = replace(SEED, expected_clients=1, expected_context=65_536)
    assert [f.severity for f in check_settings(too_long)] == ["error"]


def test_bad_accelerator_is_a_finding_not_a_crash() -> None:
    (finding,) = check_settings(replace(SEED, accelerator_type="v5e-1"))
    assert finding.key == "accelerator_type"
    assert "v5litepod-1" in finding.message


def test_findings_sorted_errors_first_and_printable() -> None:
    bad = replace(SEED, kv_cache_dtype="fp8", gpu_memory_utilization=0.95, block_size=64)
    findings = check_settings(bad)
    assert [f.severity for f in findings] == ["error", "warning", "warning"]
    assert str(findings[0]).startswith("error: vllm.gpu_memory_utilization = 0.95: ")
    assert "set vllm.force_gpu_memory_utilization = true" in str(findings[0])


# ---- what each finding tells the user: key, value, the build log's reason, the fix -----------


@pytest.mark.parametrize("value", [0.0, -0.1, 1.5])
def test_memory_utilization_outside_a_fraction_names_the_fix(value: float) -> None:
    (finding,) = only(replace(SEED, gpu_memory_utilization=value), "vllm.gpu_memory_utilization")
    text = says(finding, "error", "vllm.gpu_memory_utilization", value)
    assert text.endswith(": must be a fraction in (0, 1]; use 0.92 (build log)")
    assert finding.override is None


@pytest.mark.parametrize(
    ("value", "estimate"),
    # compile_headroom_bytes' own figures for the seed's chip (the build log: ~291 and ~127 MB
    # at 0.93 and 0.94; 0.95 died 37 MiB short); 1.0 leaves nothing for compiled programs.
    [
        (0.93, "~286 MiB of margin"),
        (0.94, "~124 MiB of margin"),
        (0.95, "37 MiB short"),
        (1.0, "843 MiB short"),
    ],
)
def test_memory_utilization_above_the_ceiling_says_what_it_estimates(
    value: float, estimate: str
) -> None:
    (finding,) = only(replace(SEED, gpu_memory_utilization=value), "vllm.gpu_memory_utilization")
    text = says(finding, "error", "vllm.gpu_memory_utilization", value)
    assert f"above the 0.92 ceiling for {facts.MODEL} on v5e" in text
    assert f"this value is untested and estimates {estimate}. Use 0.92, or pin the pool" in text
    assert finding.override == "vllm.force_gpu_memory_utilization"


def test_memory_utilization_that_cannot_hold_the_weights_says_so() -> None:
    (finding,) = only(replace(SEED, gpu_memory_utilization=0.5), "vllm.gpu_memory_utilization")
    cap = facts.V5E.hbm_bytes * 0.5 / GIB
    says(finding, "error", "vllm.gpu_memory_utilization", 0.5)
    # The build log's 8.97 GiB resident weights do not fit under half of the 15.75 GiB chip.
    assert finding.message == (
        f"cap {cap:.2f} GiB does not hold the 8.97 GiB of weights; use 0.92 (the build log's)"
    )


def test_a_pool_smaller_than_one_request_is_refused_unless_the_pool_is_pinned() -> None:
    (finding,) = only(replace(SEED, gpu_memory_utilization=0.58), "vllm.max_model_len")
    pool = kv_pool(gpu_memory_utilization=0.58)
    text = says(finding, "error", "vllm.max_model_len", 32_768)
    assert (
        f"one request does not fit the {pool.tokens:,}-token KV pool "
        f"({pool.pool_bytes / GIB:.2f} GiB) that vllm.gpu_memory_utilization 0.58 leaves: vLLM "
        "refuses to start" in text
    )
    assert text.endswith("or raise vllm.gpu_memory_utilization to 0.92 (the build log's ceiling)")
    # --kv-cache-memory-bytes sizes the pool itself (seed: 5923602432 good): no fraction check.
    pinned = replace(SEED, gpu_memory_utilization=0.58, kv_cache_memory_bytes=5923602432)
    assert only(pinned, "vllm.max_model_len") == []


def test_the_pool_holds_whole_blocks_of_the_size_max_model_len_gives() -> None:
    """At 0.9 the pool holds 303,168 tokens in 64-token blocks but fewer in the 1024-token
    blocks a 300K context makes the backend use: the request that fills those passes, one more
    token is refused."""
    full = kv_pool(gpu_memory_utilization=0.9, max_model_len=300_000).tokens
    assert full < kv_pool(gpu_memory_utilization=0.9).tokens
    # A model whose own limit is past 300K, so only the pool can refuse.
    longer = {"max_position_embeddings": 1 << 20}
    fits = replace(SEED, longer, gpu_memory_utilization=0.9, max_model_len=full)
    assert only(fits, "vllm.max_model_len") == []
    over = replace(SEED, longer, gpu_memory_utilization=0.9, max_model_len=full + 1)
    (finding,) = only(over, "vllm.max_model_len")
    assert f"does not fit the {full:,}-token KV pool" in says(
        finding, "error", "vllm.max_model_len", full + 1
    )


def test_the_pool_is_sized_with_the_configured_models_geometry() -> None:
    """Four KV heads (4x Gemma 4 E2B's KV per token) do not fit a 128K request in the pool."""
    gemma = replace(SEED, max_model_len=131_072)
    assert only(gemma, "vllm.max_model_len") == []
    wider = replace(gemma, geometry={"num_key_value_heads": 4})
    (finding,) = only(wider, "vllm.max_model_len")
    pool = kv_pool(max_model_len=131_072, model=wider.model_geometry)
    assert f"one request does not fit the {pool.tokens:,}-token KV pool" in str(finding)


def test_kv_dtype_outside_vllms_enum_lists_what_it_takes() -> None:
    (finding,) = only(replace(SEED, kv_cache_dtype="int8"), "vllm.kv_cache_dtype")
    text = says(finding, "error", "vllm.kv_cache_dtype", "int8")
    assert "not in vLLM's --kv-cache-dtype enum (the CLI exits with \"invalid choice: 'int8'\"" in (
        text
    )
    assert text.endswith("Use 'auto' (bf16); known: " + ", ".join(sorted(VLLM_KV_CACHE_DTYPES)))


def test_kv_dtypes_by_what_the_seed_measured() -> None:
    (crash,) = only(replace(SEED, kv_cache_dtype="nvfp4"), "vllm.kv_cache_dtype")
    assert "kills the server at boot" in says(crash, "error", "vllm.kv_cache_dtype", "nvfp4")
    (padded,) = only(replace(SEED, kv_cache_dtype="fp8_e5m2"), "vllm.kv_cache_dtype")
    text = says(padded, "warning", "vllm.kv_cache_dtype", "fp8_e5m2")
    assert "1.000x KV capacity" in text and "5,021 blocks either way" in text
    assert "never run by the build log" not in text
    (untested,) = only(replace(SEED, kv_cache_dtype="float16"), "vllm.kv_cache_dtype")
    text = says(untested, "warning", "vllm.kv_cache_dtype", "float16")
    assert "never run by the build log" in text and "5,021 blocks" not in text
    assert untested.override == "vllm.force_kv_cache_dtype"


def test_tensor_parallel_below_one_names_the_fix() -> None:
    (finding,) = only(replace(SEED, tensor_parallel_size=0), "vllm.tensor_parallel_size")
    text = says(finding, "error", "vllm.tensor_parallel_size", 0)
    assert text.endswith(": must be at least 1; use 1 on one chip")


def test_tensor_parallel_over_the_slice_names_the_chips() -> None:
    (finding,) = only(replace(SEED, tensor_parallel_size=4), "vllm.tensor_parallel_size")
    text = says(finding, "error", "vllm.tensor_parallel_size", 4)
    assert text.endswith(
        ": v5litepod-1 has 1 chip(s); tensor parallelism cannot exceed it. Use 1 or a larger slice"
    )
    assert finding.override is None


def test_tensor_parallel_two_ways_doubles_one_kv_head() -> None:
    settings = replace(SEED, accelerator_type="v5litepod-4", tensor_parallel_size=2)
    (finding,) = only(settings, "vllm.tensor_parallel_size")
    text = says(finding, "error", "vllm.tensor_parallel_size", 2)
    assert "1 KV head(s), which cannot be sharded 2 ways" in text
    assert "pads them to 2" in text and "2x the KV memory per token" in text
    assert finding.override == "vllm.force_tensor_parallel_size"
    forced = replace(settings, force_tensor_parallel_size=True)
    (warned,) = only(forced, "vllm.tensor_parallel_size")
    assert says(warned, "warning", "vllm.tensor_parallel_size", 2) == text.replace(
        "error: ", "warning: ", 1
    )


def test_tensor_parallel_is_judged_on_the_configured_models_kv_heads() -> None:
    """The guard is about heads that cannot be split: four heads shard four ways; three pad."""
    four = replace(
        SEED,
        accelerator_type="v5litepod-4",
        tensor_parallel_size=4,
        geometry={"num_key_value_heads": 4},
    )
    assert only(four, "vllm.tensor_parallel_size") == []
    three = replace(four, geometry={"num_key_value_heads": 3})
    (finding,) = only(three, "vllm.tensor_parallel_size")
    text = says(finding, "error", "vllm.tensor_parallel_size", 4)
    assert "3 KV head(s), which cannot be sharded 4 ways" in text
    assert "pads them to 4" in text and f"{4 / 3:g}x the KV memory" in text


@pytest.mark.parametrize("value", [1, 2, 4096, 8192])
def test_power_of_two_batched_tokens_pass(value: int) -> None:
    text_only = replace(SEED, max_num_batched_tokens=value, disable_chunked_mm_input=False)
    assert only(text_only, "vllm.max_num_batched_tokens") == []


@pytest.mark.parametrize(("value", "bucket"), [(3000, 4096), (4095, 4096), (4097, 8192)])
def test_other_batched_tokens_name_the_bucket_that_runs(value: int, bucket: int) -> None:
    (finding,) = only(replace(SEED, max_num_batched_tokens=value), "vllm.max_num_batched_tokens")
    text = says(finding, "note", "vllm.max_num_batched_tokens", value)
    assert f"so {value} runs the {bucket} kernel while carrying {value} tokens" in text
    assert f"Use {bucket}, or set VLLM_TPU_BUCKET_PADDING_GAP=128" in text


def test_batched_tokens_under_the_floor_say_vllms_error() -> None:
    (finding,) = only(replace(SEED, max_num_batched_tokens=2048), "vllm.max_num_batched_tokens")
    text = says(finding, "error", "vllm.max_num_batched_tokens", 2048)
    assert ': vLLM refuses to start: "ValueError: Chunked MM input disabled' in text
    assert "limit_mm_per_prompt {'image': 4, 'audio': 1}" in text
    assert "Use 4096 (the compile bucket at the floor)" in text


def test_block_size_warning_names_its_value() -> None:
    (finding,) = only(replace(SEED, block_size=32), "vllm.block_size")
    text = says(finding, "warning", "vllm.block_size", 32)
    assert "keep 512 blocks per request (it would pick 64 at 32768)" in text


@pytest.mark.parametrize("load", [{"expected_clients": 64}, {"expected_context": 8192}])
def test_load_needs_both_clients_and_context(load: dict[str, Any]) -> None:
    assert check_settings(replace(SEED, **load)) == []


def test_load_context_up_to_max_model_len_is_accepted() -> None:
    assert check_settings(replace(SEED, expected_clients=1, expected_context=32_768)) == []
    (finding,) = only(
        replace(SEED, expected_clients=1, expected_context=32_769), "load.expected_context"
    )
    text = says(finding, "error", "load.expected_context", 32_769)
    assert ": longer than vllm.max_model_len (32768): vLLM rejects such requests" in text


@pytest.mark.parametrize(
    "settings",
    [
        {"kv_cache_memory_bytes": 2**30},
        {"gpu_memory_utilization": 0.85},
        # Whole 1024-token blocks at 300K hold fewer tokens than 64-token ones at 32K.
        {"gpu_memory_utilization": 0.9, "max_model_len": 300_000},
        {"geometry": {"num_key_value_heads": 2}},
    ],
    ids=["pinned-pool", "smaller-fraction", "300k-context", "two-kv-heads"],
)
def test_load_is_judged_against_the_configured_pool(settings: dict[str, Any]) -> None:
    cfg = replace(SEED, expected_clients=64, expected_context=8192, **settings)
    pool = kv_pool(
        max_model_len=cfg.vllm.max_model_len,
        gpu_memory_utilization=cfg.vllm.gpu_memory_utilization,
        kv_cache_memory_bytes=cfg.vllm.kv_cache_memory_bytes,
        model=cfg.model_geometry,
    )
    assert pool.tokens != kv_pool().tokens  # each setting changes the pool
    (finding,) = only(cfg, "load.expected_clients")
    text = says(finding, "warning", "load.expected_clients", "64 x 8192")
    assert f": 524,288 KV tokens wanted against a {pool.tokens:,}-token pool" in text
    assert f"Keep clients x context under {pool.safe_tokens:,}" in text


def test_the_kv_wall_and_the_seeds_safe_line_are_where_the_pool_says() -> None:
    """Filling the pool exactly is not past the wall (a note); the safe line is strict."""
    pool_len = 2**19
    pool = kv_pool(max_model_len=pool_len)
    at: dict[str, Any] = {"max_model_len": pool_len, "expected_clients": 1}
    (full,) = only(replace(SEED, **at, expected_context=pool.tokens), "load.expected_clients")
    says(full, "note", "load.expected_clients", f"1 x {pool.tokens}")
    (line,) = only(replace(SEED, **at, expected_context=pool.safe_tokens), "load.expected_clients")
    text = says(line, "note", "load.expected_clients", f"1 x {pool.safe_tokens}")
    assert (
        f"not under the build log's safe line of clients x context < {pool.safe_tokens:,}" in text
    )
    under = replace(SEED, **at, expected_context=pool.safe_tokens - 1)
    assert only(under, "load.expected_clients") == []


def test_errors_come_before_warnings_before_notes() -> None:
    # Checked in this order: memory (a forced warning), then kv dtype (an error); batched
    # tokens (a note) before block size (a warning).
    findings = check_settings(
        replace(
            SEED,
            gpu_memory_utilization=0.95,
            force_gpu_memory_utilization=True,
            kv_cache_dtype="int8",
            max_num_batched_tokens=3000,
            block_size=64,
        )
    )
    assert [(f.severity, f.key) for f in findings] == [
        ("error", "vllm.kv_cache_dtype"),
        ("warning", "vllm.gpu_memory_utilization"),
        ("warning", "vllm.block_size"),
        ("note", "vllm.max_num_batched_tokens"),
    ]


def test_an_accelerator_without_chip_data_names_its_value() -> None:
    (finding,) = check_settings(replace(SEED, accelerator_type="v5e-1"))
    assert "'v5e' is the prose name" in says(finding, "error", "accelerator_type", "v5e-1")


def test_flex_start_keys_on_a_vm_say_they_do_nothing() -> None:
    vm = parse_config({"provisioning": "spot", "flex_start_timeout": "2h"})
    (finding,) = only(vm, "flex_start_timeout")
    text = says(finding, "warning", "flex_start_timeout", "2h")
    assert text.endswith(
        "has no effect with provisioning = 'spot': it applies to flex-start only. Remove it, "
        'or set provisioning = "flex-start"'
    )
    # Only keys the file sets are judged: the default of the other says nothing.
    assert only(vm, "allow_untested_flex_zone") == []


@pytest.mark.parametrize(
    ("tokens", "fits"),
    [
        (0, "1"),
        (1, "1"),
        (2, "2"),
        (3, "2"),
        (32767, "16384"),
        (32768, "32768"),
        (250149, "131072"),
    ],
)
def test_the_context_a_fix_suggests_is_the_largest_power_of_two_that_fits(
    tokens: int, fits: str
) -> None:
    """Issue 23 item 3: "set vllm.max_model_len = N or less" names the build log's kind of
    length (a power of two) and the largest one at or under the pool."""
    assert guards._fitting_len(tokens) == fits


_FEWER = re.compile(r"^at most (?P<n>[\d,]+) client\(s\) at (?P<context>[\d,]+) tokens of context$")
_SHORTER = re.compile(
    r"^(?P<clients>\d+) client\(s\) at (?P<longest>[\d,]+) tokens of context or less$"
)


@pytest.mark.parametrize("safe", [1, 2, 3, 8_192, 8_193, 250_149])
@pytest.mark.parametrize(("clients", "context"), [(1, 1), (1, 8_192), (2, 4_096), (64, 8_192)])
def test_the_fixes_for_a_load_past_the_line_are_the_largest_that_stay_strictly_under_it(
    safe: int, clients: int, context: int
) -> None:
    """The load warning's "Keep clients x context under SAFE: ..." (issue 23, item 3: every
    capacity message names a change that fits): fewer clients at this context, or a shorter
    context for these clients, each the most that stays strictly under the line, and only the
    ones that exist; with neither, the key that makes the pool larger."""
    text = guards._under_line(safe, clients, context)
    fewer = (safe - 1) // context  # the most n with n x context < safe
    shorter = (safe - 1) // clients
    wanted = [bool(fewer), bool(shorter)]
    parts = re.split(r" or (?=at most |\d)", text)  # "or less" ends a fix; " or " joins two
    if not any(wanted):
        key = re.fullmatch(r"a larger pool \(vllm\.(\w+)\)", text)
        assert key and hasattr(SEED.vllm, key[1]), text
        return
    assert len(parts) == sum(wanted), text
    for part in parts:
        if m := _FEWER.fullmatch(part):
            n, at = int(m["n"].replace(",", "")), int(m["context"].replace(",", ""))
            assert at == context and n * context < safe <= (n + 1) * context and n >= 1
            wanted[0] = False
        elif m := _SHORTER.fullmatch(part):
            longest = int(m["longest"].replace(",", ""))
            assert int(m["clients"]) == clients and longest >= 1
            assert clients * longest < safe <= clients * (longest + 1)
            wanted[1] = False
        else:
            raise AssertionError(f"not a fix: {part!r} in {text!r}")
    assert wanted == [False, False], text


def test_a_pinned_pool_too_small_for_one_request_is_judged_as_pinned() -> None:
    """With vllm.kv_cache_memory_bytes the pool is that many bytes at this max_model_len for
    this model, not what gpu_memory_utilization would leave, and the message says so."""
    pinned = 2_000_000_000
    cfg = replace(
        SEED,
        geometry={"num_key_value_heads": 2},
        max_model_len=131_072,
        kv_cache_memory_bytes=pinned,
    )
    pool = kv_pool(max_model_len=131_072, kv_cache_memory_bytes=pinned, model=cfg.model_geometry)
    # Each of the three shapes the pool (the max_model_len's block size, the model's KV bytes).
    assert pool.tokens != kv_pool(kv_cache_memory_bytes=pinned, model=cfg.model_geometry).tokens
    assert pool.tokens != kv_pool(max_model_len=131_072, kv_cache_memory_bytes=pinned).tokens
    (finding,) = only(cfg, "vllm.max_model_len")
    text = says(finding, "error", "vllm.max_model_len", 131_072)
    assert f"does not fit the {pool.tokens:,}-token KV pool" in text
    assert f"that kv_cache_memory_bytes {pinned} leaves: vLLM refuses to start. Set " in text


@pytest.mark.parametrize(
    ("context", "fix"),
    [
        # Within the model's own maximum: a longer max_model_len holds it.
        (131_072, "Raise vllm.max_model_len to 131072 (block size scales"),
        # Past it (issue 23, item 3): vLLM refuses any max_model_len that long at boot.
        (131_073, "Shorten it to 32768 or less: the model's own maximum is 131,072 tokens"),
    ],
)
def test_a_context_past_max_model_len_gets_the_fix_that_exists(context: int, fix: str) -> None:
    cfg = replace(SEED, expected_clients=1, expected_context=context)
    assert (
        cfg.model_geometry.max_position_embeddings == 131_072 and cfg.vllm.max_model_len == 32_768
    )
    (finding,) = only(cfg, "load.expected_context")
    assert fix in says(finding, "error", "load.expected_context", context)


@pytest.mark.parametrize(
    ("extra", "warned"),
    [
        (["--enable-log-requests"], True),
        (["--no-enable-log-requests"], False),
        (["--max-log-len", "10"], False),
    ],
)
def test_logging_prompts_to_cloud_logging_is_a_warning(extra: list[str], warned: bool) -> None:
    """vLLM's request log holds the prompt, and the node ships vLLM's output (issue 38)."""
    settings = parse_config({"vllm": {"extra_args": extra}})
    found = only(settings, "vllm.extra_args")
    assert [f.severity for f in found] == (["warning"] if warned else [])
    if warned:
        assert "prompt" in found[0].message and "Cloud Logging" in found[0].message
        assert "Fix: remove it" in found[0].message
        # The finding names the flag the user wrote, as they wrote it.
        assert found[0].value == "--enable-log-requests"
