"""Model geometry as data: Gemma 4 E2B's layer layout, KV cache and decode traffic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

GIB = 1024**3


class LayerType(StrEnum):
    SLIDING = "sliding"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class ModelGeometry:
    """The config.json fields the arithmetic needs, plus measured residency (seed, E2B table)."""

    name: str
    num_hidden_layers: int
    # Layer i is full attention when i % every == offset (seed: `i % 5 == 4`).
    full_attention_every: int
    full_attention_offset: int
    # The last N layers read another layer's cache (seed: "only 15 layers own a cache").
    num_kv_shared_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    global_head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    hidden_size_per_layer_input: int
    sliding_window: int
    param_bytes: int
    kv_dtype_bytes: int
    # Measured, not derived: the engine's total_hbm_used_gb line (also holds vision/audio towers).
    resident_weight_bytes: int
    # vLLM's max_tokens_per_mm_item per modality: with chunked MM input disabled, one item
    # must fit in one scheduler step.
    mm_max_tokens_per_item: Mapping[str, int]

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
        raise ValueError(f"{self.name}: shared layer {index} has no {kind} cache to read")

    @property
    def shared_cache_sources(self) -> dict[int, int]:
        return {
            i: self.kv_source_layer(i)
            for i in range(self.first_shared_layer, self.num_hidden_layers)
        }

    def head_dim_for(self, kind: LayerType) -> int:
        # Seed trap 2: full layers run K and V at 512, not 256.
        return self.global_head_dim if kind is LayerType.FULL else self.head_dim

    def cached_layer_count(self, kind: LayerType) -> int:
        return sum(1 for i in self.cache_owning_layers if self.layer_type(i) is kind)

    def padded_kv_heads(self, tensor_parallel_size: int = 1) -> int:
        """KV heads rounded up to a multiple of TP: one head cannot be sharded (seed trap 5)."""
        tp = tensor_parallel_size
        return -(-self.num_key_value_heads // tp) * tp

    def kv_bytes_per_token_by_type(
        self, *, tensor_parallel_size: int = 1, kv_dtype_bytes: int | None = None
    ) -> dict[LayerType, int]:
        width = self.kv_dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
        heads = self.padded_kv_heads(tensor_parallel_size)
        # layers x heads x 2 (K and V) x head_dim x bytes, per the seed's 18 KiB derivation.
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
        # Tied: lm_head reads this whole table every decode step (the seed's 0.75 GiB).
        return self.vocab_size * self.hidden_size * self.param_bytes

    @property
    def per_layer_embedding_bytes(self) -> int:
        # 262,144 x 256 x 35: gathered per token, never streamed (the seed's 4.38 GiB).
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
        # Seed: ~3.15 GiB moves per step = dense transformer + tied lm_head; the per-layer
        # embeddings are gathered, so they do not count against bandwidth.
        return self.dense_transformer_bytes + self.embedding_bytes


# Seed, "E2B is a strange checkpoint" table; resident 8.97 GiB from the Memory statistics line.
GEMMA_4_E2B = ModelGeometry(
    name="google/gemma-4-E2B-it",
    num_hidden_layers=35,
    full_attention_every=5,
    full_attention_offset=4,
    num_kv_shared_layers=20,
    num_attention_heads=8,
    num_key_value_heads=1,
    head_dim=256,
    global_head_dim=512,
    hidden_size=1536,
    intermediate_size=6144,
    vocab_size=262_144,
    hidden_size_per_layer_input=256,
    sliding_window=512,
    param_bytes=2,
    kv_dtype_bytes=2,
    resident_weight_bytes=round(8.97 * GIB),
    # The seed gives one figure, 2496, from vLLM's ValueError with {"image":4,"audio":1};
    # which modality sets it is not recorded, so both carry it (refuses on the safe side).
    mm_max_tokens_per_item=MappingProxyType({"image": 2496, "audio": 2496}),
)
