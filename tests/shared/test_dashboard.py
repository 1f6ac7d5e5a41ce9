"""The dashboard and the alert policies: accepted by the Monitoring API's own schema (its
discovery documents, schemas/discovery/), reading only metrics the pinned vLLM registers, the
KV wall at the planner's line, and per deployment (two never share a name or a selector)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, gke_configs
from tools.rehearsal.fakes.monitoring_rules import problems
from tpudeploy import alertpolicies, dashboard, facts
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import pod, replicaplan
from tpudeploy.gke.metrics import published
from tpudeploy.planner.capacity import kv_pool
from tpudeploy.platform import platform_for, watching_lines

# prometheus_client's sample suffix -> the family type it belongs to (prometheus_client/
# exposition.py: a counter's samples end in _total, a histogram's in _bucket, _sum, _count).
_KIND_OF_SUFFIX = {"_total": "counter", "_bucket": "histogram", "_sum": "histogram"}


def _configs() -> dict[str, DeployConfig]:
    gke, gke_b = gke_configs()
    return {
        "tpuvm": parse_config({}),
        "tpuvm-b": parse_config({"name": "gemma4-v5e-b"}),
        "gke": parse_config(copy.deepcopy(gke)),
        "gke-b": parse_config(copy.deepcopy(gke_b)),
    }


CONFIGS = _configs()


def _documents(cfg: DeployConfig) -> list[tuple[str, dict[str, Any]]]:
    platform = platform_for(cfg)
    selector = platform.metrics_selector(cfg)
    docs: list[tuple[str, dict[str, Any]]] = [
        ("Dashboard", dashboard.dashboard(cfg, selector=selector))
    ]
    policies = alertpolicies.alert_policies(
        cfg,
        selector=selector,
        channels=["projects/p/notificationChannels/1"],
        absence_grace_s=platform.absence_grace_s(cfg),
    )
    docs += [("AlertPolicy", p) for p in policies.values()]
    docs.append(("NotificationChannel", alertpolicies.email_channel(cfg, "oncall@example.com")))
    return docs


def unknown_series(queries: list[str], registered: dict[str, str]) -> list[str]:
    """Each series a query names that the pinned vLLM does not register under that type."""
    out = []
    for q in queries:
        for series in dashboard.series_in(q):
            name = dashboard.registered_name(series)
            suffix = series[len(name) :]
            want = _KIND_OF_SUFFIX.get(suffix, "gauge")
            if registered.get(name) != want:
                out.append(f"{series} ({want}): vLLM registers {registered.get(name)}")
    return out


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_every_document_is_one_the_monitoring_api_takes(which: str) -> None:
    for root, doc in _documents(CONFIGS[which]):
        assert problems(doc, root) == [], (root, doc.get("displayName"))


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d["mosaicLayout"].update(legacyRows=[]), 'Unknown name "legacyRows"'),
        (lambda d: d["mosaicLayout"]["tiles"][0].update(xPos=40), "past the 48"),
        (
            lambda d: d["mosaicLayout"]["tiles"][0]["widget"].update(text={"content": "x"}),
            "a widget holds one content",
        ),
        (
            lambda d: d["mosaicLayout"]["tiles"][0]["widget"]["xyChart"]["dataSets"][0].update(
                plotType="PIE"
            ),
            "'PIE' is not one of",
        ),
        (lambda d: d["mosaicLayout"].update(columns="48x"), "an integer expected"),
    ],
)
def test_the_schema_check_refuses_what_the_api_refuses(mutate: Any, fragment: str) -> None:
    doc = dashboard.dashboard(CONFIGS["gke"], selector='job="x"')
    mutate(doc)
    assert any(fragment in p for p in problems(doc, "Dashboard")), problems(doc, "Dashboard")


def test_an_alert_policy_with_a_bad_duration_or_field_is_refused() -> None:
    policy = alertpolicies.alert_policy(
        CONFIGS["gke"], alertpolicies.POLICIES[0], selector='job="x"', channels=[]
    )
    policy["conditions"][0]["conditionPrometheusQueryLanguage"]["duration"] = "5m"
    policy["documentation"]["runbook"] = "x"
    found = problems(policy, "AlertPolicy")
    assert any("'5m' is not a duration" in p for p in found), found
    assert any('Unknown name "runbook"' in p for p in found), found
    policy["conditions"] = []
    assert any("not between 1 and 6" in p for p in problems(policy, "AlertPolicy"))


@pytest.mark.parametrize("which", sorted(CONFIGS))
def test_every_query_names_only_metrics_the_pinned_vllm_registers(which: str) -> None:
    queries = [q for _, doc in _documents(CONFIGS[which]) for q in dashboard.queries(doc)]
    assert queries, "no query found: the walker reads nothing"
    assert all(dashboard.series_in(q) for q in queries)
    assert unknown_series(queries, published()) == []


def test_a_renamed_metric_fails_the_check() -> None:
    """vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc once: a dashboard reading the
    old name draws nothing, so the check must fail on it (and on a type read as another)."""
    queries = dashboard.queries(dashboard.dashboard(CONFIGS["gke"], selector='job="x"'))
    registered = published()
    renamed = dict(registered)
    renamed["vllm:gpu_cache_usage_perc"] = renamed.pop("vllm:kv_cache_usage_perc")
    assert any("vllm:kv_cache_usage_perc" in p for p in unknown_series(queries, renamed))
    retyped = {**registered, "vllm:generation_tokens": "gauge"}
    assert any("generation_tokens_total" in p for p in unknown_series(queries, retyped))


def test_the_kv_line_and_the_kv_alert_are_the_planners_safe_line() -> None:
    safe = kv_pool()
    line = safe.safe_tokens / safe.tokens
    assert pytest.approx(line, abs=1e-3) == dashboard.KV_WALL
    doc = dashboard.dashboard(CONFIGS["tpuvm"], selector='job="x"')
    thresholds = [
        t["value"]
        for tile in doc["mosaicLayout"]["tiles"]
        for t in tile["widget"].get("xyChart", {}).get("thresholds", [])
    ]
    assert thresholds == [dashboard.KV_WALL]
    kv = alertpolicies.alert_policy(
        CONFIGS["tpuvm"], alertpolicies.POLICIES[0], selector='job="x"', channels=[]
    )
    query = kv["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert query.endswith(f"> {line:.2f}") or f"> {dashboard.KV_WALL}" in query
    assert kv["conditions"][0]["conditionPrometheusQueryLanguage"]["duration"] == "300s"


@pytest.mark.parametrize("pair", [("tpuvm", "tpuvm-b"), ("gke", "gke-b")])
def test_two_deployments_share_no_dashboard_policy_or_series(pair: tuple[str, str]) -> None:
    a, b = (CONFIGS[n] for n in pair)
    assert platform_for(a).metrics_selector(a) != platform_for(b).metrics_selector(b)
    names_a = {d.get("displayName") for _, d in _documents(a)}
    names_b = {d.get("displayName") for _, d in _documents(b)}
    assert names_a and not names_a & names_b
    for cfg in (a, b):
        selector = platform_for(cfg).metrics_selector(cfg)
        for _, doc in _documents(cfg):
            for q in dashboard.queries(doc):
                assert q.count("vllm:") == q.count("{" + selector + "}"), q


def test_both_platforms_get_the_absence_alert() -> None:
    """Both platforms ship vLLM's metrics (GKE's Managed Prometheus, the TPU VM's Ops Agent:
    tpudeploy/opsagent.py), so both get the alert that fires when they stop."""
    for cfg in (CONFIGS["tpuvm"], CONFIGS["gke"]):
        titles = [d["displayName"] for k, d in _documents(cfg) if k == "AlertPolicy"]
        assert any("No vLLM server" in t for t in titles)


def _duration_s(doc: dict[str, Any]) -> int:
    duration = doc["conditions"][0]["conditionPrometheusQueryLanguage"]["duration"]
    assert duration.endswith("s"), duration
    return int(duration.removesuffix("s"))


def _no_server(cfg: DeployConfig) -> dict[str, Any] | None:
    return next(
        (
            d
            for k, d in _documents(cfg)
            if k == "AlertPolicy" and "No vLLM server" in d["displayName"]
        ),
        None,
    )


@pytest.mark.parametrize("which", ["tpuvm", "gke"])
def test_the_absence_alert_outlasts_a_cold_boot(which: str) -> None:
    """No vLLM series exists before the compile ends (the build log: 857 s cold): an absence
    alert shorter than a cold boot fires on every deploy, recovery and replacement."""
    doc = _no_server(CONFIGS[which])
    assert doc is not None
    held = _duration_s(doc)
    assert held >= facts.COLD_BOOT_S * replicaplan.STARTUP_MARGIN, held
    assert held % 60 == 0, "a condition's duration is a whole number of minutes"
    # and it says, in its own text, how long it waited
    assert f"for {held // 60} minutes" in doc["documentation"]["content"]


def test_on_gke_the_absence_alert_outlasts_a_replacements_capacity_wait_and_boot() -> None:
    held = _duration_s(_no_server(CONFIGS["gke"]) or {})
    assert held >= pod.capacity_wait_s() + replicaplan.startup_budget_s()


def test_the_grace_margin_is_the_startup_probes() -> None:
    assert alertpolicies.BOOT_GRACE_MARGIN == replicaplan.STARTUP_MARGIN


def test_no_absence_alert_when_gke_scales_to_zero() -> None:
    """min_replicas = 0: no replica is expected while idle; an absence alert would fire every
    idle hour. Left out (the front door's errors policy sees a request nobody served)."""
    gke, _ = gke_configs()
    raw = copy.deepcopy(gke)
    raw["gke"] = {**raw.get("gke", {}), "min_replicas": 0, "min_version": "1.37"}
    cfg = parse_config(raw)
    assert platform_for(cfg).absence_grace_s(cfg) is None
    assert _no_server(cfg) is None
    titles = [d["displayName"] for k, d in _documents(cfg) if k == "AlertPolicy"]
    assert any("KV cache" in t for t in titles)
    line = next(x for x in watching_lines(cfg) if x.startswith("dashboard:"))
    assert "No vLLM server" not in line


def test_every_policy_says_why_and_the_fix() -> None:
    for policy in (*alertpolicies.POLICIES, alertpolicies.no_server(900)):
        doc = alertpolicies.alert_policy(CONFIGS["gke"], policy, selector='job="x"', channels=[])
        content = doc["documentation"]["content"]
        assert "**Why:**" in content and "**Fix:**" in content
        assert policy.why in content and policy.fix in content


def test_cost_now_states_the_planners_rate_and_its_source() -> None:
    cfg = CONFIGS["tpuvm"]
    rate = dashboard.hourly_rate(cfg)
    assert rate is not None
    per_chip, chips, source = rate
    doc = dashboard.dashboard(cfg, selector='job="x"')
    widgets = [t["widget"] for t in doc["mosaicLayout"]["tiles"]]
    score = next(w for w in widgets if "scorecard" in w)
    assert score["scorecard"]["timeSeriesQuery"]["prometheusQuery"].endswith(
        f"* {chips * per_chip:.4f}"
    )
    text = next(w for w in widgets if "text" in w)["text"]["content"]
    assert f"${per_chip:.4f}/chip-hour" in text and source in text


def test_console_url() -> None:
    assert dashboard.console_url("p1", "abc") == (
        "https://console.cloud.google.com/monitoring/dashboards/builder/abc?project=p1"
    )


def test_the_docs_give_the_absence_alerts_waits() -> None:
    """docs/see-it-running.md states the minutes: they follow the boot timeline, not a typo."""
    text = (REPO_ROOT / "docs" / "see-it-running.md").read_text()
    vm, gke = (_duration_s(_no_server(CONFIGS[k]) or {}) // 60 for k in ("tpuvm", "gke"))
    assert f"{vm} minutes on the TPU VM, {gke} on GKE" in text
