"""The seed build log's published benchmark sweep, KV pool and prices, kept as data with source."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

SOURCE_URL: Final = (
    "https://dev.to/gde/self-hosting-a-lite-agent-backend-on-one-tpu-"
    "gemma-4-e2b-vllm-on-a-v5e-1-fk1"
)
PUBLISHED: Final = "2026-08-09"
SETUP: Final = (
    "v5litepod-1, us-west4-a, vllm/vllm-tpu:nightly (vLLM 0.26.1rc1.dev125+ga7a204cc6), "
    "google/gemma-4-E2B-it bf16, max-model-len 32768, max-num-batched-tokens 4096"
)

CONTEXTS: Final = (128, 1024, 8192)
CLIENTS: Final = (1, 4, 16, 64)
# "All 12 cells were measured ... 3 repetitions each (36 runs)."
REPETITIONS: Final = 3


def _grid(
    rows: tuple[tuple[float, float, float, float], ...],
) -> MappingProxyType[tuple[int, int], float]:
    return MappingProxyType(
        {
            (context, clients): value
            for context, row in zip(CONTEXTS, rows, strict=True)
            for clients, value in zip(CLIENTS, row, strict=True)
        }
    )


# Keys are (context tokens, concurrent clients). Values exactly as printed in the log's tables.
AGGREGATE_TOK_S: Final = _grid(
    (
        (123.7, 433.9, 1152.5, 1496.5),
        (120.4, 415.4, 991.0, 1258.7),
        (94.2, 254.4, 399.6, 324.3),
    )
)
MEDIAN_TTFT_MS: Final = _grid(
    (
        (15.9, 31.8, 98.8, 247.3),
        (40.3, 51.5, 170.1, 421.7),
        (289.4, 304.2, 594.4, 11734.0),
    )
)
PER_STREAM_TOK_S: Final = _grid(
    (
        (125.0, 112.0, 76.0, 25.0),
        (124.0, 109.0, 69.0, 21.0),
        (119.0, 71.0, 27.0, 10.0),
    )
)
# The log marks 128-ctx/16-client TTFT with '*': cv 56% across its repetitions.
UNTRUSTWORTHY_TTFT: Final = frozenset({(128, 16)})

# "block_size 64 x 5,021 blocks = 321,344 tokens" (final configuration check table).
KV_POOL_TOKENS: Final = 321_344
# "Rule of thumb: keep clients x context < 250,000 tokens - about 78% of the 321,344-token pool."
SAFE_CLIENTS_X_CONTEXT: Final = 250_000

# Cloud Billing Catalog, us-west4, $/chip-hour, as published in the log's cost section.
PRICE_PER_CHIP_HOUR: Final = MappingProxyType(
    {"spot": 0.5779, "flex-start": 0.6000, "on-demand": 1.2000}
)
