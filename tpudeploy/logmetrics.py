"""The deployment's log-based metrics, as the Logging API v2 LogMetric's JSON
(google_logging_metric), and their names as PromQL reads them.

Over the front door's log: requests by client and status (errors and 429s by client). Over the
node's boot log (TPU VM; GKE writes no structured boot log, Platform.log_metric_filter says
None): each phase's duration and the boot-log check's disagreements with the planner. Every
name carries the deployment's, so two deployments in one project never share one.

A user-defined log-based metric is logging.googleapis.com/user/<name>; PromQL reads it as
logging_googleapis_com:user_<name with every other special character as _>, a distribution as a
histogram (_bucket, _sum, _count) ("Mapping Cloud Monitoring metrics to PromQL",
cloud.google.com/monitoring/promql/promql-mapping: "Replace the first / with :. Replace all
other special characters (including . and other / characters) with _.").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tpudeploy import logsources
from tpudeploy.config import DeployConfig
from tpudeploy.facts import COLD_BOOT_S, WARM_BOOT_S

# Phase durations: the build log's boots took 857 s cold and 497 s warm; a phase of a broken
# boot may run to the 3,000 s make wait gives up at.
PHASE_BOUNDS = (15.0, 30.0, 60.0, 120.0, 240.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 3000.0)


@dataclass(frozen=True, slots=True)
class LogMetricSpec:
    key: str  # the name's suffix after the deployment's
    what: str  # the log it reads (tpudeploy.logsources.WHATS)
    also: str  # more of the filter, ANDed to the platform's ("" for none)
    description: str
    labels: dict[str, str] = field(default_factory=dict)  # label -> extractor
    value: str = ""  # a distribution's value extractor; "" for a counter


SPECS: tuple[LogMetricSpec, ...] = (
    LogMetricSpec(
        "frontdoor-requests",
        "frontdoor",
        "jsonPayload.status>=100",
        "Requests through the front door, by client and HTTP status (its access log).",
        {"client": "EXTRACT(jsonPayload.client)", "status": "EXTRACT(jsonPayload.status)"},
    ),
    LogMetricSpec(
        "boot-phase-seconds",
        "boot",
        'jsonPayload.event="end"',
        "Each boot phase's elapsed_s when it ends (the node's boot log).",
        {"phase": "EXTRACT(jsonPayload.phase)"},
        "EXTRACT(jsonPayload.elapsed_s)",
    ),
    LogMetricSpec(
        "preemptions",
        logsources.PREEMPTION,
        "",  # the platform's filter is whole (tpudeploy/logsources.py)
        "Preemptions of the deployment's spot nodes (the TPU VM's own shutdown entry; on GKE "
        "Compute Engine's compute.instances.preempted audit entry of the spot pool's VMs).",
    ),
    LogMetricSpec(
        "bootcheck-disagreements",
        "boot",
        'jsonPayload.phase="bootcheck" AND jsonPayload.ok=false',
        "Boots whose boot log disagreed with the planner (the pinned-build check).",
    ),
)


def metric_name(cfg: DeployConfig, spec: LogMetricSpec) -> str:
    return f"{cfg.name}-{spec.key}"


def promql_name(cfg: DeployConfig, spec: LogMetricSpec) -> str:
    """logging.googleapis.com/user/<name> as PromQL names it."""
    return "logging_googleapis_com:user_" + re.sub(r"[^a-zA-Z0-9_]", "_", metric_name(cfg, spec))


def spec(key: str) -> LogMetricSpec:
    return next(s for s in SPECS if s.key == key)


def log_metric(cfg: DeployConfig, spec: LogMetricSpec, base_filter: str) -> dict[str, Any]:
    """One LogMetric (Logging API v2) over `base_filter` (Platform.log_metric_filter)."""
    descriptor: dict[str, Any] = {
        "metricKind": "DELTA",
        "valueType": "DISTRIBUTION" if spec.value else "INT64",
        "unit": "s" if spec.value else "1",
        "labels": [
            {"key": key, "valueType": "STRING", "description": f"the entry's {key}"}
            for key in spec.labels
        ],
    }
    body: dict[str, Any] = {
        "name": metric_name(cfg, spec),
        "description": f"{cfg.name}: {spec.description}",
        "filter": f"{base_filter} AND {spec.also}" if spec.also else base_filter,
        "metricDescriptor": descriptor,
    }
    if spec.labels:
        body["labelExtractors"] = dict(spec.labels)
    if spec.value:
        body["valueExtractor"] = spec.value
        body["bucketOptions"] = {"explicitBuckets": {"bounds": list(PHASE_BOUNDS)}}
    return body


def log_metrics(
    cfg: DeployConfig, filter_for: Callable[[str], str | None]
) -> dict[str, dict[str, Any]]:
    """Every log-based metric the deployment gets, by key: those whose log the platform
    writes (`filter_for`: Platform.log_metric_filter bound to cfg)."""
    out: dict[str, dict[str, Any]] = {}
    for s in SPECS:
        base = filter_for(s.what)
        if base is not None:
            out[s.key] = log_metric(cfg, s, base)
    return out


# The window the log-based tiles and alerts average over (dashboard.WINDOW's, for the same
# reason: a missed minute does not blank a line).
WINDOW = "5m"
# An error is a 5xx or a 429 (over a client's limit): the two a client sees as a failure.
ERROR_STATUS = 'status=~"5..|429"'


def error_rate_query(cfg: DeployConfig) -> str:
    """The share of the front door's requests that failed (5xx or 429), over WINDOW."""
    requests = promql_name(cfg, spec("frontdoor-requests"))
    return f"sum(rate({requests}{{{ERROR_STATUS}}}[{WINDOW}])) / sum(rate({requests}[{WINDOW}]))"


