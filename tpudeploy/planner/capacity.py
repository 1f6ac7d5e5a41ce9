"""KV pool, block rounding, safe concurrency and the decode bandwidth floor, from data."""

from __future__ import annotations

from dataclasses import dataclass

from tpudeploy import facts
from tpudeploy.planner.chips import V5E, ChipSpec
from tpudeploy.planner.geometry import GEMMA_4_E2B, GIB, LayerType, ModelGeometry


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """How the vLLM TPU (Pallas) backend lays out the pool (build log, --max-model-len section)."""

    # The backend scales block_size with max_model_len to hold this many blocks per request.
    blocks_per_request: int = facts.BLOCKS_PER_REQUEST
    # Assumed, not in the seed: the smallest page the kernel takes, for short contexts.
    min_block_size: int = 16
    # The build log's rule of thumb: clients x context < 250,000 of its 321,344-token pool.
    safe_pool_fraction: float = facts.SAFE_POOL_FRACTION
    # Measured single-stream TPOT at max-model-len 32768 (blocks/request table).
    measured_tpot_s: float = facts.MEASURED_TPOT_S


TPU_PALLAS = BackendSpec()


def next_power_of_two(n: int) -> int:
    """The smallest power of two >= n: TPU kernels are compiled for power-of-two sizes."""
    return 1 << max(0, (n - 1).bit_length())


