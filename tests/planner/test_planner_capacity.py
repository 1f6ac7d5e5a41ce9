"""Capacity arithmetic reproduces the seed's memory budget, KV pool and decode floor."""

from __future__ import annotations

import pytest

from tpudeploy.planner.capacity import (
    bandwidth_efficiency,
    block_size_for,
    compile_headroom_bytes,
    decode_floor_s,
    kv_memory_multiplier,
    kv_pool,
)
from tpudeploy.planner.chips import V5E, lookup_accelerator
from tpudeploy.planner.geometry import GEMMA_4_E2B, GIB, LayerType
from tpudeploy.planner.tables import capacity_table

MIB = 1024**2


def within(actual: float, expected: float, rel: float = 0.005) -> bool:
    return actual == pytest.approx(expected, rel=rel)


def test_layer_pattern_is_7_full_28_sliding() -> None:
    types = GEMMA_4_E2B.layer_types
    assert types.count(LayerType.FULL) == 7
    assert types.count(LayerType.SLIDING) == 28
    assert [i for i, t in enumerate(types) if t is LayerType.FULL] == [4, 9, 14, 19, 24, 29, 34]


def test_only_first_15_layers_own_a_cache_and_shared_ones_read_13_and_14() -> None:
    assert GEMMA_4_E2B.cache_owning_layers == tuple(range(15))
    sources = GEMMA_4_E2B.shared_cache_sources
    assert len(sources) == 20
    assert set(sources.values()) == {13, 14}
    assert sources[19] == 14 and sources[34] == 14  # full layers read the last full owner
    assert sources[15] == 13 and sources[33] == 13


def test_kv_bytes_per_token_is_18_kib() -> None:
    by_type = GEMMA_4_E2B.kv_bytes_per_token_by_type()
    assert by_type[LayerType.SLIDING] == 12_288
    assert by_type[LayerType.FULL] == 6_144
    assert GEMMA_4_E2B.kv_bytes_per_token() == 18_432 == 18 * 1024


def test_one_head_dim_for_all_layers_would_undercount_by_17_percent() -> None:
    # Seed trap 2: reading head_dim 256 everywhere misses half of the full layers' KV.
    naive = len(GEMMA_4_E2B.cache_owning_layers) * 1 * 2 * GEMMA_4_E2B.head_dim * 2
    assert 1 - naive / GEMMA_4_E2B.kv_bytes_per_token() == pytest.approx(0.1667, abs=0.001)


def test_memory_budget_at_092() -> None:
    pool = kv_pool()
    assert round(pool.hbm_bytes / GIB, 2) == 15.75
    assert round(pool.cap_bytes / GIB, 2) == 14.49
    assert round(pool.weight_bytes / GIB, 2) == 8.97
    assert round(pool.pool_bytes / GIB, 2) == 5.52
    assert round(pool.outside_cap_bytes / GIB, 2) == 1.26


@pytest.mark.parametrize(
    ("max_model_len", "block", "blocks", "tokens"),
    [(16_384, 32, 10_043, 321_376), (32_768, 64, 5_021, 321_344)],
)
def test_pool_tokens_and_block_rounding(
    max_model_len: int, block: int, blocks: int, tokens: int
) -> None:
    pool = kv_pool(max_model_len=max_model_len)
    assert pool.block_size == block
    assert pool.blocks_per_request == 512
    assert within(pool.num_blocks, blocks)
    assert within(pool.tokens, tokens)
    assert pool.tokens % block == 0


def test_measured_pool_bytes_give_the_seeds_exact_blocks() -> None:
    # The seed's measured-good --kv-cache-memory-bytes reproduces both block counts exactly.
    assert kv_pool(max_model_len=16_384, kv_cache_memory_bytes=5_923_602_432).num_blocks == 10_043
    exact = kv_pool(max_model_len=32_768, kv_cache_memory_bytes=5_923_602_432)
    assert (exact.num_blocks, exact.tokens) == (5_021, 321_344)


