"""$ per million tokens and the clients x context line: the planner's, else the build log's."""

from __future__ import annotations

import importlib
from typing import Any

from tpudeploy import facts

# The seed's rule of thumb as a fraction of its pool (250,000 / 321,344 = 78%), so the line
# moves with the pool when the planner reports a different one.
SAFE_FRACTION = facts.SAFE_CLIENTS_X_CONTEXT / facts.KV_POOL_TOKENS


def cost_per_million(tok_s: float, price_per_hour: float) -> float:
    """$ per million output tokens at `tok_s` on a chip billed `price_per_hour`."""
    return price_per_hour / (tok_s * 3600) * 1e6


def _planner() -> Any:
    try:
        return importlib.import_module("tpudeploy.planner")
    except ImportError:
        return None


def default_prices() -> tuple[dict[str, float], str]:
    """$/chip-hour per provisioning model: tpudeploy.planner's table, else the build log's."""
    planner = _planner()
    try:
        table = planner.SEED_PRICES
        prices = {m: float(table.per_chip_hour[m]) for m in planner.PROVISIONING_MODELS}
        return prices, f"tpudeploy.planner: {table.source}, as of {table.as_of}"
    except (AttributeError, KeyError, TypeError, ValueError):
        return dict(facts.BUILD_LOG_RATES), "fallback: the build log's us-west4 prices"


def default_kv_pool(
    *, max_model_len: int | None = None, gpu_memory_utilization: float | None = None
) -> tuple[int, int, str]:
    """(pool tokens, safe line, source): tpudeploy.planner's arithmetic, else the build log's."""
    planner = _planner()
    kwargs: dict[str, Any] = {}
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    if gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
    try:
        pool = planner.kv_pool(**kwargs)
        return int(pool.tokens), int(pool.safe_tokens), "tpudeploy.planner.kv_pool"
    except (AttributeError, TypeError, ValueError):
        return (
            facts.KV_POOL_TOKENS,
            facts.SAFE_CLIENTS_X_CONTEXT,
            "fallback: the build log's measured pool",
        )


def kv_status(context: int, clients: int, *, pool: int, safe: int) -> str:
    wanted = context * clients
    if wanted > pool:
        return "over pool"
    if wanted >= safe:
        return "over safe line"
    return "ok"
