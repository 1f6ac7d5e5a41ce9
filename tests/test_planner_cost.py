"""Cost arithmetic reproduces the seed's $/month, $/M tokens table and break-evens."""

from __future__ import annotations

import pytest

from tpudeploy.config import parse_config
from tpudeploy.planner.cost import (
    FLEX_START,
    ON_DEMAND,
    SEED_BOOT,
    SEED_PRICES,
    SEED_THROUGHPUT,
    SPOT,
    cost_per_million_tokens,
    cost_rows,
    hourly_cost,
    monthly_cost,
    preemption_break_even,
)
from tpudeploy.planner.report import cost_table, synth_summary

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
    assert "make destroy" in spot[1] and "NOTHING" in spot[1]
    assert flex[-2].startswith("KV pool: 321,")
    loaded = synth_summary(parse_config({"load": {"expected_context": 8192}}))
    assert "8,192 tokens" in loaded[-1]