def block_size_for(max_model_len: int, backend: BackendSpec = TPU_PALLAS) -> int:
    """16,384 -> 32 and 32,768 -> 64 (build log): the power of two keeping 512 blocks a request."""
    per_block = -(-max_model_len // backend.blocks_per_request)
    return max(backend.min_block_size, next_power_of_two(per_block))


@dataclass(frozen=True, slots=True)
class KvPool:
    max_model_len: int
    gpu_memory_utilization: float
    hbm_bytes: int
    cap_bytes: int
    weight_bytes: int
    pool_bytes: int
    bytes_per_token: int
    block_size: int
    num_blocks: int
    tokens: int
    safe_tokens: int
    # Where `tokens` comes from when not this arithmetic: a build's boot log (issue 40). A build
    # that windows its sliding layers holds more than the build log's one-group pool, and every
    # guard rail then follows what that build allocated, saying so.
    measured_from: str | None = None

    @property
    def measured_note(self) -> str:
        """Said after the pool's size in every message: "" for the planner's arithmetic."""
        if self.measured_from is None:
            return ""
        return f" (the build's measured pool, {self.measured_from}; not the build log's " + (
            f"{facts.KV_POOL_TOKENS:,})"
        )

    @property
    def outside_cap_bytes(self) -> int:
        # Compiled XLA programs live here and the utilisation knob does not govern them.
        return self.hbm_bytes - self.cap_bytes

    @property
    def blocks_per_request(self) -> int:
        return -(-self.max_model_len // self.block_size)

    def max_clients(self, context: int) -> int:
        """Streams of `context` tokens that fit in the pool at once: past it, queueing."""
        return self.tokens // context

    def safe_clients(self, context: int) -> int:
        """Streams of `context` tokens under the build log's ~78% line (at least 1 if one fits)."""
        return max(min(1, self.max_clients(context)), self.safe_tokens // context)


def kv_pool(
    *,
    max_model_len: int = facts.MAX_MODEL_LEN,
    gpu_memory_utilization: float = facts.GPU_MEMORY_UTILIZATION_CEILING,
    kv_cache_memory_bytes: int | None = None,
    kv_dtype_bytes: int | None = None,
    model: ModelGeometry = GEMMA_4_E2B,
    chip: ChipSpec = V5E,
    backend: BackendSpec = TPU_PALLAS,
    measured: tuple[int, str] | None = None,
) -> KvPool:
    """The engine's Memory statistics line and KV block count, for one chip; `measured`
    (tokens, where from): the pool a build's boot log reported, which replaces the arithmetic's
    token count (the memory figures stay the arithmetic's)."""
    cap = int(chip.hbm_bytes * gpu_memory_utilization)
    weights = model.resident_weight_bytes
    # --kv-cache-memory-bytes pins the pool and skips the fraction (seed: 5923602432 good).
    pool = cap - weights if kv_cache_memory_bytes is None else kv_cache_memory_bytes
    if pool <= 0:
        raise ValueError(
            f"vllm.gpu_memory_utilization = {gpu_memory_utilization}: cap {cap / GIB:.2f} GiB "
            f"does not hold the {weights / GIB:.2f} GiB of weights; use 0.92 (the build log's)"
        )
    per_token = model.kv_bytes_per_token(kv_dtype_bytes=kv_dtype_bytes)
    block = block_size_for(max_model_len, backend)
    # The pool holds whole blocks: floor(pool / (bytes/token x block size)), seed 5,021 x 64.
    blocks = pool // (per_token * block)
    tokens = blocks * block
    if measured is not None:
        tokens, blocks = measured[0], measured[0] // block
    return KvPool(
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        hbm_bytes=chip.hbm_bytes,
        cap_bytes=cap,
        weight_bytes=weights,
        pool_bytes=pool,
        bytes_per_token=per_token,
        block_size=block,
        num_blocks=blocks,
        tokens=tokens,
        safe_tokens=int(tokens * backend.safe_pool_fraction),
        measured_from=None if measured is None else measured[1],
    )


def kv_bytes_per_request(
    context: int, *, windowed: bool = False, model: ModelGeometry = GEMMA_4_E2B
) -> int:
    """KV bytes one request of `context` tokens holds; `windowed`: the sliding layers keep
    only their window, which tpu-inference does not do yet for a model with two head dims
    (build log: num_kv_cache_groups=1, "worth 2.8x the KV capacity at 16K context")."""
    by_type = model.kv_bytes_per_token_by_type()
    sliding = min(context, model.sliding_window) if windowed else context
    return by_type[LayerType.FULL] * context + by_type[LayerType.SLIDING] * sliding


def sliding_window_ratio(
    context: int = facts.SLIDING_WINDOW_WIN_CONTEXT, model: ModelGeometry = GEMMA_4_E2B
) -> float:
    """How many more requests of `context` tokens fit once sliding windows are honoured."""
    return kv_bytes_per_request(context, model=model) / kv_bytes_per_request(
        context, windowed=True, model=model
    )


@dataclass(frozen=True, slots=True)
class ProgramFailure:
    """The measured 0.95 failure: a compiled program that did not fit outside the cap."""

    gpu_memory_utilization: float = 0.95
    # RuntimeProgramAllocationFailure for jit_structured_decode_fn (XLA's "M" is MiB).
    wanted_bytes: int = round(384.11 * 1024**2)
    free_bytes: int = round(347.33 * 1024**2)


SEED_PROGRAM_FAILURE = ProgramFailure()


def compile_headroom_bytes(
    gpu_memory_utilization: float,
    *,
    chip: ChipSpec = V5E,
    failure: ProgramFailure = SEED_PROGRAM_FAILURE,
) -> int:
    """Estimated room left for the largest compiled program; negative means it will not load.

    Whatever else lives outside the cap is taken as fixed, from the failure's free figure:
    0.95 is 37 MiB short; 0.93 and 0.94 leave ~286 and ~124 MiB (build log: ~291 and ~127 MB).
    """
    outside = chip.hbm_bytes * (1 - gpu_memory_utilization)
    other = chip.hbm_bytes * (1 - failure.gpu_memory_utilization) - failure.free_bytes
    return round(outside - other - failure.wanted_bytes)


def kv_memory_multiplier(tensor_parallel_size: int, model: ModelGeometry = GEMMA_4_E2B) -> float:
    """KV bytes per token at this TP over TP=1: 4.0 at TP=4 for a one-KV-head model."""
    return model.padded_kv_heads(tensor_parallel_size) / model.num_key_value_heads


def decode_floor_s(model: ModelGeometry = GEMMA_4_E2B, chip: ChipSpec = V5E) -> float:
    """Seconds per decode step if HBM bandwidth were the only cost (build log: 3.94 ms)."""
    return model.decode_bytes_per_step / chip.hbm_bandwidth_bytes_per_s


def bandwidth_efficiency(
    measured_tpot_s: float = TPU_PALLAS.measured_tpot_s,
    model: ModelGeometry = GEMMA_4_E2B,
    chip: ChipSpec = V5E,
) -> float:
    """Floor over measured step time: the share of peak bandwidth decode gets (build log: 49%)."""
    return decode_floor_s(model, chip) / measured_tpot_s
