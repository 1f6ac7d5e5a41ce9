"""`[prices.REGION]`: $ per chip-hour where this project has no rates, each table tied to a region.

Rates differ by region, so a rate is never applied to a region it was not read for: the cost
commands use `[prices.<the deployment's region>]` over the build log's rates for that region, and
refuse to estimate a region with neither (tpudeploy.planner.cost).
"""

from __future__ import annotations

import datetime
import difflib
from dataclasses import dataclass
from typing import Any

from tpudeploy import facts, names

# Rates a table may set: the provisioning models and the commitment rows of the cost table.
PRICE_KEYS = tuple(next(iter(facts.PRICES.values())).per_chip_hour)
# The other keys of a table: when the rates were read (a TOML date) and where.
AS_OF = "as_of"
SOURCE = "source"
EXAMPLE = {"europe-west4": {"spot": 0.5, "flex-start": 0.55, AS_OF: "2026-09-01"}}


def normalize_provisioning(model: str) -> str:
    """Accept 'flex_start', 'FLEX_START' (the TPU API's spelling) and 'flex-start' alike."""
    return model.strip().lower().replace("_", "-")


def _example_table(region: str) -> str:
    return f"[prices.{region}] with spot = 0.5, flex-start = 0.55, as_of = 2026-09-01"


def check_prices(value: Any) -> dict[str, dict[str, Any]]:
    """Validate the `[prices]` tables; keys normalized, `as_of` a date. Raises ValueError whose
    message is "reason; fix" (tpudeploy.config.messages)."""
    if not isinstance(value, dict):
        raise ValueError(f"not a table; write {_example_table('REGION')}")
    checked: dict[str, dict[str, Any]] = {}
    for region, table in value.items():
        if not isinstance(table, dict):
            # The old flat form (`prices = {spot = 0.6}`) applied its rates to whatever region
            # the zone was in: a rate now says which region it was read for.
            raise ValueError(
                f"{region} = {table!r} is outside a region table: rates differ by region; "
                "write them under the region they were read for, e.g. "
                f"{_example_table('us-central1')}"
            )
        if not names.REGION_RE.fullmatch(region):
            raise ValueError(
                f"[prices.{region}] is not a region; name a region, e.g. "
                f"{_example_table('europe-west4')}"
            )
        checked[region] = _check_table(region, table)
    return checked


def _check_table(region: str, table: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in table.items():
        rate_key = normalize_provisioning(key)
        if rate_key in PRICE_KEYS:
            if isinstance(item, bool) or not isinstance(item, int | float) or not item > 0:
                raise ValueError(
                    f"[prices.{region}] {key} = {item!r} is not a positive $/chip-hour; write "
                    "a number, e.g. 0.6 for $0.60 per chip-hour"
                )
            out[rate_key] = float(item)
        elif key == AS_OF:
            out[AS_OF] = _date(region, item)
        elif key == SOURCE:
            if not isinstance(item, str):
                raise ValueError(
                    f"[prices.{region}] source = {item!r} is not text; write where you read the "
                    'rates as a string, e.g. source = "cloud.google.com/tpu/pricing"'
                )
            out[SOURCE] = item
        else:
            known = [*PRICE_KEYS, AS_OF, SOURCE]
            close = difflib.get_close_matches(rate_key, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "known: " + ", ".join(known)
            raise ValueError(f"[prices.{region}] has an unknown key {key!r}; {hint}")
    if not any(k in PRICE_KEYS for k in out):
        raise ValueError(
            f"[prices.{region}] sets no rate; add at least the provisioning model you use, "
            f"e.g. {_example_table(region)}"
        )
    return out


def _date(region: str, item: Any) -> datetime.date:
    if isinstance(item, datetime.datetime):
        return item.date()
    if isinstance(item, datetime.date):
        return item
    if isinstance(item, str):
        try:
            return datetime.date.fromisoformat(item)
        except ValueError:
            pass
    raise ValueError(
        f"[prices.{region}] as_of = {item!r} is not a date; write the day you read the rates "
        "as a TOML date, e.g. as_of = 2026-09-01"
    )


@dataclass(frozen=True, slots=True)
class WatchingPrice:
    """One rate of Google Cloud Observability that watching a deployment pays: $ per `unit`,
    the first `free` units a month free, and where and how the rate was read."""

    what: str
    usd: float
    unit: str
    free: float
    source: str
    quote: str


# The day the stored copies of Google's pricing pages below were read (search tool).
WATCHING_AS_OF = datetime.date(2026, 12, 3)
LOG_STORAGE = WatchingPrice(
    "Cloud Logging storage (a one-time charge per GiB written, 30 days' retention included)",
    0.50,
    "GiB",
    50.0,  # per project and month, shared with every other log of the project
    "https://cloud.google.com/stackdriver/pricing",
    "Logging storage* $0.50/GiB; One-time charge for streaming logs into log bucket storage "
    "... includes up to 30 days of storage in log buckets ... First 50 GiB/project/month",
)
PROMETHEUS_SAMPLES = WatchingPrice(
    "Managed Service for Prometheus samples ingested (vLLM's metrics)",
    0.15,
    "million samples",
    0.0,
    # The current page's copy stops before this row; an archived copy of the same page
    # (2023-06-05) has it. A third-party page quotes $0.06: the higher, Google's, is used.
    "https://cloud.google.com/stackdriver/pricing (archived copy of 2023-06-05)",
    "Metrics ingested by using Google Cloud Managed Service for Prometheus ... $0.15/million "
    "samples: first 0-50 billion samples ingested",
)
ALERT_CONDITION = WatchingPrice(
    "alerting: each condition of an alert policy",
    1.50,
    "condition-month",
    0.0,
    "https://cloud.google.com/monitoring/alerts/cost-control",
    "Condition cost: 1 condition * $1.50 per month = $1.50 per month",
)
ALERT_SERIES = WatchingPrice(
    "alerting: time series a condition's query returns",
    0.35,
    "million time series",
    0.0,
    "https://cloud.google.com/monitoring/alerts/cost-control",
    "8.6 million time series returned per month * $0.35 per million time series",
)
WATCHING_PRICES = (LOG_STORAGE, PROMETHEUS_SAMPLES, ALERT_CONDITION, ALERT_SERIES)
