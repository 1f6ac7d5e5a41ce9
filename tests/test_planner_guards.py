"""Each guard rail fires on its bad value and stays quiet on the seed's configuration."""

from __future__ import annotations

from typing import Any

import pytest

from tpudeploy.config import DeployConfig
from tpudeploy.planner.guards import (
    VLLM_KV_CACHE_DTYPES,
    Finding,
    check_settings,
    errors,
)

SEED = DeployConfig()
_TOP = ("accelerator_type",)
_LOAD = ("expected_clients", "expected_context")


def replace(cfg: DeployConfig, **flat: Any) -> DeployConfig:
    """The config with keys changed by their flat names, WITHOUT validation: the guard rails
    must judge whatever a config could hold, including values the schema would refuse."""
    top = {k: flat.pop(k) for k in _TOP if k in flat}
    load = {k: flat.pop(k) for k in _LOAD if k in flat}
    return cfg.model_copy(
        update={
            "vllm": cfg.vllm.model_copy(update=flat),
            "load": cfg.load.model_copy(update=load),
            **top,
        }
    )


def only(settings: DeployConfig, key: str) -> list[Finding]:
    return [f for f in check_settings(settings) if f.key == key]


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
    assert errors(check_settings(chunked)) == []
    assert errors(check_settings(text_only)) == []


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
