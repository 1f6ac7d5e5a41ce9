"""The build log's published sweep, KV pool and prices: names the bench report reads them by.

Aliases only; every value is defined once in tpudeploy.facts.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from tpudeploy.facts import (
    AGGREGATE_TOK_S,
    CLIENTS,
    CONTEXTS,
    KV_POOL_TOKENS,
    MEDIAN_TTFT_MS,
    PER_STREAM_TOK_S,
    PRICES,
    PUBLISHED,
    REPETITIONS,
    SAFE_CLIENTS_X_CONTEXT,
    SETUP,
    SOURCE_URL,
    UNTRUSTWORTHY_TTFT,
)

PRICE_PER_CHIP_HOUR: Final = MappingProxyType(
    {
        model: rate
        for model, rate in PRICES["us-west4"].per_chip_hour.items()
        if model in ("spot", "flex-start", "on-demand")
    }
)

__all__ = [
    "AGGREGATE_TOK_S",
    "CLIENTS",
    "CONTEXTS",
    "KV_POOL_TOKENS",
    "MEDIAN_TTFT_MS",
    "PER_STREAM_TOK_S",
    "PRICE_PER_CHIP_HOUR",
    "PUBLISHED",
    "REPETITIONS",
    "SAFE_CLIENTS_X_CONTEXT",
    "SETUP",
    "SOURCE_URL",
    "UNTRUSTWORTHY_TTFT",
]
