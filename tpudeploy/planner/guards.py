"""Guard rails: pure checks of a deployment config against what the build log learned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.config.messages import toml_value
from tpudeploy.planner.capacity import (
    TPU_PALLAS,
    block_size_for,
    compile_headroom_bytes,
    kv_memory_multiplier,
    kv_pool,
    next_power_of_two,
)
from tpudeploy.planner.chips import Accelerator, AcceleratorError, lookup_accelerator
from tpudeploy.planner.geometry import GIB

Severity = Literal["error", "warning", "note"]
MIB = 1024**2


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Severity
    key: str
    value: object
    message: str
    override: str | None = None

    def __str__(self) -> str:
        text = f"{self.severity}: {self.key} = {toml_value(self.value)}: {self.message}"
        if self.override:
            text += f" (if you know better, set {self.override} = true)"
        return text


# Highest value that booted and served, per (chip generation, model) (seed: 0.95 died).
MEMORY_UTILIZATION_CEILING: dict[tuple[str, str], float] = {
    (facts.V5E.generation, facts.MODEL): facts.GPU_MEMORY_UTILIZATION_CEILING
}

# vLLM's --kv-cache-dtype enum on the seed's build: 16 values; anything else is
# "invalid choice" at the CLI (int8 included).
TURBOQUANT_KV_DTYPES = frozenset(
    {"turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc"}
)
VLLM_KV_CACHE_DTYPES = (
    frozenset(
        {
            "auto",
            "bfloat16",
            "float16",
            "fp8",
            "fp8_ds_mla",
            "fp8_e4m3",
            "fp8_e5m2",
            "fp8_inc",
            "fp8_per_token_head",
            "int4_per_token_head",
            "int8_per_token_head",
            "nvfp4",
        }
    )
    | TURBOQUANT_KV_DTYPES
)
KV_DTYPES_GOOD = frozenset({"auto", "bfloat16"})
# Reachable on the JAX path but 1.000x capacity: the block layout is word-aligned.
KV_DTYPES_PADDED = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2"})
# Accepted by the CLI, then kill the server at boot (seed, measured).
KV_DTYPES_CRASH = (
    frozenset({"int8_per_token_head", "nvfp4", "fp8_inc", "fp8_ds_mla"}) | TURBOQUANT_KV_DTYPES
)


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _fitting_len(tokens: int) -> str:
    """The largest power-of-two context at or under `tokens` (the build log's lengths are powers
    of two; the block size scales with them), as the user writes it."""
    return str(1 << (max(tokens, 1).bit_length() - 1))


def _under_line(safe_tokens: int, clients: int, context: int) -> str:
    """What keeps clients x context strictly under the safe line: fewer clients at this
    context, or a shorter context for these clients; only the changes that exist."""
    fits = []
    most_clients = (safe_tokens - 1) // context
    if most_clients >= 1:
        fits.append(f"at most {most_clients} client(s) at {context:,} tokens of context")
    longest = (safe_tokens - 1) // clients
    if longest >= 1:
        fits.append(f"{clients} client(s) at {longest:,} tokens of context or less")
    return " or ".join(fits) or "a larger pool (vllm.kv_cache_memory_bytes)"


def check_max_model_len(cfg: DeployConfig) -> list[Finding]:
    """vLLM derives the longest context from the model's config.json and refuses a longer
    --max-model-len at boot (vllm-project/vllm, vllm/config.py, _get_and_verify_max_len:
    "User-specified max_model_len ... is greater than the derived max_model_len")."""
    limit = cfg.model_geometry.max_position_embeddings
    if cfg.vllm.max_model_len <= limit:
        return []
    return [
        Finding(
            "error",
            "vllm.max_model_len",
            cfg.vllm.max_model_len,
            f"longer than {cfg.vllm.model}'s own maximum context, max_position_embeddings "
            f"{limit:,} in its config.json: vLLM refuses it at boot, after billing started. "
            f"Use {limit} or less (the build log ran {facts.MAX_MODEL_LEN})",
        )
    ]


def check_gpu_memory_utilization(cfg: DeployConfig, accel: Accelerator) -> list[Finding]:
    model = cfg.model_geometry
    key, value = "vllm.gpu_memory_utilization", cfg.vllm.gpu_memory_utilization
    if not 0 < value <= 1:
        return [Finding("error", key, value, "must be a fraction in (0, 1]; use 0.92 (build log)")]
    try:
        pool = kv_pool(
            max_model_len=cfg.vllm.max_model_len,
            gpu_memory_utilization=value,
            model=model,
            chip=accel.chip,
            measured=cfg.vllm.measured_pool,
        )
    except ValueError as exc:
        # kv_pool names the key and value itself; the finding says them once.
        return [Finding("error", key, value, str(exc).removeprefix(f"{key} = {value}: "))]
    ceiling = MEMORY_UTILIZATION_CEILING.get((accel.chip.generation, cfg.vllm.model))
    pinned = cfg.vllm.kv_cache_memory_bytes
    if pinned is not None:
        pool = kv_pool(
            max_model_len=cfg.vllm.max_model_len,
            kv_cache_memory_bytes=pinned,
            model=model,
            chip=accel.chip,
            measured=cfg.vllm.measured_pool,
        )
    if pool.tokens < cfg.vllm.max_model_len:
        # The fix that fits: a context the pool holds, or a larger pool while one can be had
        # (never "use 0.92" to a config that already says 0.92).
        fixes = [f"Set vllm.max_model_len = {_fitting_len(pool.tokens)} or less"]
        if pinned is not None:
            needed = pool.bytes_per_token * cfg.vllm.max_model_len
            fixes.append(f"raise vllm.kv_cache_memory_bytes to {needed} or more")
        elif ceiling is not None and value < ceiling:
            fixes.append(f"raise {key} to {ceiling} (the build log's ceiling)")
        sized_by = f"kv_cache_memory_bytes {pinned}" if pinned else f"{key} {value}"
        return [
            Finding(
                "error",
                "vllm.max_model_len",
                cfg.vllm.max_model_len,
                f"one request does not fit the {pool.tokens:,}-token KV pool{pool.measured_note} "
                f"({pool.pool_bytes / GIB:.2f} GiB) that {sized_by} leaves: vLLM refuses to "
                "start. " + ", or ".join(fixes),
            )
        ]
    if ceiling is None or value <= ceiling:
        return []
    headroom = round(compile_headroom_bytes(value, chip=accel.chip) / MIB)
    outcome = f"{-headroom} MiB short" if headroom < 0 else f"~{headroom} MiB of margin"
    message = (
        f"above the {ceiling} ceiling for {cfg.vllm.model} on {accel.chip.generation}. The knob "
        f"governs weights + KV only; compiled XLA programs live in the rest. 0.95 died 691 s "
        f"into compile (jit_structured_decode_fn wanted 384.11 MiB, 347.33 MiB free); this "
        f"value is untested and estimates {outcome}. Use {ceiling}, or pin the pool with "
        f"vllm.kv_cache_memory_bytes"
    )
    forced = cfg.vllm.force_gpu_memory_utilization
    severity: Severity = "warning" if forced else "error"
    return [Finding(severity, key, value, message, "vllm.force_gpu_memory_utilization")]


def check_kv_cache_dtype(cfg: DeployConfig) -> list[Finding]:
    key, value = "vllm.kv_cache_dtype", cfg.vllm.kv_cache_dtype
    dtype = value.strip().lower()
    if dtype in KV_DTYPES_GOOD:
        return []
    if dtype not in VLLM_KV_CACHE_DTYPES:
        known = ", ".join(sorted(VLLM_KV_CACHE_DTYPES))
        return [
            Finding(
                "error",
                key,
                value,
                f"not in vLLM's --kv-cache-dtype enum (the CLI exits with \"invalid choice: "
                f"'{value}'\"; the build log hit this with int8). Use 'auto' (bf16); "
                f"known: {known}",
            )
        ]
    if dtype in KV_DTYPES_CRASH:
        return [
            Finding(
                "error",
                key,
                value,
                "accepted by the CLI, then kills the server at boot on the TPU JAX path "
                "(build log: int8_per_token_head, turboquant_*, nvfp4, fp8_inc, fp8_ds_mla). "
                "Use 'auto'",
            )
        ]
    if cfg.vllm.force_kv_cache_dtype:
        return []
    if dtype in KV_DTYPES_PADDED:
        message = (
            "gives 1.000x KV capacity on this stack: the block layout is word-aligned, so "
            "the narrower element buys padding, not room, and costs ~2% throughput (build log, "
            "re-verified: 5,021 blocks either way). Use 'auto'"
        )
    else:
        message = (
            "accepted by the CLI but never run by the build log on this model and chip; expect "
            "fp8's 1.000x capacity or a boot failure. Use 'auto'"
        )
    return [Finding("warning", key, value, message, "vllm.force_kv_cache_dtype")]


def check_tensor_parallel(cfg: DeployConfig, accel: Accelerator) -> list[Finding]:
    model = cfg.model_geometry
    key, tp = "vllm.tensor_parallel_size", cfg.vllm.tensor_parallel_size
    if tp < 1:
        return [Finding("error", key, tp, "must be at least 1; use 1 on one chip")]
    if tp > accel.chips:
        return [
            Finding(
                "error",
                key,
                tp,
                f"{accel.accelerator_type} has {accel.chips} chip(s); tensor parallelism "
                f"cannot exceed it. Use {min(tp, accel.chips)} or a larger slice",
            )
        ]
    if tp > 1 and model.num_key_value_heads % tp != 0:
        factor = kv_memory_multiplier(tp, model)
        message = (
            f"{cfg.vllm.model} has {model.num_key_value_heads} KV head(s), which cannot be "
            f"sharded {tp} ways: the runtime pads them to {model.padded_kv_heads(tp)} and "
            f"stores the same head replicated, {factor:g}x the KV memory per token (build log "
            f"trap 5: more chips multiply KV cost). Use 1 and scale out with more replicas"
        )
        severity: Severity = "warning" if cfg.vllm.force_tensor_parallel_size else "error"
        return [Finding(severity, key, tp, message, "vllm.force_tensor_parallel_size")]
    return []


def check_max_num_batched_tokens(cfg: DeployConfig) -> list[Finding]:
    model = cfg.model_geometry
    key, value = "vllm.max_num_batched_tokens", cfg.vllm.max_num_batched_tokens
    findings: list[Finding] = []
    v = cfg.vllm
    floor = model.mm_item_floor(v.limit_mm_per_prompt) if v.disable_chunked_mm_input else 0
    if value < floor:
        findings.append(
            Finding(
                "error",
                key,
                value,
                f'vLLM refuses to start: "ValueError: Chunked MM input disabled but '
                f"max_tokens_per_mm_item ({floor}) is larger than max_num_batched_tokens "
                f'({value}). Please increase max_num_batched_tokens." With '
                f"disable_chunked_mm_input and limit_mm_per_prompt "
                f"{dict(cfg.vllm.limit_mm_per_prompt)} one item must fit in one step. Use "
                f"{next_power_of_two(floor)} (the compile bucket at the floor), or drop the "
                f"modalities you do not need",
            )
        )
    elif not _is_power_of_two(value):
        bucket = next_power_of_two(value)
        findings.append(
            Finding(
                "note",
                key,
                value,
                f"TPU compiles power-of-two buckets, so {value} runs the {bucket} kernel "
                f"while carrying {value} tokens (build log: 2496 cost 24.7% throughput against "
                f"4096 with the latency tail unchanged). Use {bucket}, or set "
                f"VLLM_TPU_BUCKET_PADDING_GAP=128 for linear buckets",
            )
        )
    return findings


def check_block_size(cfg: DeployConfig) -> list[Finding]:
    if cfg.vllm.block_size is None:
        return []
    chosen = block_size_for(cfg.vllm.max_model_len)
    return [
        Finding(
            "warning",
            "vllm.block_size",
            cfg.vllm.block_size,
            f"leave it unset: the TPU backend scales the block size with max_model_len to "
            f"keep {TPU_PALLAS.blocks_per_request} blocks per request (it would pick {chosen} at "
            f"{cfg.vllm.max_model_len}); pinning it fights the scaling that keeps long context "
            "free and more blocks per request slow decode (2048 blocks: 8.32 vs 8.02 ms, "
            "build log)",
        )
    ]


def check_request_logging(cfg: DeployConfig) -> list[Finding]:
    """--enable-log-requests makes vLLM log every request with its prompt ("Received request %s:
    prompt: %r", vllm/entrypoints/logger.py), and vLLM's output ships to Cloud Logging (TPU VM:
    the tpudeploy-vllm log, tpudeploy/opsagent.py; GKE: the vllm container's log)."""
    # Exact: the config refuses a value on it (config/serveflags.py, "takes no value").
    if "--enable-log-requests" not in cfg.vllm.extra_args:
        return []
    return [
        Finding(
            "warning",
            "vllm.extra_args",
            "--enable-log-requests",
            "vLLM then logs every request's prompt, and its output is shipped to Cloud Logging: "
            "the prompts would be stored there for the log's retention, readable by anyone who "
            "may read the project's logs (docs/see-it-running.md, what the logs contain). Fix: "
            "remove it; the front door's access log counts requests per client without content",
        )
    ]


def check_load(cfg: DeployConfig, accel: Accelerator) -> list[Finding]:
    model = cfg.model_geometry
    if cfg.load.expected_clients is None or cfg.load.expected_context is None:
        return []
    if cfg.load.expected_context > cfg.vllm.max_model_len:
        limit = model.max_position_embeddings
        fix = (
            f"Raise vllm.max_model_len to {cfg.load.expected_context} (block size scales, "
            "capacity stays) or shorten the context"
            if cfg.load.expected_context <= limit
            else f"Shorten it to {min(limit, cfg.vllm.max_model_len)} or less: the model's "
            f"own maximum is {limit:,} tokens"
        )
        return [
            Finding(
                "error",
                "load.expected_context",
                cfg.load.expected_context,
                f"longer than vllm.max_model_len ({cfg.vllm.max_model_len}): vLLM rejects such "
                f"requests. {fix}",
            )
        ]
    try:
        pool = kv_pool(
            max_model_len=cfg.vllm.max_model_len,
            gpu_memory_utilization=cfg.vllm.gpu_memory_utilization,
            kv_cache_memory_bytes=cfg.vllm.kv_cache_memory_bytes,
            model=model,
            chip=accel.chip,
            measured=cfg.vllm.measured_pool,
        )
    except ValueError:
        return []  # check_gpu_memory_utilization reports it
    wanted = cfg.load.expected_clients * cfg.load.expected_context
    under = _under_line(pool.safe_tokens, cfg.load.expected_clients, cfg.load.expected_context)
    value = f"{cfg.load.expected_clients} x {cfg.load.expected_context}"
    if wanted > pool.tokens:
        return [
            Finding(
                "warning",
                "load.expected_clients",
                value,
                f"{wanted:,} KV tokens wanted against a {pool.tokens:,}-token pool"
                f"{pool.measured_note}: past the "
                f"KV wall more clients buy queueing, not throughput (build log: 64 x 8,192 fell "
                f"from 400 to 324 tok/s, median TTFT 11.7 s). Keep clients x context under "
                f"{pool.safe_tokens:,}: "
                f"{under}",
            )
        ]
    # The seed's line is strict (clients x context < ~250,000): reaching it is not under it.
    if wanted >= pool.safe_tokens:
        return [
            Finding(
                "note",
                "load.expected_clients",
                value,
                f"{wanted:,} KV tokens is not under the build log's safe line of clients x "
                f"context < {pool.safe_tokens:,} (~{TPU_PALLAS.safe_pool_fraction:.0%} of the "
                f"{pool.tokens:,}-token pool{pool.measured_note}): expect tail latency. Use "
                f"{under}",
            )
        ]
    return []


# Keys that act only under some provisioning models; set under another, they would be accepted
# and do nothing. Only flex-start goes through the queued-resource API, whose request carries a
# run duration and waits for capacity (build log: flex-start is the only model that accepts
# --max-run-duration).
PROVISIONING_ONLY_KEYS: dict[str, tuple[str, ...]] = {
    "flex_start_timeout": ("flex-start",),
    "allow_untested_flex_zone": ("flex-start",),
}


def check_provisioning_keys(cfg: DeployConfig) -> list[Finding]:
    """A warning for each key the file sets that has no effect under its provisioning model."""
    found = []
    for key, models in PROVISIONING_ONLY_KEYS.items():
        if key in cfg.model_fields_set and cfg.provisioning not in models:
            found.append(
                Finding(
                    "warning",
                    key,
                    getattr(cfg, key),
                    f"has no effect with provisioning = {toml_value(cfg.provisioning)}: it "
                    f"applies to {' and '.join(models)} only. Remove it, or set provisioning = "
                    f"{toml_value(models[0], basic=True)}",
                )
            )
    return found


# The guard rails judge the one backend vLLM runs on TPU (Pallas, capacity.TPU_PALLAS): the
# planner's functions take it as their default.
def check_settings(cfg: DeployConfig) -> list[Finding]:
    """Every guard rail; errors first. An empty list means the build log would run it as is."""
    findings = check_kv_cache_dtype(cfg) + check_max_model_len(cfg)
    findings += check_max_num_batched_tokens(cfg)
    findings += check_provisioning_keys(cfg)
    findings += check_block_size(cfg)
    findings += check_request_logging(cfg)
    try:
        accel = lookup_accelerator(cfg.accelerator_type)
    except AcceleratorError as exc:
        findings.append(Finding("error", "accelerator_type", cfg.accelerator_type, exc.reason))
    else:
        findings = (
            check_gpu_memory_utilization(cfg, accel)
            + check_tensor_parallel(cfg, accel)
            + findings
            + check_load(cfg, accel)
        )
    order = {"error": 0, "warning": 1, "note": 2}
    return sorted(findings, key=lambda f: order[f.severity])
