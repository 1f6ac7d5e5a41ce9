"""Cost arithmetic reproduces the seed's $/month, $/M tokens table and break-evens."""

from __future__ import annotations

import datetime

import pytest

from tpudeploy import facts
from tpudeploy.config import parse_config
from tpudeploy.planner.cost import (
    FLEX_START,
    ON_DEMAND,
    SEED_BOOT,
    SEED_PRICES,
    SEED_THROUGHPUT,
    SPOT,
    NoPricesError,
    cost_per_million_tokens,
    cost_rows,
    hourly_cost,
    left_out,
    monthly_cost,
    preemption_break_even,
    price_table,
)
from tpudeploy.planner.tables import cost_table, synth_summary

# Seed, cost-per-million table: (tok/s, spot, flex-start, on-demand).
SEED_COST_TABLE = [
    (1496.5, 0.107, 0.111, 0.223),
    (1258.7, 0.128, 0.132, 0.265),
    (991.0, 0.162, 0.168, 0.336),
    (399.6, 0.402, 0.417, 0.834),
    (123.7, 1.298, 1.347, 2.695),
]


@pytest.mark.parametrize(("model", "dollars"), [(SPOT, 422), (FLEX_START, 438), (ON_DEMAND, 876)])
def test_monthly_cost(model: str, dollars: int) -> None:
    assert round(monthly_cost(model)) == dollars


@pytest.mark.parametrize(("tok_s", "spot", "flex", "on_demand"), SEED_COST_TABLE)
def test_cost_per_million(tok_s: float, spot: float, flex: float, on_demand: float) -> None:
    assert round(cost_per_million_tokens(SPOT, tok_s), 3) == spot
    assert round(cost_per_million_tokens(FLEX_START, tok_s), 3) == flex
    assert round(cost_per_million_tokens(ON_DEMAND, tok_s), 3) == on_demand


def test_default_throughput_is_the_seed_peak() -> None:
    assert round(cost_per_million_tokens(SPOT), 3) == 0.107
    rows = cost_rows()
    assert [r.point.output_tok_s for r in rows] == [t[0] for t in SEED_COST_TABLE]


def test_batching_beats_pricing() -> None:
    # Seed: 1 -> 64 clients is 12.1x per token, on-demand vs spot only 2.08x.
    one, peak = SEED_THROUGHPUT[-1], SEED_THROUGHPUT[0]
    ratio = cost_per_million_tokens(SPOT, one.output_tok_s) / cost_per_million_tokens(
        SPOT, peak.output_tok_s
    )
    assert round(ratio, 1) == 12.1
    assert round(hourly_cost(ON_DEMAND) / hourly_cost(SPOT), 2) == 2.08


def test_break_even_cold_and_warm() -> None:
    cold = preemption_break_even(SEED_BOOT.cold_s)
    warm = preemption_break_even(SEED_BOOT.warm_s)
    assert round(cold.rebuild_cost, 4) == 0.1376
    assert round(warm.rebuild_cost, 4) == 0.0798
    assert round(cold.premium_per_hour, 4) == 0.0221
    assert round(cold.interval_h, 1) == 6.2
    assert round(warm.interval_h, 1) == 3.6
    assert SEED_BOOT.compile_s / SEED_BOOT.cold_s == pytest.approx(0.80, abs=0.01)


def test_chips_multiply_and_overrides_replace() -> None:
    assert hourly_cost(SPOT, chips=4) == pytest.approx(4 * 0.5779)
    prices = SEED_PRICES.with_overrides({"flex_start": 0.7})
    assert hourly_cost(FLEX_START, prices=prices) == 0.7
    assert hourly_cost(SPOT, prices=prices) == 0.5779
    assert SEED_PRICES.rate("FLEX_START") == 0.6
    with pytest.raises(ValueError, match=r"prices\.us-west4\.spot"):
        SEED_PRICES.with_overrides({"spot": 0})
    with pytest.raises(ValueError, match=r"no reserved-forever price for region us-west4"):
        SEED_PRICES.rate("reserved-forever")


def test_cost_table_and_summary() -> None:
    text = cost_table()
    for fragment in ("$0.107", "$0.111", "$0.223", "422", "438", "876", "6.2 h", "3.6 h"):
        assert fragment in text
    flex = synth_summary()
    assert flex[0].startswith("cost: $0.6000/h (flex-start")
    assert "max run duration 4 h" in flex[1]
    spot = synth_summary(parse_config({"provisioning": "spot"}))
    assert "deadline" in spot[1] and "NOTHING" not in spot[1]
    # A preemption's cost against flex-start, cold and warm: the build log's 6.2 h and 3.6 h.
    assert "3.6 h" in spot[-1] and "6.2 h" in spot[-1]
    forever = synth_summary(parse_config({"provisioning": "on-demand", "max_run_duration": "none"}))
    assert "make destroy" in forever[1] and "NOTHING" in forever[1] and "$876/month" in forever[1]
    assert flex[-2].startswith("KV pool: 321,")
    loaded = synth_summary(parse_config({"load": {"expected_context": 8192}}))
    assert "8,192 tokens" in loaded[-1]


