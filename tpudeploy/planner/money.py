"""The summary's money lines, each saying what it assumes: $ per million output tokens at the
build log's best cell and at the configured [load], and what "at most $X per run" counts.

The build log measured aggregate output tok/s on a grid (facts.AGGREGATE_TOK_S: 128, 1K and 8K
tokens of context; 1, 4, 16 and 64 clients). The headline $/M is its best cell, 128 tokens at 64
clients (1,496.5 tok/s), which no agent workload of long prompts reaches. For a configured [load]
the planner reads the grid, never between its cells: the smallest measured context at or above
the expected one, and of the measured client counts around the expected one, the lower
throughput (past the KV wall more clients can mean fewer tok/s: 8K holds 399.6 at 16 clients and
324.3 at 64). A load beyond the grid (context over 8K) is not estimated, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.planner.cost import PEAK_THROUGHPUT, PriceTable, cost_per_million_tokens

# What every "at most $X per run" leaves out; planner.cost.left_out prices each.
NOT_IN_THE_RUN_FIGURE = "egress, the external IP or NAT, logs, the boot disk, secrets, the bucket"


@dataclass(frozen=True, slots=True)
class LoadCell:
    """The measured throughput the planner takes for a load, and the cells it came from."""

    context: int
    clients: tuple[int, ...]
    output_tok_s: float


def load_cell(clients: int, context: int) -> LoadCell | None:
    """The measured cell(s) for `clients` at `context`; None beyond the measured contexts."""
    contexts = [c for c in facts.CONTEXTS if c >= context]
    if not contexts:
        return None
    ctx = contexts[0]
    below = [n for n in facts.CLIENTS if n <= clients]
    above = [n for n in facts.CLIENTS if n >= clients]
    around = tuple(sorted({*(below[-1:]), *(above[:1])}))
    tok_s = min(facts.AGGREGATE_TOK_S[(ctx, n)] for n in around)
    return LoadCell(ctx, around, tok_s)


def headline_per_million(model: str, prices: PriceTable) -> str:
    """The build log's best cell at `model`'s rate, named as that."""
    peak = PEAK_THROUGHPUT
    dollars = cost_per_million_tokens(model, peak.output_tok_s, prices=prices)
    return (
        f"${dollars:.2f}/M output tokens at the build log's best cell ({peak.context} tokens of "
        f"context, {peak.clients} clients: {peak.output_tok_s:,.1f} tok/s)"
    )


def load_per_million(cfg: DeployConfig, model: str, prices: PriceTable) -> str:
    """$/M at the configured [load], with the cells it reads; what to set when there is none."""
    clients, context = cfg.load.expected_clients, cfg.load.expected_context
    if not clients or not context:
        return (
            "at your load: not estimated; set [load] expected_clients and expected_context for "
            "the $/M the planner expects there"
        )
    cell = load_cell(clients, context)
    if cell is None:
        return (
            f"at your [load] ({clients} clients at {context:,} tokens): not estimated, past the "
            f"longest measured context ({max(facts.CONTEXTS):,} tokens)"
        )
    dollars = cost_per_million_tokens(model, cell.output_tok_s, prices=prices)
    measured = " and ".join(str(n) for n in cell.clients)
    return (
        f"${dollars:.2f}/M at your [load] ({clients} clients at {context:,} tokens of context: "
        f"the measured {cell.context:,}-token cell at {measured} clients, "
        f"{cell.output_tok_s:,.1f} tok/s, the lower if two)"
    )


def per_million_line(cfg: DeployConfig, model: str, prices: PriceTable) -> str:
    """`$/M: ...`: the headline figure named as its cell, then the configured load's."""
    return (
        f"$/M ({model}): {headline_per_million(model, prices)}; "
        f"{load_per_million(cfg, model, prices)}"
    )


def run_most(hourly: float, hours: float, model: str) -> str:
    """ " (at most $X per run: ...)": what the figure counts and what it leaves out."""
    return (
        f" (at most ${hourly * hours:.2f} per run: {hours:g} h of the chip at the {model} "
        f"rate; not {NOT_IN_THE_RUN_FIGURE}: see not counted)"
    )


def ladder_lines(cfg: DeployConfig) -> list[str]:
    """A capacity ladder's rungs as `make check` shows them: each rung's rate, the quota it
    draws on, and for a rung outside the home region what reading the compile cache across
    regions costs a boot (config/ladder.py: the bucket stays in the first rung's region; Secret
    Manager's secrets are replicated automatically, global, and cost the same from any region)."""
    from tpudeploy.config.ladder import QUOTA_BY_PROVISIONING, QUOTA_SOURCE, cache_read_cost
    from tpudeploy.planner.cost import NoPricesError, hourly_cost, price_table

    if not cfg.capacity:
        return []
    parts = []
    for i, rung in enumerate(cfg.capacity):
        each = cfg.model_copy(update={"provisioning": rung.provisioning, "zone": rung.zone})
        try:
            rate = f"${hourly_cost(rung.provisioning, prices=price_table(each)):.4f}/h"
        except NoPricesError:
            rate = f"no rate for {rung.region} (set [prices.{rung.region}])"
        text = (
            f"rung {i + 1} {rung.label()}: {rate}, quota {QUOTA_BY_PROVISIONING[rung.provisioning]}"
        )
        read = cache_read_cost(cfg.home_region, rung.region)
        if read is None:
            text += (
                f", reads the compile cache from {cfg.home_region} across continents: no "
                "inter-region rate here (docs/capacity-and-cost.md)"
            )
        elif read:
            text += (
                f", reads the compile cache from {cfg.home_region}: about ${read:.4f} a boot "
                f"({facts.COMPILE_CACHE_BYTES / 1e6:.0f} MB between regions)"
            )
        parts.append(text)
    running = (cfg.rung_index or 0) + 1
    return [
        f"capacity ladder (make deploy tries these in order, now rung {running}): "
        + "; ".join(parts)
        + f" (quotas: {QUOTA_SOURCE})"
    ]
