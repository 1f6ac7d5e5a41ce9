"""The summary's money figures say what they assume (issue 39, honest money): the headline $/M is
named as the build log's best cell, the configured [load] gets its own $/M from the measured grid,
and "at most $X per run" says what it counts and what it leaves out."""

from __future__ import annotations

import pytest

from tpudeploy import facts
from tpudeploy.config import parse_config
from tpudeploy.planner import hourly_cost, synth_summary

NEWCOMER = {"expected_clients": 20, "expected_context": 8192}


def _line(lines: list[str], prefix: str) -> str:
    found = [line for line in lines if line.startswith(prefix)]
    assert len(found) == 1, lines
    return found[0]


@pytest.mark.parametrize("model", ["flex-start", "spot", "on-demand"])
def test_the_run_figure_names_what_it_counts_and_leaves_out(model: str) -> None:
    cfg = parse_config({"provisioning": model})
    hours = (cfg.max_run_duration_seconds or 0) / 3600
    stops = _line(synth_summary(cfg), "billing stops:")
    most = hourly_cost(model) * hours
    assert f"(at most ${most:.2f} per run: {hours:g} h of the chip at the {model} rate; " in stops
    for left_out in ("egress", "logs", "the boot disk", "the bucket"):
        assert left_out in stops


def test_the_headline_per_million_is_named_as_the_best_measured_cell() -> None:
    line = _line(synth_summary(parse_config({})), "$/M")
    best = facts.AGGREGATE_TOK_S[(128, 64)]
    dollars = hourly_cost("flex-start") / (best * 3600) * 1e6
    assert f"${dollars:.2f}/M output tokens at the build log's best cell (128 tokens" in line
    assert "64 clients" in line and f"{best:,.1f} tok/s" in line
    assert "set [load] expected_clients and expected_context" in line


@pytest.mark.parametrize("model", ["flex-start", "spot"])
def test_the_configured_load_gets_the_planners_per_million(model: str) -> None:
    """20 agents at 8K: between the measured 16- and 64-client cells at 8K the lower throughput
    (the 64-client cell is past the KV wall)."""
    cfg = parse_config({"provisioning": model, "load": NEWCOMER})
    line = _line(synth_summary(cfg), "$/M")
    slower = min(facts.AGGREGATE_TOK_S[(8192, 16)], facts.AGGREGATE_TOK_S[(8192, 64)])
    dollars = hourly_cost(model) / (slower * 3600) * 1e6
    assert f"${dollars:.2f}/M at your [load] (20 clients at 8,192 tokens of context" in line
    assert "at 16 and 64 clients" in line


def test_a_load_past_the_measured_contexts_is_not_estimated() -> None:
    cfg = parse_config({"load": {"expected_clients": 4, "expected_context": 16384}})
    assert "not estimated, past the longest measured context" in _line(synth_summary(cfg), "$/M")


def test_make_check_shows_each_rung_its_rate_quota_and_cross_region_read() -> None:
    from tpudeploy.config.ladder import GCS_INTER_REGION_NA_PER_GIB

    cfg = parse_config(
        {
            "capacity": [
                {"provisioning": "spot", "zone": "us-west4-a"},
                {"provisioning": "on-demand", "zone": "us-central1-a"},
            ]
        }
    )
    line = _line(synth_summary(cfg), "capacity ladder")
    assert f"rung 1 spot in us-west4-a: ${hourly_cost('spot'):.4f}/h, quota " in line
    assert "tpu-v5s-litepod-serving-preemptible" in line  # spot's own quota, by name
    assert "rung 2 on-demand in us-central1-a: no rate for us-central1" in line
    assert "quota tpu-v5s-litepod-serving," in line
    read = facts.COMPILE_CACHE_BYTES / 2**30 * GCS_INTER_REGION_NA_PER_GIB
    assert f"reads the compile cache from us-west4: about ${read:.4f} a boot" in line


def test_the_capacity_doc_quotes_the_planners_figure_for_20_agents_at_8k() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "capacity-and-cost.md").read_text()
    text = " ".join(doc.split())
    for model in ("flex-start", "spot"):
        cfg = parse_config({"provisioning": model, "load": NEWCOMER})
        line = _line(synth_summary(cfg), "$/M")
        figure = line.split("; ")[-1].split("/M at your")[0]
        assert f"{figure}/M on {model}" in text, figure
