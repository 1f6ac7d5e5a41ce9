"""`[model_geometry]`: the served model's layer layout, KV cache and decode traffic.

The defaults are Gemma 4 E2B (tpudeploy.facts); the planner computes on this type directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import Field

from tpudeploy import facts
from tpudeploy.config.base import Strict


class LayerType(StrEnum):
    SLIDING = "sliding"
    FULL = "full"


def _geometry(field: str) -> Any:
    return facts.GEMMA_4_E2B_GEOMETRY[field]


class ModelGeometry(Strict):
    """The served model's config.json fields the arithmetic needs, plus measured residency.

    `[model_geometry]` in the config; the defaults are Gemma 4 E2B (tpudeploy.facts). The
    planner computes on this type directly: the derived values below are the geometry's own.
    """

    num_hidden_layers: int = Field(default=_geometry("num_hidden_layers"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    # Layer i is full attention when i % every == offset (build log: `i % 5 == 4`).
    full_attention_every: int = Field(default=_geometry("full_attention_every"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    full_attention_offset: int = Field(default=_geometry("full_attention_offset"), ge=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    # The last N layers read another layer's cache (build log: "only 15 layers own a cache").
    num_kv_shared_layers: int = Field(default=_geometry("num_kv_shared_layers"), ge=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    num_attention_heads: int = Field(default=_geometry("num_attention_heads"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    num_key_value_heads: int = Field(default=_geometry("num_key_value_heads"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    head_dim: int = Field(default=_geometry("head_dim"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    global_head_dim: int = Field(default=_geometry("global_head_dim"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    hidden_size: int = Field(default=_geometry("hidden_size"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    intermediate_size: int = Field(default=_geometry("intermediate_size"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    vocab_size: int = Field(default=_geometry("vocab_size"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    hidden_size_per_layer_input: int = Field(default=_geometry("hidden_size_per_layer_input"), ge=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    sliding_window: int = Field(default=_geometry("sliding_window"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    # The longest context the model takes: vLLM refuses a larger --max-model-len at boot.
    max_position_embeddings: int = Field(default=_geometry("max_position_embeddings"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    param_bytes: int = Field(default=_geometry("param_bytes"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    kv_dtype_bytes: int = Field(default=_geometry("kv_dtype_bytes"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    # Measured, not derived: the engine's total_hbm_used_gb line (also holds vision/audio towers).
    resident_weight_bytes: int = Field(default=_geometry("resident_weight_bytes"), gt=0)
    """config.json field of the served model (Gemma 4 E2B's by default)"""
    # vLLM's max_tokens_per_mm_item per modality: with chunked MM input disabled, one item
    # must fit in one scheduler step.
    mm_max_tokens_per_item: dict[str, int] = Field(
        default_factory=lambda: dict(_geometry("mm_max_tokens_per_item"))
    )
    """config.json field of the served model (Gemma 4 E2B's by default)"""

    def mm_item_floor(self, limit_mm_per_prompt: Mapping[str, int]) -> int:
        """Largest single item among the enabled modalities (0 when none are enabled)."""
        return max(
            (
                self.mm_max_tokens_per_item.get(modality, 0)
                for modality, limit in limit_mm_per_prompt.items()
                if limit > 0
            ),
            default=0,
        )

    def layer_type(self, index: int) -> LayerType:
        if index % self.full_attention_every == self.full_attention_offset:
            return LayerType.FULL
        return LayerType.SLIDING

    @property
    def layer_types(self) -> tuple[LayerType, ...]:
        return tuple(self.layer_type(i) for i in range(self.num_hidden_layers))

    @property
    def first_shared_layer(self) -> int:
        return self.num_hidden_layers - self.num_kv_shared_layers

    @property
    def cache_owning_layers(self) -> tuple[int, ...]:
        return tuple(range(self.first_shared_layer))

    def kv_source_layer(self, index: int) -> int:
        """The layer whose cache `index` reads: itself, or the last earlier owner of its type."""
        if index < self.first_shared_layer:
            return index
        kind = self.layer_type(index)
        for source in reversed(self.cache_owning_layers):
            if self.layer_type(source) is kind:
                return source
        raise ValueError(f"shared layer {index} has no {kind} cache to read")

    @property
    def shared_cache_sources(self) -> dict[int, int]:
        return {
            i: self.kv_source_layer(i)
            for i in range(self.first_shared_layer, self.num_hidden_layers)
        }

    def head_dim_for(self, kind: LayerType) -> int:
        # Build log trap 2: full layers run K and V at 512, not 256.
        return self.global_head_dim if kind is LayerType.FULL else self.head_dim

    def cached_layer_count(self, kind: LayerType) -> int:
        return sum(1 for i in self.cache_owning_layers if self.layer_type(i) is kind)

    def padded_kv_heads(self, tensor_parallel_size: int = 1) -> int:
        """KV heads rounded up to a multiple of TP: one head cannot be sharded (trap 5)."""
        tp = tensor_parallel_size
        return -(-self.num_key_value_heads // tp) * tp

    def kv_bytes_per_token_by_type(
        self, *, tensor_parallel_size: int = 1, kv_dtype_bytes: int | None = None
    ) -> dict[LayerType, int]:
        width = self.kv_dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
        heads = self.padded_kv_heads(tensor_parallel_size)
        # layers x heads x 2 (K and V) x head_dim x bytes, per the build log's 18 KiB.
        return {
            kind: self.cached_layer_count(kind) * heads * 2 * self.head_dim_for(kind) * width
            for kind in LayerType
        }

    def kv_bytes_per_token(
        self, *, tensor_parallel_size: int = 1, kv_dtype_bytes: int | None = None
    ) -> int:
        """Bytes of KV per token across the slice (all chips together when TP > 1)."""
        by_type = self.kv_bytes_per_token_by_type(
            tensor_parallel_size=tensor_parallel_size, kv_dtype_bytes=kv_dtype_bytes
        )
        return sum(by_type.values())

    @property
    def embedding_bytes(self) -> int:
        # Tied: lm_head reads this whole table every decode step (the build log's 0.75 GiB).
        return self.vocab_size * self.hidden_size * self.param_bytes

    @property
    def per_layer_embedding_bytes(self) -> int:
        # 262,144 x 256 x 35: gathered per token, never streamed (the build log's 4.38 GiB).
        return (
            self.vocab_size
            * self.hidden_size_per_layer_input
            * self.num_hidden_layers
            * self.param_bytes
        )

    def _layer_params(self, kind: LayerType) -> int:
        width = self.head_dim_for(kind)
        q_and_o = 2 * self.hidden_size * self.num_attention_heads * width
        k_and_v = 2 * self.hidden_size * self.num_key_value_heads * width
        gated_mlp = 3 * self.hidden_size * self.intermediate_size
        return q_and_o + k_and_v + gated_mlp

    @property
    def dense_transformer_bytes(self) -> int:
        """Attention projections and gated MLP of every layer; norms and gates are left out."""
        return self.param_bytes * sum(self._layer_params(kind) for kind in self.layer_types)

    @property
    def decode_bytes_per_step(self) -> int:
        # ~3.15 GiB moves per step = dense transformer + tied lm_head; the per-layer
        # embeddings are gathered, so they do not count against bandwidth.
        return self.dense_transformer_bytes + self.embedding_bytes
