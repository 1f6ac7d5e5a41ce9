"""The Kubernetes fake refuses an HPA at minReplicas 0 where Kubernetes and GKE do: without an
External or Object metric, or on a cluster older than GKE's documented 1.37
(tools/rehearsal/fakes/k8s_rules.py, HPA_ZERO_RULES, with the sources)."""

from __future__ import annotations

from typing import Any

import pytest

from tools.rehearsal.fakes import k8s_rules

_PODS = {
    "type": "Pods",
    "pods": {
        "metric": {"name": "prometheus.googleapis.com|vllm:num_requests_waiting|gauge"},
        "target": {"type": "AverageValue", "averageValue": "4"},
    },
}
_EXTERNAL = {
    "type": "External",
    "external": {
        "metric": {
            "name": "prometheus.googleapis.com|tpudeploy_wake_requests|gauge",
            "selector": {"matchLabels": {"resource.labels.namespace": "tpudeploy-a"}},
        },
        "target": {"type": "AverageValue", "averageValue": "1"},
    },
}


def _hpa(min_replicas: int, metrics: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "a", "namespace": "tpudeploy-a"},
        "spec": {
            "minReplicas": min_replicas,
            "maxReplicas": 4,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "a"},
            "metrics": metrics,
        },
    }


# The fake passes the cluster's minor, as kubernetes-validate names its schema sets.
NEW, OLD = "1.37.0", "1.33.0"


def test_zero_with_pods_metrics_only_is_refused() -> None:
    found = k8s_rules.validate(_hpa(0, [_PODS]), NEW, {})
    assert "at least one Object or External metric" in found, found


def test_zero_below_gke_1_37_is_refused_even_with_an_external_metric() -> None:
    found = k8s_rules.validate(_hpa(0, [_PODS, _EXTERNAL]), OLD, {})
    assert "1.37" in found and "minReplicas" in found, found


@pytest.mark.parametrize(
    ("min_replicas", "metrics", "version"),
    [(0, [_PODS, _EXTERNAL], NEW), (1, [_PODS], OLD), (1, [_PODS], NEW)],
)
def test_what_kubernetes_accepts_is_stored(
    min_replicas: int, metrics: list[dict[str, Any]], version: str
) -> None:
    # kubernetes-validate has no 1.37 schemas: the structure is checked at the newest it holds.
    assert k8s_rules.validate(_hpa(min_replicas, metrics), version, {}) in ("", k8s_rules.NO_KIND)
    assert k8s_rules.hpa_zero_problem(_hpa(min_replicas, metrics), version) == ""