def bootcheck_query(cfg: DeployConfig) -> str:
    return f"sum(increase({promql_name(cfg, spec('bootcheck-disagreements'))}[1h]))"


def preemptions_query(cfg: DeployConfig) -> str:
    """Preemptions counted in the last hour: the alert fires with the first, and its incident
    closes an hour after the last."""
    return f"sum(increase({promql_name(cfg, spec('preemptions'))}[1h]))"


def tiles(cfg: DeployConfig, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """The dashboard's widgets over the log-based metrics `keys` declared for cfg."""
    out: list[dict[str, Any]] = []
    if "frontdoor-requests" in keys:
        requests = promql_name(cfg, spec("frontdoor-requests"))
        out.append(
            _xy(
                "Errors and 429s by client (front door)",
                [
                    (
                        "{{client}} {{status}}",
                        f"sum by (client, status) (rate({requests}{{{ERROR_STATUS}}}[{WINDOW}]))",
                    )
                ],
                "1/s",
            )
        )
    if "boot-phase-seconds" in keys:
        phases = promql_name(cfg, spec("boot-phase-seconds"))
        xy = _xy(
            "Boot phases: seconds since the boot began, at each phase's end",
            [
                (
                    "{{phase}}",
                    f"max by (phase) (increase({phases}_sum[1h]) / increase({phases}_count[1h]))",
                )
            ],
            "s",
        )
        xy["xyChart"]["thresholds"] = [
            {
                "label": f"cold boot, the build log: {COLD_BOOT_S:.0f} s",
                "value": COLD_BOOT_S,
                "color": "RED",
                "direction": "ABOVE",
            },
            {
                "label": f"warm boot, the build log: {WARM_BOOT_S:.0f} s",
                "value": WARM_BOOT_S,
                "color": "YELLOW",
                "direction": "ABOVE",
            },
        ]
        out.append(xy)
    if "bootcheck-disagreements" in keys:
        out.append(
            _xy(
                "Boots whose boot log disagreed with the planner (make logs WHAT=boot says why)",
                [("disagreeing boots, last hour", bootcheck_query(cfg))],
                "1",
            )
        )
    return out


def _xy(title: str, lines: list[tuple[str, str]], unit: str) -> dict[str, Any]:
    return {
        "title": title,
        "xyChart": {
            "dataSets": [
                {
                    "timeSeriesQuery": {"prometheusQuery": promql, "unitOverride": unit},
                    "plotType": "LINE",
                    "legendTemplate": legend,
                }
                for legend, promql in lines
            ]
        },
    }
