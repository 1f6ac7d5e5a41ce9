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


def picker_labels(cfg: DeployConfig) -> dict[str, str]:
    """The endpoint picker's pods ([routing] gateway): it scrapes each replica's metrics port."""
    return {"app.kubernetes.io/name": "epp", "app.kubernetes.io/instance": cfg.name}


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
        "metadata": {"name": cfg.name, "namespace": identifiers.namespace(cfg)},
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
            "namespace": identifiers.namespace(cfg),
        },
        "spec": {
            "provider": "gke",
            "parameters": {"secrets": pod.secret_provider_parameters(cfg, project, reader)},
        },
    }


# Who may open a connection to a replica's ports (issue 36: anything in the VPC reached every
# one). Enforced by GKE Dataplane V2 (the cluster's datapath_provider ADVANCED_DATAPATH; without
# an enforcing datapath a NetworkPolicy is accepted and ignored). Traffic from the pod's own node
# (the kubelet's probes) is always allowed (kubernetes.io/docs/concepts/services-networking/
# network-policies: "traffic to and from the node where a Pod is running is always allowed").
# Google's health check probes: "35.191.0.0/16, 130.211.0.0/22"; an Envoy-based load balancer
# (the Gateway's regional Application Load Balancer) also connects "from the proxy-only subnet"
# (cloud.google.com/load-balancing/docs/firewall-rules, minimum ingress rules per load balancer).
HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")
# Managed Service for Prometheus's collectors: the gmp-system namespace's pods labelled
# app.kubernetes.io/name=collector (Google's own PodMonitoring for them selects that label,
# cloud.google.com/stackdriver/docs/managed-prometheus/exporters/prometheus).
COLLECTOR_NAMESPACE = "gmp-system"
COLLECTOR_LABELS = {"app.kubernetes.io/name": "collector"}


def _namespace(name: str) -> dict[str, Any]:
    return {"match_labels": {"kubernetes.io/metadata.name": name}}


def network_policy_spec(cfg: DeployConfig) -> dict[str, Any]:
    """Provider-shaped (kubernetes_network_policy_v1) ingress rules for the replicas' pods, one
    rule per front door port; vLLM's own port is on the pod's loopback and not listed."""
    https: dict[str, Any] = {"ports": [{"port": str(cfg.proxy.port), "protocol": "TCP"}]}
    if cfg.network.allowed_cidrs:
        # The Service admits these ranges only (loadBalancerSourceRanges); the pod does too.
        https["from_"] = [{"ip_block": {"cidr": c}} for c in cfg.network.allowed_cidrs]
    # else: any source, as the internal passthrough load balancer (the VPC) delivers clients
    # with their own addresses (externalTrafficPolicy Local) and the key is checked on every
    # path but /health.
    scrapers: list[dict[str, Any]] = [
        {
            "namespace_selector": _namespace(COLLECTOR_NAMESPACE),
            "pod_selector": {"match_labels": COLLECTOR_LABELS},
        }
    ]
    if cfg.routing.gateway:
        scrapers.append({"pod_selector": {"match_labels": picker_labels(cfg)}})
    rules = [
        https,
        {"ports": [{"port": str(pod.METRICS_PORT), "protocol": "TCP"}], "from_": scrapers},
    ]
    if (port := pod.pool_port(cfg)) is not None:
        pool: dict[str, Any] = {"ports": [{"port": str(port), "protocol": "TCP"}]}
        if cfg.routing.proxy_subnet_cidr:
            sources = (cfg.routing.proxy_subnet_cidr, *HEALTH_CHECK_RANGES)
            pool["from_"] = [{"ip_block": {"cidr": c}} for c in sources]
        # else: the region's existing proxy-only subnet, whose range this stack does not know
        # (routing.findings says so): any source, behind the key check.
        rules.append(pool)
    return {
        "pod_selector": {"match_labels": labels(cfg)},
        "policy_types": ["Ingress"],
        "ingress": rules,
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
