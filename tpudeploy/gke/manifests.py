"""The serving stack's custom resources as plain manifests, and the names its objects share."""

from __future__ import annotations

from typing import Any

from tpudeploy.config import DeployConfig
from tpudeploy.gke import identifiers, metrics_adapter, pod


def hpa_metric_name() -> str:
    """Google's vLLM-on-TPU autoscaling signal, as the custom metrics Stackdriver adapter names
    a Managed Prometheus gauge (tpudeploy.gke.metrics_adapter)."""
    return metrics_adapter.waiting_metric_name()


def hpa_kv_metric_name() -> str:
    """The KV pool's use, named the same way: the HPA's second metric."""
    return metrics_adapter.kv_cache_metric_name()


def labels(cfg: DeployConfig) -> dict[str, str]:
    return {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": cfg.name}


def compute_class(cfg: DeployConfig) -> dict[str, Any]:
    """Spot first, flex-start when spot has no capacity (a bounded wait), no node pool created
    on the fly, and no scale-up onto anything else when neither is satisfiable."""
    priorities: list[dict[str, Any]] = []
    for capacity in cfg.gke.capacity_order:
        rule: dict[str, Any] = {"nodepools": [identifiers.pool_name(capacity)]}
        if capacity == "spot":
            rule["spot"] = True
            rule["capacityCheckWaitTimeSeconds"] = pod.capacity_wait_s()
        else:
            # A replacement starts this long before a flex-start node's run ends, so capacity
            # never drops to nothing at once.
            rule["flexStart"] = {
                "enabled": True,
                "nodeRecycling": {"leadTimeSeconds": pod.flex_recycle_lead_s()},
            }
        priorities.append(rule)
    return {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": identifiers.compute_class_name(cfg)},
        "spec": {
            "priorities": priorities,
            "nodePoolAutoCreation": {"enabled": False},
            "whenUnsatisfiable": "DoNotScaleUp",
        },
    }


def pod_monitoring(cfg: DeployConfig) -> dict[str, Any]:
    """Managed Prometheus scrapes vLLM's /metrics through the front door's metrics listener
    (vLLM itself listens on the pod's loopback only)."""
    return {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": {"name": cfg.name, "namespace": identifiers.NAMESPACE},
        "spec": {
            "selector": {"matchLabels": labels(cfg)},
            "endpoints": [{"port": pod.METRICS_PORT, "path": "/metrics", "interval": "15s"}],
        },
    }


def secret_provider_class(cfg: DeployConfig, *, project: str, reader: str) -> dict[str, Any]:
    """The Secret Manager add-on's files for one reader (pod.SECRET_READERS): ids of secrets,
    never their values."""
    return {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClass",
        "metadata": {
            "name": pod.secret_provider_class_name(cfg, reader),
            "namespace": identifiers.NAMESPACE,
        },
        "spec": {
            "provider": "gke",
            "parameters": {"secrets": pod.secret_provider_parameters(cfg, project, reader)},
        },
    }


def custom_resources(cfg: DeployConfig, *, project: str) -> dict[str, dict[str, Any]]:
    """By construct id: what the stack declares with kubernetes_manifest."""
    return {
        "compute-class": compute_class(cfg),
        "pod-monitoring": pod_monitoring(cfg),
        **{
            f"secret-provider-class-{reader}": secret_provider_class(
                cfg, project=project, reader=reader
            )
            for reader in pod.SECRET_READERS
        },
    }
