"""The preemption alert: a log-based metric per deployment over the entry each platform has for
a spot preemption (GKE: Compute Engine's compute.instances.preempted audit entry of the spot
pool's VMs; TPU VM: the node's own shutdown entry, tests/render/test_shutdown_preemption.py),
its filter run through the fake Logging API's parser against two deployments' entries, and the
policy over it valid for the Monitoring API."""

from __future__ import annotations

from typing import Any

import pytest

from tools.rehearsal.fakes.logging_rules import LOGGING, parse_filter
from tools.rehearsal.fakes.monitoring_rules import check, problems
from tpudeploy import alertpolicies, logmetrics, logsources
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import identifiers
from tpudeploy.platform import log_metrics_for, platform_for

PROJECT = "preempt-1"


def _gke(name: str, capacity: str = "spot,flex-start") -> DeployConfig:
    return parse_config(
        {"project": PROJECT, "platform": "gke", "name": name, "gke": {"capacity": capacity}}
    )


def _audit(
    cfg: DeployConfig, pool: str, method: str = logsources.PREEMPTED_METHOD
) -> dict[str, Any]:
    """Compute Engine's system-event audit entry for one of cfg's pool's VMs (the form of the
    exporter fixture logsources.py cites)."""
    vm = f"gke-{identifiers.cluster_name(cfg)}-{pool}-5b909138-nr65"
    return {
        "logName": f"projects/{PROJECT}/logs/cloudaudit.googleapis.com%2Fsystem_event",
        "resource": {
            "type": "gce_instance",
            "labels": {"instance_id": "1844488190", "project_id": PROJECT, "zone": "us-west4-a"},
        },
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "serviceName": "compute.googleapis.com",
            "methodName": method,
            "resourceName": f"projects/{PROJECT}/zones/us-west4-a/instances/{vm}",
            "status": {"message": "Instance was preempted."},
        },
    }


# Names where one is the other's prefix, and one that ends in the pool's name.
PAIRS = [("gemma4-v5e", "gemma4-v5e-b"), ("alpha", "alpha-tpu-spot")]


@pytest.mark.parametrize("pair", PAIRS)
def test_a_gke_preemption_counts_for_its_own_deployment_only(pair: tuple[str, str]) -> None:
    a, b = _gke(pair[0]), _gke(pair[1])
    spot = identifiers.pool_name("spot")
    for mine, theirs in ((a, b), (b, a)):
        metric = log_metrics_for(mine)["preemptions"]
        assert check(LOGGING["schemas"], "LogMetric", metric) == []
        counts = parse_filter(metric["filter"])
        assert counts(_audit(mine, spot))
        assert not counts(_audit(theirs, spot)), (mine.name, theirs.name)
        # not another method on the same VM, nor the flex-start pool's VMs (never preempted)
        assert not counts(_audit(mine, spot, method="compute.instances.delete"))
        assert not counts(_audit(mine, identifiers.pool_name("flex-start")))


def test_no_preemption_metric_where_nothing_is_preempted() -> None:
    assert "preemptions" not in log_metrics_for(_gke("flexonly", capacity="flex-start"))
    for provisioning in ("flex-start", "on-demand"):
        cfg = parse_config({"project": PROJECT, "provisioning": provisioning})
        assert "preemptions" not in log_metrics_for(cfg)
    spot = parse_config({"project": PROJECT, "provisioning": "spot"})
    assert "preemptions" in log_metrics_for(spot)


def test_two_tpu_vm_deployments_count_their_own_node_only() -> None:
    a, b = (
        parse_config({"project": PROJECT, "provisioning": "spot", "name": n})
        for n in ("dep-a", "dep-b")
    )
    payload = {"phase": logsources.PREEMPTED_PHASE, "event": "fail", "elapsed_s": 0}

    def entry(cfg: DeployConfig, phase: str = logsources.PREEMPTED_PHASE) -> dict[str, Any]:
        return {
            "logName": f"projects/{PROJECT}/logs/{logsources.TPUVM_LOG_IDS['boot']}",
            "labels": {logsources.DEPLOYMENT_LABEL: cfg.name},
            "jsonPayload": {**payload, "phase": phase},
        }

    counts = parse_filter(log_metrics_for(a)["preemptions"]["filter"])
    assert counts(entry(a)) and not counts(entry(b)) and not counts(entry(a, "compile"))


@pytest.mark.parametrize(
    "cfg",
    [_gke("gemma4-v5e"), parse_config({"project": PROJECT, "provisioning": "spot"})],
    ids=["gke", "tpu-vm"],
)
def test_the_preemption_policy_is_valid_and_reads_its_deployments_metric(cfg: DeployConfig) -> None:
    keys = tuple(log_metrics_for(cfg))
    policies = alertpolicies.alert_policies(
        cfg,
        selector=platform_for(cfg).metrics_selector(cfg),
        channels=[],
        absence_grace_s=platform_for(cfg).absence_grace_s(cfg),
        log_metric_keys=keys,
    )
    policy = policies["preempted"]
    assert problems(policy, "AlertPolicy") == []
    query = policy["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert logmetrics.promql_name(cfg, logmetrics.spec("preemptions")) in query
    content = policy["documentation"]["content"]
    assert "**Why:**" in content and "857 s" in content and "**Fix:**" in content
    assert cfg.name in policy["displayName"]
