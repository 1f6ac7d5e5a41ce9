"""What watching costs a month: the arithmetic from the rates and the assumptions, the free log
allotment, metrics counted only where they flow, and every rate tied to its source."""

from __future__ import annotations

import datetime

import pytest

from tpudeploy import watchcost
from tpudeploy.alertpolicies import declared, log_policies
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.config.prices import WATCHING_AS_OF, WATCHING_PRICES
from tpudeploy.gke.metrics import published
from tpudeploy.planner.cost import HOURS_PER_MONTH
from tpudeploy.platform import log_metrics_for, platform_for, watching_lines

TYPES = list(published().values())
GIB = 2**30


def _cfg(clients: int | None, platform: str = "tpu-vm") -> DeployConfig:
    load = {"expected_clients": clients} if clients else {}
    return parse_config({"project": "watch-cost-1", "platform": platform, "load": load})


def test_logs_grow_with_the_requests_and_are_free_within_the_allotment() -> None:
    few = watchcost.estimate(_cfg(10), metric_types=TYPES, conditions=2)
    many = watchcost.estimate(_cfg(20), metric_types=TYPES, conditions=2)
    # the requests' share doubles; the stats lines (independent of requests) stay
    per_request = watchcost.frontdoor_entry_bytes() + watchcost.VLLM_REQUEST_LINE_BYTES + 400
    extra = 10 * 60 * per_request * HOURS_PER_MONTH / GIB
    assert many.log_gib - few.log_gib == pytest.approx(extra)
    assert few.logs_usd == 0.0 and few.log_gib < 50
    flood = watchcost.estimate(_cfg(20_000), metric_types=TYPES, conditions=2)
    assert flood.log_gib > 50
    assert flood.logs_usd == pytest.approx((flood.log_gib - 50) * 0.50)


def test_every_access_log_field_has_a_typical_value() -> None:
    # A field added to the front door's log is sized, not silently left out (KeyError).
    assert watchcost.frontdoor_entry_bytes() > watchcost.ENVELOPE_BYTES + 12 * 8


def test_metrics_are_counted_per_series_and_scrape() -> None:
    histograms = TYPES.count("histogram")
    series = watchcost.vllm_series(TYPES)
    assert series == len(TYPES) - histograms + 22 * histograms
    cost = watchcost.estimate(_cfg(None), metric_types=TYPES, conditions=0)
    assert cost.samples_millions == pytest.approx(series * 730 * 3600 / 15 / 1e6)
    assert cost.metrics_usd == pytest.approx(cost.samples_millions * 0.15)
    assert cost.alerts_usd == 0.0


def test_make_check_prices_the_policies_each_platform_declares() -> None:
    vm, gke = _cfg(None), _cfg(None, "gke")
    vm_line = next(x for x in watching_lines(vm) if x.startswith("watching:"))
    gke_line = next(x for x in watching_lines(gke) if x.startswith("watching:"))
    # the PromQL policies (vLLM's metrics flow on both: the TPU VM's Ops Agent ships them), and
    # those over the log-based metrics
    for cfg, line in ((vm, vm_line), (gke, gke_line)):
        count = len(declared(platform_for(cfg).absence_grace_s(cfg))) + len(
            log_policies(cfg, tuple(log_metrics_for(cfg)))
        )
        # the deadline's "stops soon" warning, where a deadline job is declared
        count += 0 if cfg.deadline_seconds is None else 1
        assert f"{count} conditions" in line
        # the node's metrics are priced on both platforms now
        assert "vLLM metrics $0 now" not in line and "per server" in line
    assert "1 client" in vm_line and "set [load] expected_clients" in vm_line


def test_every_rate_names_its_source_and_the_day_it_was_read() -> None:
    assert datetime.date.today() >= WATCHING_AS_OF
    for price in WATCHING_PRICES:
        assert price.source.startswith("https://cloud.google.com/") and price.quote
        assert f"{price.usd:.2f}".rstrip("0").rstrip(".") in price.quote.replace("$0.", "0.")


def test_a_run_pays_the_metrics_by_the_serving_hour_not_the_month() -> None:
    # A TPU VM serves for its run (4 h by default): the line gives the hour's figure beside the
    # month's, each from the samples an hour scrapes (series x 3600 / 15 s) at $0.15 per million.
    line = next(x for x in watching_lines(_cfg(None)) if x.startswith("watching:"))
    series = watchcost.vllm_series(TYPES)
    hour = series * 3600 / 15 / 1e6 * 0.15
    assert f"(${hour:.4f} per serving hour)" in line
    assert f"${hour * 730:.2f} per server serving all month" in line


def test_the_preemption_alert_and_its_log_metric_are_listed_and_priced() -> None:
    spot = parse_config({"project": "watch-cost-1", "provisioning": "spot"})
    flex = _cfg(None)
    lines = {c.provisioning: watching_lines(c) for c in (spot, flex)}
    cost = {k: next(x for x in v if x.startswith("watching:")) for k, v in lines.items()}
    listed = {k: next(x for x in v if x.startswith("dashboard:")) for k, v in lines.items()}
    assert "A spot node was preempted" in listed["spot"] and "preemptions" in listed["spot"]
    assert "preempted" not in listed["flex-start"]
    # Spot has two conditions more than flex-start: the preemption policy, and the deadline's
    # "stops soon" (flex-start has no deadline job); and one more log-based metric.
    assert "7 conditions" in cost["spot"] and "5 conditions" in cost["flex-start"]
    assert "Deadline in 30m" in listed["spot"] and "Deadline in 30m" not in listed["flex-start"]
    assert "4 log-based metrics" in cost["spot"] and "3 log-based metrics" in cost["flex-start"]
