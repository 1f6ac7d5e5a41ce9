"""Prices per provisioning model, $/month, $/M output tokens and the spot/flex break-even."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from tpudeploy import facts
from tpudeploy.config import DeployConfig, normalize_provisioning

HOURS_PER_MONTH = 730

SPOT = "spot"
FLEX_START = "flex-start"
ON_DEMAND = "on-demand"
COMMIT_1Y = "commit-1y"
COMMIT_3Y = "commit-3y"
# The three models this project can provision; commitments are comparison rows only.
PROVISIONING_MODELS = (SPOT, FLEX_START, ON_DEMAND)


@dataclass(frozen=True, slots=True)
class PriceTable:
    """$ per chip-hour by provisioning model, with where and when the rates were read."""

    per_chip_hour: Mapping[str, float]
    region: str
    as_of: str
    source: str

    def rate(self, model: str) -> float:
        key = normalize_model(model)
        if key not in self.per_chip_hour:
            known = ", ".join(self.per_chip_hour)
            raise ValueError(f"prices: no rate for provisioning model {model!r}; known: {known}")
        return self.per_chip_hour[key]

    def with_overrides(self, overrides: Mapping[str, float] | None) -> PriceTable:
        """A copy with `[prices]` entries replacing the seed's rates (e.g. another region)."""
        if not overrides:
            return self
        merged = dict(self.per_chip_hour)
        for model, rate in overrides.items():
            if not rate > 0:
                raise ValueError(
                    f"prices.{model} = {rate!r}: a rate must be a positive $/chip-hour; "
                    f"the seed's us-west4 rate is {merged.get(normalize_model(model))}"
                )
            merged[normalize_model(model)] = float(rate)
        return replace(self, per_chip_hour=MappingProxyType(merged), source="overridden")


def normalize_model(model: str) -> str:
    """Accept 'flex_start', 'FLEX_START' (the TPU API's spelling) and 'flex-start' alike."""
    return normalize_provisioning(model)


def _table(sheet: facts.PriceSheet) -> PriceTable:
    return PriceTable(
        per_chip_hour=sheet.per_chip_hour,
        region=sheet.region,
        as_of=sheet.as_of,
        source=sheet.source,
    )


# The build log's region: the cost table and the break-even reproduce its figures.
SEED_PRICES = _table(facts.PRICES["us-west4"])


def price_table(cfg: DeployConfig) -> PriceTable:
    """The rates for the deployment's region with its [prices] overrides."""
    sheet = facts.PRICES.get(cfg.effective_region)
    base = _table(sheet) if sheet is not None else SEED_PRICES
    return base.with_overrides(cfg.prices)


@dataclass(frozen=True, slots=True)
class BootTimes:
    """Seconds from VM ready to serving (seed, final verification table)."""

    cold_s: float = facts.COLD_BOOT_S
    compile_s: float = facts.COMPILE_S
    # With ~/.cache/vllm mounted: the JAX compile cache survives the container.
    warm_s: float = facts.WARM_BOOT_S


SEED_BOOT = BootTimes()


@dataclass(frozen=True, slots=True)
class ThroughputPoint:
    label: str
    context: int
    clients: int
    output_tok_s: float


# The build log's $/M-token table rows: measured aggregate output tok/s (3 reps, cv <= 3.4%).
SEED_THROUGHPUT: tuple[ThroughputPoint, ...] = tuple(
    ThroughputPoint(label, context, clients, facts.AGGREGATE_TOK_S[(context, clients)])
    for label, context, clients in facts.COST_TABLE_CELLS
)
PEAK_THROUGHPUT = max(SEED_THROUGHPUT, key=lambda p: p.output_tok_s)


def hourly_cost(model: str, *, chips: int = 1, prices: PriceTable = SEED_PRICES) -> float:
    return prices.rate(model) * chips


def monthly_cost(
    model: str,
    *,
    chips: int = 1,
    prices: PriceTable = SEED_PRICES,
    hours: float = HOURS_PER_MONTH,
) -> float:
    """One slice left running 24/7 (seed: $422 spot, $438 flex-start, $876 on-demand)."""
    return hourly_cost(model, chips=chips, prices=prices) * hours


def cost_per_million_tokens(
    model: str,
    output_tok_s: float = PEAK_THROUGHPUT.output_tok_s,
    *,
    chips: int = 1,
    prices: PriceTable = SEED_PRICES,
) -> float:
    """$ per million output tokens at a sustained throughput (seed: $0.107 spot at 1,496.5)."""
    if output_tok_s <= 0:
        raise ValueError(f"throughput {output_tok_s!r} tok/s must be positive")
    tokens_per_hour = output_tok_s * 3600
    return hourly_cost(model, chips=chips, prices=prices) / tokens_per_hour * 1e6


@dataclass(frozen=True, slots=True)
class BreakEven:
    rebuild_s: float
    rebuild_cost: float
    premium_per_hour: float
    interval_h: float


def preemption_break_even(
    rebuild_s: float,
    *,
    chips: int = 1,
    prices: PriceTable = SEED_PRICES,
) -> BreakEven:
    """Spot wins only while preemptions are rarer than rebuild cost / flex-start premium."""
    spot = hourly_cost(SPOT, chips=chips, prices=prices)
    premium = hourly_cost(FLEX_START, chips=chips, prices=prices) - spot
    # A preemption wastes the whole rebuild at the spot rate (seed: $0.1376 cold).
    rebuild_cost = spot * rebuild_s / 3600
    interval = rebuild_cost / premium if premium > 0 else float("inf")
    return BreakEven(rebuild_s, rebuild_cost, premium, interval)


@dataclass(frozen=True, slots=True)
class CostRow:
    point: ThroughputPoint
    per_million: dict[str, float] = field(default_factory=dict)


def cost_rows(
    *,
    models: tuple[str, ...] = PROVISIONING_MODELS,
    points: tuple[ThroughputPoint, ...] = SEED_THROUGHPUT,
    chips: int = 1,
    prices: PriceTable = SEED_PRICES,
) -> list[CostRow]:
    """The seed's $/M output tokens table, one row per measured workload."""
    return [
        CostRow(
            point,
            {
                m: cost_per_million_tokens(m, point.output_tok_s, chips=chips, prices=prices)
                for m in models
            },
        )
        for point in points
    ]
