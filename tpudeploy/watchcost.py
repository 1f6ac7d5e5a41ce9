"""What watching a deployment adds per month: its logs, vLLM's metrics, its alert policies, at
Google Cloud Observability's prices (tpudeploy/config/prices.py, each with its source and the
day it was read) and the default retention (30 days of logs are in the storage price).

An estimate, and it says what it assumes: how many requests an hour ([load] expected_clients,
each sending one request a minute; 1 client without it), how large a log entry is (the front
door's JSON line at typical values, plus the entry's envelope), how many series vLLM exposes and
how often they are scraped. `make check` prints it (platform.watching_lines).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tpudeploy import frontdoor_log
from tpudeploy.config import DeployConfig
from tpudeploy.config.prices import (
    ALERT_CONDITION,
    ALERT_SERIES,
    LOG_STORAGE,
    PROMETHEUS_SAMPLES,
    WATCHING_AS_OF,
)
from tpudeploy.planner.cost import HOURS_PER_MONTH

GIB = 2**30
# Assumed: a LogEntry's fields beside the payload (logName, resource and its labels,
# timestamp, receiveTimestamp, insertId, the deployment label) take about this many bytes.
# "Storage volume counts the actual size of the log entries" (the pricing page): not the line.
ENVELOPE_BYTES = 400
# Assumed: vLLM writes one access line per request (uvicorn's "POST /v1/... 200 OK") and one
# stats line every 10 s (its log-stats interval), of about these sizes.
VLLM_REQUEST_LINE_BYTES = 120
VLLM_STATS_LINE_BYTES = 300
VLLM_STATS_PER_HOUR = 360
REQUESTS_PER_CLIENT_HOUR = 60
# Managed Prometheus scrapes each replica every 15 s (tpudeploy/gke/manifests.pod_monitoring);
# the TPU VM's agent is assumed to scrape as often.
SCRAPE_S = 15
# Assumed: a histogram exposes 20 buckets, its sum and its count; a counter or gauge one series.
HISTOGRAM_SERIES = 22
# Each alert condition is evaluated once a minute (alertpolicies.EVALUATION) and returns one
# series (every query aggregates to the deployment).
EVALUATIONS_PER_MONTH = HOURS_PER_MONTH * 60

_TYPICAL = {
    "time": "2026-12-03T08:00:00+00:00",
    "client": "ci-agent",
    "remote_addr": "10.128.0.17",
    "method": "POST",
    "path": "/v1/chat/completions",
    "status": 200,
    "request_time": 12.345,
    "upstream_response_time": "12.340",
    "bytes_sent": 2400,
    "bytes_received": 5200,
    "prompt_tokens": 1200,
    "completion_tokens": 350,
}


@dataclass(frozen=True, slots=True)
class WatchCost:
    requests_per_hour: int
    frontdoor_entry_bytes: int
    log_gib: float
    series: int
    samples_millions: float
    conditions: int

    @property
    def logs_usd(self) -> float:
        """Past the free allotment only (which the project's other logs share)."""
        return max(0.0, self.log_gib - LOG_STORAGE.free) * LOG_STORAGE.usd

    @property
    def metrics_usd(self) -> float:
        return self.samples_millions * PROMETHEUS_SAMPLES.usd

    @property
    def alerts_usd(self) -> float:
        returned = self.conditions * EVALUATIONS_PER_MONTH / 1e6
        return self.conditions * ALERT_CONDITION.usd + returned * ALERT_SERIES.usd


def frontdoor_entry_bytes() -> int:
    """One front-door entry: its JSON line at typical values, and the envelope."""
    line = {f.name: _TYPICAL[f.name] for f in frontdoor_log.ACCESS_LOG_FIELDS}
    return len(json.dumps(line, separators=(",", ":"))) + ENVELOPE_BYTES


def vllm_series(metric_types: list[str]) -> int:
    """Series one vLLM server exposes, from the pinned version's registered metrics' types."""
    return sum(HISTOGRAM_SERIES if t == "histogram" else 1 for t in metric_types)


def estimate(cfg: DeployConfig, *, metric_types: list[str], conditions: int) -> WatchCost:
    requests = (cfg.load.expected_clients or 1) * REQUESTS_PER_CLIENT_HOUR
    door = frontdoor_entry_bytes()
    vllm = requests * (VLLM_REQUEST_LINE_BYTES + ENVELOPE_BYTES) + VLLM_STATS_PER_HOUR * (
        VLLM_STATS_LINE_BYTES + ENVELOPE_BYTES
    )
    log_gib = (requests * door + vllm) * HOURS_PER_MONTH / GIB
    series = vllm_series(metric_types)
    samples = series * HOURS_PER_MONTH * 3600 / SCRAPE_S / 1e6
    return WatchCost(requests, door, log_gib, series, samples, conditions)


def line(cfg: DeployConfig, *, metric_types: list[str], conditions: int, log_metrics: int) -> str:
    """The `make check` line: per month, each part, what it assumes, where the prices are
    (vLLM's metrics reach Cloud Monitoring on both platforms: GKE's Managed Prometheus, the TPU
    VM's Ops Agent)."""
    cost = estimate(cfg, metric_types=metric_types, conditions=conditions)
    clients = cfg.load.expected_clients
    assumed = (
        f"{cost.requests_per_hour:,} requests/hour ([load] expected_clients = {clients}, one "
        "request a minute each)"
        if clients
        else f"{cost.requests_per_hour} requests/hour (1 client, one a minute: set [load] "
        "expected_clients)"
    )
    # A TPU VM serves for its run only (4 h by default): the hour's figure is what a run pays;
    # the month's total assumes a server that serves all month.
    metrics = (
        f"vLLM metrics ${cost.metrics_usd:.2f} per server serving all month "
        f"(${cost.metrics_usd / HOURS_PER_MONTH:.4f} per serving hour)"
    )
    total = cost.logs_usd + cost.metrics_usd + cost.alerts_usd
    return (
        f"watching: ~${total:,.2f}/month: logs {cost.log_gib:.2f} GiB/month "
        f"(${cost.logs_usd:.2f}: the first {LOG_STORAGE.free:.0f} GiB/project are free, shared "
        f"with the project's other logs; 30 days kept), {metrics} ({cost.series} series every "
        f"{SCRAPE_S} s, {cost.samples_millions:.1f}M "
        f"samples at ${PROMETHEUS_SAMPLES.usd}/M), alerts ${cost.alerts_usd:.2f} "
        f"({cost.conditions} conditions at ${ALERT_CONDITION.usd:.2f}), {log_metrics} log-based "
        "metrics (their points not priced: the bytes a point counts were not found), dashboard "
        "free; assumes "
        f"{assumed}, {cost.frontdoor_entry_bytes} bytes per front-door entry; prices read "
        f"{WATCHING_AS_OF.isoformat()} (cloud.google.com/stackdriver/pricing, "
        "cloud.google.com/monitoring/alerts/cost-control)"
    )