def test_block_size_scales_with_max_model_len() -> None:
    assert block_size_for(65_536) == 128
    assert block_size_for(32_768) == 64
    assert block_size_for(20_000) == 64


def test_095_sizes_the_pool_the_seed_saw() -> None:
    pool = kv_pool(gpu_memory_utilization=0.95)
    assert round(pool.cap_bytes / GIB, 2) == 14.96
    assert round(pool.pool_bytes / GIB, 2) == 5.99
    assert within(pool.tokens, 348_864)
    assert pool.tokens / kv_pool().tokens - 1 == pytest.approx(0.086, abs=0.002)


def test_compile_headroom_matches_the_failure_and_estimates() -> None:
    assert compile_headroom_bytes(0.95) / MIB == pytest.approx(-(384.11 - 347.33), abs=0.05)
    assert compile_headroom_bytes(0.93) / 1e6 == pytest.approx(291, rel=0.03)
    assert compile_headroom_bytes(0.94) / 1e6 == pytest.approx(127, rel=0.03)
    assert compile_headroom_bytes(0.92) > compile_headroom_bytes(0.93) > 0


def test_safe_concurrency_line() -> None:
    pool = kv_pool()
    assert within(pool.safe_tokens, 250_000)
    # Seed: 64 x 8,192 = 524,288 wanted is past the wall; 16 x 8,192 fits.
    assert pool.max_clients(8192) < 64
    assert pool.safe_clients(8192) >= 16
    assert pool.safe_clients(32_768) * 32_768 < pool.safe_tokens


def test_tensor_parallel_4_costs_4x_kv() -> None:
    assert kv_memory_multiplier(4) == 4.0
    assert GEMMA_4_E2B.kv_bytes_per_token(tensor_parallel_size=4) == 4 * 18_432
    assert kv_memory_multiplier(1) == 1.0


def test_decode_bytes_and_floor() -> None:
    assert round(GEMMA_4_E2B.per_layer_embedding_bytes / GIB, 2) == 4.38
    assert round(GEMMA_4_E2B.embedding_bytes / GIB, 2) == 0.75
    assert within(GEMMA_4_E2B.decode_bytes_per_step / GIB, 3.15)
    assert round(decode_floor_s() * 1e3, 2) == 3.94
    assert round(bandwidth_efficiency(8.02e-3), 2) == 0.49


def test_bandwidth_is_gibps_not_gbps() -> None:
    assert V5E.hbm_bandwidth_bytes_per_s == 800 * 1024**3
    assert V5E.peak_int8_ops == pytest.approx(2 * V5E.peak_bf16_flops, rel=0.01)


def test_accelerator_lookup() -> None:
    one = lookup_accelerator("v5litepod-1")
    assert (one.chip, one.chips) == (V5E, 1)
    assert lookup_accelerator("v5litepod-8").chips == 8
    assert one.chip.machine_type == "ct5lp-hightpu-1t"
    assert one.chip.native_formats == {"bf16", "int8"}


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("v5e-1", "'v5litepod-1'"),
        ("v6e-1", "unknown TPU generation 'v6e'"),
        ("v5litepod-3", "slices come as"),
        ("v5litepod", "'<generation>-<chips>'"),
    ],
)
def test_accelerator_lookup_errors_name_key_value_and_fix(value: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=r"^accelerator_type = ") as info:
        lookup_accelerator(value)
    assert fragment in str(info.value)
    assert repr(value) in str(info.value)


def test_capacity_table_states_the_figures() -> None:
    text = capacity_table()
    shared = "the other 20 reuse the caches of layers 13 and 14"
    for fragment in ("18,432 B", "14.49 GiB", "5.52 GiB", "3.94 ms", "15 of 35", shared):
        assert fragment in text
    # One KV head cannot be sharded: at TP=4 it is stored four times (seed).
    assert "TP=4: x4 KV per token" in text
