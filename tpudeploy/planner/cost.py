"""Prices per provisioning model, $/month, $/M output tokens and the spot/flex break-even."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from tpudeploy import facts
from tpudeploy.config import PRICE_KEYS, DeployConfig, normalize_provisioning
from tpudeploy.errors import UserError

HOURS_PER_MONTH = 730

SPOT = "spot"
FLEX_START = "flex-start"
ON_DEMAND = "on-demand"
COMMIT_1Y = "commit-1y"
COMMIT_3Y = "commit-3y"
# The three models this project can provision; commitments are comparison rows only.
PROVISIONING_MODELS = (SPOT, FLEX_START, ON_DEMAND)


class NoPricesError(UserError, ValueError):
    """No rate for a region or a provisioning model; the message names the config key to set."""


def _set_key(region: str, model: str) -> str:
    return (
        f"set [prices.{region}] {model} = <$ per chip-hour> (cloud.google.com/tpu/pricing) "
        f"and as_of = <the date you read it> in the config"
    )


@dataclass(frozen=True, slots=True)
class PriceTable:
    """$ per chip-hour by provisioning model, with where and when the rates were read
    (`as_of` an ISO date, or "" when the config gave rates without one)."""

    per_chip_hour: Mapping[str, float]
    region: str
    as_of: str
    source: str

    def rate(self, model: str) -> float:
        key = normalize_model(model)
        if key not in self.per_chip_hour:
            raise NoPricesError(
                f"no {key} price for region {self.region} (known: "
                f"{', '.join(self.per_chip_hour) or 'none'}): {_set_key(self.region, key)}"
            )
        return self.per_chip_hour[key]

    def has(self, model: str) -> bool:
        return normalize_model(model) in self.per_chip_hour

    def with_overrides(self, overrides: Mapping[str, object] | None) -> PriceTable:
        """A copy with the rates of a `[prices.REGION]` table replacing these (its `as_of` and
        `source` too); other keys are ignored."""
        if not overrides:
            return self
        merged = dict(self.per_chip_hour)
        for model, rate in overrides.items():
            key = normalize_model(model)
            if key not in PRICE_KEYS:
                continue
            if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
                raise ValueError(
                    f"prices.{self.region}.{model} = {rate!r}: a rate must be a positive "
                    "$/chip-hour"
                )
            merged[key] = float(rate)
        as_of = overrides.get("as_of")
        source = str(overrides.get("source") or f"[prices.{self.region}] in the config")
        if self.per_chip_hour and self.source:
            source += f", over {self.source}"
        return replace(
            self,
            per_chip_hour=MappingProxyType(merged),
            as_of=as_of.isoformat() if isinstance(as_of, datetime.date) else str(as_of or ""),
            source=source,
        )

    def age_days(self, today: datetime.date) -> int | None:
        """Days since the rates were read; None when undated."""
        if not self.as_of:
            return None
        return (today - datetime.date.fromisoformat(self.as_of)).days


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
    """The rates for the deployment's own region: the build log's where it read them, with the
    config's `[prices.REGION]` table over them. A region with neither is refused, never priced
    at another region's rates."""
    region = cfg.effective_region
    sheet = facts.PRICES.get(region)
    own = cfg.prices.get(region)
    if sheet is None and not own:
        known = ", ".join(f"{r} ({s.as_of})" for r, s in facts.PRICES.items())
        model = normalize_model(cfg.provisioning)
        raise NoPricesError(
            f"no prices for region {region}: the build log read {known} only, and rates differ "
            f"by region; {_set_key(region, model)}"
        )
    base = _table(sheet) if sheet is not None else PriceTable(MappingProxyType({}), region, "", "")
    return base.with_overrides(own)


@dataclass(frozen=True, slots=True)
class BootTimes:
    """Seconds from VM ready to serving (build log, final verification table)."""

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
    """One slice left running 24/7 (build log: $422 spot, $438 flex-start, $876 on-demand)."""
    return hourly_cost(model, chips=chips, prices=prices) * hours


def cost_per_million_tokens(
    model: str,
    output_tok_s: float = PEAK_THROUGHPUT.output_tok_s,
    *,
    chips: int = 1,
    prices: PriceTable = SEED_PRICES,
) -> float:
    """$ per million output tokens at a sustained throughput (build log: $0.107 spot at 1,496.5)."""
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
    """The build log's $/M output tokens table, one row per measured workload."""
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


def left_out(cfg: DeployConfig) -> str:
    """What the chip-hour estimate does not count, with the compile-cache bucket's monthly cost
    estimated from the archive size the build log measured."""
    region = cfg.effective_region
    size_mb = facts.COMPILE_CACHE_BYTES / 1e6
    storage = facts.STORAGE_PRICES.get(region)
    if storage is not None:
        monthly = facts.COMPILE_CACHE_BYTES / 1e9 * storage.per_gb_month
        cache = (
            f"~${monthly:.4f}/month per {size_mb:.0f} MB archive (${storage.per_gb_month}/GB-month "
            f"in {region}, as of {storage.as_of})"
        )
    else:
        known = ", ".join(
            f"{r} ${p.per_gb_month}/GB-month" for r, p in facts.STORAGE_PRICES.items()
        )
        cache = f"{size_mb:.0f} MB per archive (no Cloud Storage price for {region} here; {known})"
    parts = ["network egress (per GB leaving Google's network)"]
    if cfg.network.enable_external_ip:
        parts.append("the node's external IP address")
    elif cfg.declares_nat:
        parts.append(nat_cost_text())
    parts += [
        "its boot disk, where billed apart from the chip",
        f"Secret Manager (2 secrets, ${facts.SECRET_VERSION_PER_MONTH:.2f} per active version a "
        "month beyond the free 6)",
        f"the compile-cache bucket, which make destroy keeps: {cache}, one archive per image "
        "build and config",
    ]
    return "not counted: " + "; ".join(parts)


def rate_text(cfg: DeployConfig) -> str:
    """The deployment's chip-hour rate for a message, or what to call it when the region has
    no prices (the cost commands say why; a status line must not fail on it)."""
    try:
        rate = price_table(cfg).rate(cfg.provisioning)
    except NoPricesError:
        return "its chip-hour rate"
    return f"${rate:.4f}/chip-hour"


def nat_cost_text() -> str:
    """What the private node's Cloud NAT adds: by the hour, and by the GiB every boot pulls."""
    gateway, address = facts.CLOUD_NAT_PER_VM_HOUR, facts.CLOUD_NAT_ADDRESS_PER_HOUR
    per_gib = facts.CLOUD_NAT_PER_GIB
    checkpoint_gib = facts.CHECKPOINT_BYTES / facts.GIB
    return (
        f"Cloud NAT for the private node: ${gateway + address:.4f}/hour while the node stack "
        f"exists (${gateway}/VM-hour gateway + ${address}/hour for its address) and "
        f"${per_gib}/GiB through it: ~${checkpoint_gib * per_gib:.2f} per boot for the "
        f"{checkpoint_gib:.2f} GiB checkpoint, plus the image pull (as of {facts.CLOUD_NAT_AS_OF})"
    )
