"""The log-based metrics, their tiles and alert policies: valid for the Logging and Monitoring
APIs' schemas, filters the query language parses that keep to one deployment's logs, and every
metric and field a query or extractor names one that exists (a renamed field or metric fails
here, not on a chart)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tools.rehearsal.fakes.logging_rules import LOGGING, parse_filter
from tools.rehearsal.fakes.monitoring_rules import check, problems
from tpudeploy import dashboard, frontdoor_log, logmetrics, logsources
from tpudeploy.alertpolicies import alert_policies
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import identifiers
from tpudeploy.gke.metrics import published
from tpudeploy.platform import log_metrics_for, platform_for

PROJECT = "log-metrics-1"
CONFIGS = {
    (platform, name): parse_config({"project": PROJECT, "platform": platform, "name": name})
    for platform in ("tpu-vm", "gke")
    for name in ("alpha", "beta")
}
# What the node writes in a boot entry (the log contract, tpudeploy/logsources.py).
BOOT_FIELDS = ("phase", "event", "elapsed_s", "ok")


def _entry(cfg: DeployConfig, what: str, payload: dict[str, Any]) -> dict[str, Any]:
    """An entry as the node (TPU VM) or GKE's agent writes it for `cfg`."""
    if cfg.platform == "gke":
        return {
            "logName": f"projects/{PROJECT}/logs/stdout",
            "resource": {
                "type": "k8s_container",
                "labels": {
                    "cluster_name": identifiers.cluster_name(cfg),
                    "namespace_name": identifiers.namespace(cfg),
                    "container_name": logsources.GKE_CONTAINERS[what],
                },
            },
            "jsonPayload": payload,
        }
    return {
        "logName": f"projects/{PROJECT}/logs/{logsources.TPUVM_LOG_IDS[what]}",
        "labels": {logsources.DEPLOYMENT_LABEL: cfg.name},
        "jsonPayload": payload,
    }


ACCESS = {"client": "ci-bot", "status": 429, "path": "/v1/chat/completions"}


@pytest.mark.parametrize("platform", ["tpu-vm", "gke"])
def test_each_metric_is_a_valid_log_metric_that_counts_only_its_deployments_entries(
    platform: str,
) -> None:
    alpha, beta = CONFIGS[(platform, "alpha")], CONFIGS[(platform, "beta")]
    mine, theirs = log_metrics_for(alpha), log_metrics_for(beta)
    assert "frontdoor-requests" in mine
    # GKE writes no structured boot log: no boot metric is declared there
    assert ("boot-phase-seconds" in mine) is (platform == "tpu-vm")
    entries = {
        "frontdoor-requests": ("frontdoor", ACCESS),
        "boot-phase-seconds": ("boot", {"phase": "compile", "event": "end", "elapsed_s": 412}),
        "bootcheck-disagreements": ("boot", {"phase": "bootcheck", "ok": False}),
    }
    for key, metric in mine.items():
        assert check(LOGGING["schemas"], "LogMetric", metric) == []
        assert metric["name"] != theirs[key]["name"] and alpha.name in metric["name"]
        if key == "preemptions":
            continue  # Compute Engine's entries or the shutdown script's: test_preemptions.py
        what, payload = entries[key]
        counts = parse_filter(metric["filter"])
        assert counts(_entry(alpha, what, payload))
        assert not counts(_entry(beta, what, payload))


def test_the_boot_check_metric_counts_disagreements_only() -> None:
    cfg = CONFIGS[("tpu-vm", "alpha")]
    counts = parse_filter(log_metrics_for(cfg)["bootcheck-disagreements"]["filter"])
    assert counts(_entry(cfg, "boot", {"phase": "bootcheck", "ok": False}))
    assert not counts(_entry(cfg, "boot", {"phase": "bootcheck", "ok": True}))
    assert not counts(_entry(cfg, "boot", {"phase": "compile", "event": "end"}))


def test_every_field_an_extractor_or_filter_reads_is_one_the_logs_hold() -> None:
    access = set(frontdoor_log.FIELD_NAMES)
    for key, metric in log_metrics_for(CONFIGS[("tpu-vm", "alpha")]).items():
        text = " ".join(
            [
                metric["filter"],
                metric.get("valueExtractor", ""),
                *metric.get("labelExtractors", {}).values(),
            ]
        )
        fields = set(re.findall(r"jsonPayload\.([a-zA-Z_]+)", text))
        known = access if logmetrics.spec(key).what == "frontdoor" else set(BOOT_FIELDS)
        assert fields and fields <= known, (key, fields - known)


@pytest.mark.parametrize("platform", ["tpu-vm", "gke"])
def test_every_metric_a_query_names_is_vllms_or_a_declared_log_metric(platform: str) -> None:
    cfg = CONFIGS[(platform, "alpha")]
    metrics = log_metrics_for(cfg)
    declared = {logmetrics.promql_name(cfg, logmetrics.spec(key)) for key in metrics}
    selector = platform_for(cfg).metrics_selector(cfg)
    board = dashboard.dashboard(cfg, selector=selector, extra=logmetrics.tiles(cfg, tuple(metrics)))
    policies = alert_policies(
        cfg, selector=selector, channels=[], absence_grace_s=None, log_metric_keys=tuple(metrics)
    )
    assert problems(board, "Dashboard") == []
    for policy in policies.values():
        assert problems(policy, "AlertPolicy") == []
    queries = dashboard.queries(board) + [
        q for p in policies.values() for q in dashboard.queries(p)
    ]
    named = {m for q in queries for m in re.findall(r"logging_googleapis_com:[a-zA-Z0-9_]+", q)}
    assert named, "no tile or policy reads a log-based metric"
    for name in named:
        assert re.sub(r"_(sum|count|bucket)$", "", name) in declared, name
    vllm = set(published())
    for series in {s for q in queries for s in dashboard.series_in(q)}:
        assert dashboard.registered_name(series) in vllm, series
    titles = [t["widget"]["title"] for t in board["mosaicLayout"]["tiles"]]
    assert "Errors and 429s by client (front door)" in titles
    assert any(t.startswith("Cost per million output tokens") for t in titles)
    assert any(t.startswith("Boot phases") for t in titles) is (platform == "tpu-vm")
