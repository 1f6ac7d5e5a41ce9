"""`[vllm]`: the `vllm serve` flags and tpu-inference's variables, every default the build
log's value (tpudeploy/config/schema.py's DeployConfig holds it as `vllm`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from tpudeploy import facts
from tpudeploy.config import checks
from tpudeploy.config.base import Strict
from tpudeploy.config.containers import check_container_name, check_image, check_shm_size
from tpudeploy.config.network import MEDIA_URLS_DISABLED, check_media_domains
from tpudeploy.config.serveflags import check_extra_args, served_model_name


class VllmConfig(Strict):
    """`vllm serve` flags in snake_case plus the tpu-inference environment; build-log values."""

    image: str = facts.IMAGE
    """the serving image (the build log ran the nightly tag)"""
    container_name: str = "vllm-gemma4"
    """docker container name on the node"""
    port: int = Field(default=8000, ge=1024, le=65535)
    """vLLM's port on the node's loopback, never opened (the proxy's is [proxy] port)"""
    shm_size: str = "10gb"
    """docker --shm-size"""
    model: str = facts.MODEL
    """Hugging Face model id"""
    dtype: Literal["auto", "bfloat16", "float16", "half", "float", "float32"] = "bfloat16"
    """bf16 is the only format that runs on this stack"""
    kv_cache_dtype: str = "auto"
    """auto (bf16); fp8 is warned (1.000x capacity), int8 refused"""
    max_model_len: int = Field(default=facts.MAX_MODEL_LEN, gt=0)
    """costs no KV capacity: the block size scales with it"""
    max_num_batched_tokens: int = Field(default=facts.MAX_NUM_BATCHED_TOKENS, gt=0)
    """the compile bucket at the 2,496-token multimodal floor"""
    tensor_parallel_size: int = Field(default=1, ge=1)
    """one KV head cannot be sharded: >1 multiplies KV memory"""
    gpu_memory_utilization: float = Field(default=facts.GPU_MEMORY_UTILIZATION_CEILING, gt=0, le=1)
    """the ceiling on v5e (0.95 died after 691 s), not a margin"""
    enable_prefix_caching: bool = True
    """false emits --no-enable-prefix-caching"""
    disable_chunked_mm_input: bool = True
    """with limit_mm_per_prompt, sets the 2,496-token floor"""
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"image": 4, "audio": 1})
    """multimodal items per prompt"""
    enable_auto_tool_choice: bool = True
    """OpenAI-compatible tool calling"""
    tool_call_parser: str = "gemma4"
    """tool-call parser"""
    reasoning_parser: str = "gemma4"
    """reasoning parser"""
    # Left unset: the backend scales block_size with max_model_len to keep 512 blocks per request
    # (seed), which is what keeps long context free. Setting it is warned.
    block_size: int | None = Field(default=None, gt=0, examples=[64])
    """leave unset: the backend scales it (setting it is warned)"""
    # Pins the KV pool in bytes instead of a fraction (seed: measured-good 5923602432).
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0, examples=[5923602432])
    """pins the KV pool in bytes (measured-good 5923602432)"""
    # Overrides for the guard rails, for users who know better than the seed's measurements.
    force_gpu_memory_utilization: bool = False
    """override the memory ceiling guard rail"""
    force_kv_cache_dtype: bool = False
    """override the KV dtype guard rail"""
    force_tensor_parallel_size: bool = False
    """override the tensor-parallel guard rail"""
    # Extra `vllm serve` arguments passed verbatim (each one shell-quoted), for flags not modelled.
    # Speculative decoding, rendered as --speculative-config JSON, off by default: n-gram (build
    # log, untested ideas: "needs no draft checkpoint and is marked fully passing on TPU"), or
    # mtp with a draft checkpoint sized in tpudeploy/config/speculative.py (issue 40).
    speculative_config: dict[str, str | int] | None = Field(
        default=None,
        examples=[{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}],
    )
    """speculative decoding: method "ngram", or "mtp" with a sized draft model; unset: off"""
    # A build that windows its sliding layers (num_kv_cache_groups > 1 in its boot log) holds a
    # pool the planner's one-group arithmetic does not predict: the KV wall and every guard rail
    # on it follow this measurement, and say so (issue 40; make tune-report prints the line).
    measured_kv_pool: dict[str, int | str] | None = Field(
        default=None,
        examples=[{"tokens": 900_000, "kv_cache_groups": 2, "source": "OUT/arm/round-1.boot.json"}],
    )
    """a sliding-window build's measured KV pool (tokens, kv_cache_groups, source)"""
    extra_args: tuple[str, ...] = Field(default=(), examples=[["--max-num-seqs", "128"]])
    """more `vllm serve` flags: allow-listed ones only, checked against vLLM 0.33.0's CLI"""
    # Hosts vLLM may fetch image/audio URLs from. With --net=host a URL on the metadata server
    # would hand the node's credentials to whoever sends the request, and vLLM treats an empty
    # list as "every domain" (DESIGN). The default names a reserved .invalid host (RFC 2606) that
    # never resolves: URL fetching is off, inline data: URLs keep working. Widen it deliberately.
    allowed_media_domains: tuple[str, ...] = (MEDIA_URLS_DISABLED,)
    """DNS names vLLM may fetch media from (no addresses); the default fetches nothing"""

    # tpu-inference environment variables (seed table); defaults are the engine's own.
    attn_bucketized_num_reqs: bool = False
    """tpu-inference: power-of-two request buckets"""
    slice_rope_cache: bool = False
    """tpu-inference: slice the rotary cache to max_model_len"""
    num_precompile_workers: int = Field(default=1, ge=1)
    """tpu-inference: parallel XLA precompilation"""
    vllm_tpu_bucket_padding_gap: int = Field(default=0, ge=0)
    """tpu-inference: linear buckets (e.g. 128)"""
    vllm_xla_check_recompilation: bool = False
    """written as 1 (vLLM parses bool(int(...)))"""

    # The checks are plain functions (tpudeploy.config.checks and the modules it names).
    @property
    def served_model_name(self) -> str:
        """The "model" clients send: the first --served-model-name in extra_args, else model."""
        return served_model_name(self.model, self.extra_args)

    @field_validator("extra_args", "allowed_media_domains", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return checks.as_tuple(v)

    @field_validator("allowed_media_domains")
    @classmethod
    def _media_domains(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_media_domains(v)

    @field_validator("extra_args")
    @classmethod
    def _extra_args(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_extra_args(v)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        return check_image(v)

    @field_validator("container_name")
    @classmethod
    def _container(cls, v: str) -> str:
        return check_container_name(v)

    @field_validator("shm_size")
    @classmethod
    def _shm(cls, v: str) -> str:
        return check_shm_size(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        return checks.check_model_id(v)

    @field_validator("tool_call_parser", "reasoning_parser", "kv_cache_dtype")
    @classmethod
    def _word(cls, v: str) -> str:
        return checks.check_choice_name(v)

    @field_validator("speculative_config")
    @classmethod
    def _speculative(cls, v: dict[str, str | int] | None) -> dict[str, str | int] | None:
        return checks.check_speculative_config(v)

    @field_validator("measured_kv_pool")
    @classmethod
    def _measured(cls, v: dict[str, int | str] | None) -> dict[str, int | str] | None:
        return checks.check_measured_kv_pool(v)

    @property
    def measured_pool(self) -> tuple[int, str] | None:
        """(tokens, where from) for the planner's kv_pool(measured=...), or None."""
        m = self.measured_kv_pool
        if m is None:
            return None
        groups = m["kv_cache_groups"]
        return int(m["tokens"]), f"{groups} KV cache groups, sliding windows on: {m['source']}"

    @field_validator("limit_mm_per_prompt")
    @classmethod
    def _mm(cls, v: dict[str, int]) -> dict[str, int]:
        return checks.check_mm_limits(v)

    def tpu_inference_env(self) -> dict[str, str]:
        """Environment for the container: only values that differ from the engine's defaults."""
        env: dict[str, str] = {}
        if self.attn_bucketized_num_reqs:
            env["ATTN_BUCKETIZED_NUM_REQS"] = "1"
        if self.slice_rope_cache:
            env["SLICE_ROPE_CACHE"] = "1"
        if self.num_precompile_workers != 1:
            env["NUM_PRECOMPILE_WORKERS"] = str(self.num_precompile_workers)
        if self.vllm_tpu_bucket_padding_gap:
            env["VLLM_TPU_BUCKET_PADDING_GAP"] = str(self.vllm_tpu_bucket_padding_gap)
        if self.vllm_xla_check_recompilation:
            # DESIGN: vLLM parses it with bool(int(...)): "true" would crash the engine.
            env["VLLM_XLA_CHECK_RECOMPILATION"] = "1"
        return env

    def container_env(self) -> dict[str, str]:
        """All non-secret environment for the container: tpu-inference's plus vLLM's own."""
        # vLLM follows redirects by default (DESIGN), which would let an allowed host bounce a
        # media fetch to the metadata server; 0 keeps the allow-list meaningful.
        return {**self.tpu_inference_env(), "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0"}
