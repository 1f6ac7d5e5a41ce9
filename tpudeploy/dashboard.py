"""The deployment's Cloud Monitoring dashboard, as the Monitoring API v1 Dashboard's JSON.

One planner for both platforms: every tile is a PromQL query over vLLM's own metrics as Cloud
Monitoring stores Prometheus metrics (prometheus.googleapis.com/<name>/<kind>, queried in PromQL
by the Prometheus name), narrowed to this deployment by the platform's label selector
(Platform.metrics_selector: GKE's Managed Prometheus labels the cluster and namespace; the TPU
VM's Ops Agent, a later slice, the scrape job). Every name a query reads is one the pinned vLLM
registers: tests/shared/test_dashboard.py checks each against tpudeploy/gke/vllm_metrics.json.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from tpudeploy.config import DeployConfig
from tpudeploy.facts import AcceleratorError
from tpudeploy.planner.capacity import TPU_PALLAS
from tpudeploy.planner.chips import lookup_accelerator
from tpudeploy.planner.cost import NoPricesError, price_table

# The build log's safe line: clients x context under ~78% of the KV pool (past it, TTFT
# explodes). vllm:kv_cache_usage_perc is a fraction of that pool, from 0 to 1.
# Three decimals, rounded down: a line drawn or alerted on just past the wall would be late.
KV_WALL = math.floor(TPU_PALLAS.safe_pool_fraction * 1000) / 1000
# The window each rate and quantile averages over: four scrapes at GKE's 15 s interval at least
# (tpudeploy/gke/manifests.pod_monitoring), so one missed scrape does not blank a line.
WINDOW = "5m"
# Monitoring API v1, MosaicLayout: "The number of columns in the mosaic grid ... must be less
# than or equal to 48" (monitoring.v1 discovery document, MosaicLayout.columns).
COLUMNS = 48
TILE_WIDTH, TILE_HEIGHT = 24, 16

# prometheus_client writes a counter's samples as <name>_total and a histogram's as _bucket,
# _sum and _count (prometheus_client/exposition.py); vLLM's source registers the bare name.
_SUFFIXES = ("_total", "_bucket", "_sum", "_count")
_SERIES = re.compile(r"vllm:[a-zA-Z0-9_:]+")


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    # (legend, PromQL with {sel} where the deployment's selector goes)
    lines: tuple[tuple[str, str], ...]
    unit: str = ""
    kv_wall: bool = False


def registered_name(series: str) -> str:
    """vllm:generation_tokens_total -> vllm:generation_tokens (the name vLLM registers)."""
    for suffix in _SUFFIXES:
        if series.endswith(suffix):
            return series.removesuffix(suffix)
    return series


def series_in(query: str) -> list[str]:
    """Every vLLM series a PromQL query names."""
    return _SERIES.findall(query)


def _quantiles(metric: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        (
            f"p{q}",
            f"histogram_quantile(0.{q}, sum by (le) (rate({metric}_bucket{{sel}}[{WINDOW}])))",
        )
        for q in (50, 90, 99)
    )


CHARTS: tuple[Chart, ...] = (
    Chart(
        "Output tokens/s",
        (("output tok/s", f"sum(rate(vllm:generation_tokens_total{{sel}}[{WINDOW}]))"),),
        "1/s",
    ),
    Chart("Time to first token (TTFT)", _quantiles("vllm:time_to_first_token_seconds"), "s"),
    Chart(
        "Time per output token (TPOT)",
        _quantiles("vllm:request_time_per_output_token_seconds"),
        "s",
    ),
    Chart(
        "Requests running and waiting",
        (
            ("running", "sum(vllm:num_requests_running{sel})"),
            ("waiting", "sum(vllm:num_requests_waiting{sel})"),
        ),
    ),
    Chart(
        "KV cache use (the line: the KV wall)",
        (("KV use, fullest server", "max(vllm:kv_cache_usage_perc{sel})"),),
        "10^2.%",
        kv_wall=True,
    ),
    Chart(
        "Prefix-cache hit rate",
        (
            (
                "hits / queries",
                f"sum(rate(vllm:prefix_cache_hits_total{{sel}}[{WINDOW}])) / "
                f"sum(rate(vllm:prefix_cache_queries_total{{sel}}[{WINDOW}]))",
            ),
        ),
        "10^2.%",
    ),
    Chart(
        # One series per scraped vLLM: GKE's replicas; the TPU VM's one node (1 up, 0 down).
        "vLLM servers reporting (replicas)",
        (("servers", "count(vllm:num_requests_running{sel})"),),
    ),
)
# The cost scorecard: servers reporting x chips per server x the chip-hour rate.
SERVERS_QUERY = "count(vllm:num_requests_running{sel})"


def query(template: str, selector: str) -> str:
    """A PromQL template with this deployment's label selector in place of {sel}."""
    return template.replace("{sel}", "{" + selector + "}")