# ---- prices for the zone the user chose (issue 15, item 5) ------------------------------------


@pytest.mark.parametrize(
    ("zone", "provisioning"),
    [("europe-west4-b", "spot"), ("us-central1-a", "flex-start"), ("us-south1-a", "on-demand")],
)
def test_a_region_without_prices_is_refused_naming_the_key(zone: str, provisioning: str) -> None:
    cfg = parse_config({"zone": zone, "provisioning": provisioning})
    region = zone.rsplit("-", 1)[0]
    with pytest.raises(NoPricesError) as info:
        price_table(cfg)
    assert f"no prices for region {region}" in str(info.value)
    assert f"set [prices.{region}] {provisioning} = <$ per chip-hour>" in str(info.value)
    # The synth summary says the same instead of a us-west4 figure.
    summary = synth_summary(cfg)
    assert summary[0].startswith(f"cost: not estimated: no prices for region {region}")
    assert "$" not in summary[1]
    assert not any("0.5779" in line or "0.6000" in line or "1.2000" in line for line in summary)


def test_a_region_table_prices_that_region_dated() -> None:
    cfg = parse_config(
        {
            "zone": "europe-west4-b",
            "provisioning": "spot",
            "prices": {"europe-west4": {"spot": 0.5, "as_of": datetime.date(2026, 9, 1)}},
        }
    )
    prices = price_table(cfg)
    assert prices.region == "europe-west4" and dict(prices.per_chip_hour) == {"spot": 0.5}
    summary = synth_summary(cfg, today=datetime.date(2026, 10, 1))
    assert summary[0] == (
        "cost: $0.5000/h (spot, 1 chip(s), europe-west4, prices as of 2026-09-01 (30 days old))"
    )
    table = cost_table(prices=prices, today=datetime.date(2026, 10, 1))
    assert "[prices.europe-west4] in the config, as of 2026-09-01 (30 days old)" in table
    # Only what the table has: no flex-start column, no break-even without its rate.
    assert "flex-start" not in table and "break-even" not in table
    # Another provisioning model in that region has no rate: refused, naming the key.
    flex = cfg.model_copy(update={"provisioning": "flex-start"})
    assert synth_summary(flex)[0].startswith(
        "cost: not estimated: no flex-start price for region europe-west4"
    )


def test_a_region_table_never_prices_another_region() -> None:
    cfg = parse_config(
        {
            "zone": "europe-west4-b",
            "provisioning": "spot",
            "prices": {"us-central1": {"spot": 0.55}},
        }
    )
    with pytest.raises(NoPricesError, match="no prices for region europe-west4"):
        price_table(cfg)


def test_old_prices_say_where_to_check_them() -> None:
    cfg = parse_config({})
    published = datetime.date.fromisoformat(facts.PUBLISHED)
    fresh = synth_summary(cfg, today=published + datetime.timedelta(days=10))[0]
    assert fresh.endswith("prices as of 2026-08-09 (10 days old))")
    stale = synth_summary(cfg, today=published + datetime.timedelta(days=400))[0]
    assert "(400 days old); check cloud.google.com/tpu/pricing" in stale
    assert "[prices.us-west4]" in stale


def test_the_estimate_names_what_it_leaves_out_with_the_cache_bucket_cost() -> None:
    line = left_out(parse_config({}))
    for item in ("network egress", "external IP", "boot disk", "Secret Manager"):
        assert item in line
    # 197 MB (build log) x $0.023 per GB-month (us-west4 standard storage) = $0.004531.
    assert "~$0.0045/month per 197 MB archive" in line
    assert "make destroy keeps" in line
    private = left_out(parse_config({"network": {"enable_external_ip": False}}))
    assert "external IP" not in private
    # The private node's Cloud NAT: $0.0014 gateway + $0.005 address an hour; 9.54 GiB x $0.045.
    assert "Cloud NAT for the private node: $0.0064/hour" in private
    assert "~$0.43 per boot for the 9.54 GiB checkpoint" in private
    mine = left_out(parse_config({"network": {"enable_external_ip": False, "nat": False}}))
    assert "Cloud NAT" not in mine
    elsewhere = left_out(parse_config({"zone": "europe-west4-b", "provisioning": "spot"}))
    assert "no Cloud Storage price for europe-west4 here" in elsewhere


def test_the_summary_says_who_can_reach_the_endpoint() -> None:
    (closed,) = [line for line in synth_summary() if line.startswith("endpoint:")]
    assert closed.startswith("endpoint: port 8443 (TLS proxy) open to: nobody")
    assert "make tunnel" in closed and "[network] allowed_cidrs" in closed
    opened = parse_config({"network": {"allowed_cidrs": ["203.0.113.0/24"]}})
    (line,) = [line for line in synth_summary(opened) if line.startswith("endpoint:")]
    assert line == "endpoint: port 8443 (TLS proxy) open to: 203.0.113.0/24"