def _xy(chart: Chart, selector: str) -> dict[str, Any]:
    xy: dict[str, Any] = {
        "dataSets": [
            {
                "timeSeriesQuery": {
                    "prometheusQuery": query(promql, selector),
                    **({"unitOverride": chart.unit} if chart.unit else {}),
                },
                "plotType": "LINE",
                "legendTemplate": legend,
            }
            for legend, promql in chart.lines
        ]
    }
    if chart.kv_wall:
        xy["thresholds"] = [
            {
                "label": f"KV wall ({KV_WALL:.0%} of the pool, the build log's safe line)",
                "value": KV_WALL,
                "color": "RED",
                "direction": "ABOVE",
            }
        ]
    return {"title": chart.title, "xyChart": xy}


def hourly_rate(cfg: DeployConfig) -> tuple[float, int, str] | None:
    """($/chip-hour, chips per server, where the rate comes from), or None without prices."""
    try:
        table = price_table(cfg)
        rate = table.rate(cfg.provisioning)
        chips = lookup_accelerator(cfg.accelerator_type).chips
    except (NoPricesError, AcceleratorError):
        return None
    return rate, chips, f"the planner's {cfg.provisioning} price table for {cfg.region}"


def _cost_tiles(cfg: DeployConfig, selector: str) -> list[dict[str, Any]]:
    rate = hourly_rate(cfg)
    if rate is None:
        text = (
            f"Cost now: not estimated, the planner has no {cfg.provisioning} price for "
            f"{cfg.region} (make check says why)."
        )
        return [{"title": "Cost now", "text": {"content": text, "format": "MARKDOWN"}}]
    per_chip, chips, source = rate
    text = (
        f"**Cost now** = servers reporting x {chips} chip(s) x ${per_chip:.4f}/chip-hour "
        f"({source}). Chips only: NAT, disks, logs and the idle floor are not counted here "
        "(make check lists them)."
    )
    scorecard = {
        "title": "Cost now ($/hour, chips)",
        "scorecard": {
            "timeSeriesQuery": {
                "prometheusQuery": f"{query(SERVERS_QUERY, selector)} * {chips * per_chip:.4f}",
                "unitOverride": "USD/h",
            }
        },
    }
    # $/M output tokens at the measured rate: the chips' $/hour over the tokens an hour the
    # servers put out now (5-minute rate). It assumes the chips bill exactly while a server
    # reports, and draws nothing while no token flows (a division by zero).
    per_million = {
        "title": "Cost per million output tokens (USD, at the measured rate)",
        "scorecard": {
            "timeSeriesQuery": {
                "prometheusQuery": (
                    f"{query(SERVERS_QUERY, selector)} * {chips * per_chip:.4f} / "
                    f"(sum(rate(vllm:generation_tokens_total{{{selector}}}[{WINDOW}])) * 3600)"
                    " * 1e6"
                ),
                "unitOverride": "USD",
            }
        },
    }
    source_tile = {"title": "Cost now: source", "text": {"content": text, "format": "MARKDOWN"}}
    return [scorecard, per_million, source_tile]


def display_name(cfg: DeployConfig) -> str:
    """The dashboard's name: the deployment's, so two deployments never share one."""
    return f"{cfg.name}: vLLM {cfg.vllm.served_model_name}"


def dashboard(
    cfg: DeployConfig, *, selector: str, extra: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The Dashboard resource (Monitoring API v1) for this deployment; `extra`: more widgets
    (the log-based metrics' tiles, tpudeploy/logmetrics.py)."""
    widgets = [_xy(chart, selector) for chart in CHARTS] + _cost_tiles(cfg, selector)
    widgets += extra or []
    tiles = []
    for i, widget in enumerate(widgets):
        tiles.append(
            {
                "xPos": (i % 2) * TILE_WIDTH,
                "yPos": (i // 2) * TILE_HEIGHT,
                "width": TILE_WIDTH,
                "height": TILE_HEIGHT,
                "widget": widget,
            }
        )
    return {
        "displayName": display_name(cfg),
        "labels": {"deployment": cfg.name},
        "mosaicLayout": {"columns": COLUMNS, "tiles": tiles},
    }


def dashboard_json(
    cfg: DeployConfig, *, selector: str, extra: list[dict[str, Any]] | None = None
) -> str:
    return json.dumps(dashboard(cfg, selector=selector, extra=extra), sort_keys=True)


def queries(document: dict[str, Any]) -> list[str]:
    """Every PromQL query in a dashboard or alert policy document, wherever it stands."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("prometheusQuery", "query") and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(document)
    return found


def console_url(project: str, dashboard_id: str) -> str:
    return (
        f"https://console.cloud.google.com/monitoring/dashboards/builder/{dashboard_id}"
        f"?project={project}"
    )
