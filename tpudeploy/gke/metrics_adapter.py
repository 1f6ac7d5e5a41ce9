"""The HPA's signal: Google's Custom Metrics Stackdriver Adapter, as plain data.

The HorizontalPodAutoscaler reads `vllm:num_requests_waiting` through the custom metrics API
(`custom.metrics.k8s.io`); nothing in GKE serves that API until an adapter is deployed. GKE's
vLLM-on-TPU and LLM-autoscaling guides deploy Google's Custom Metrics Stackdriver Adapter from
k8s-stackdriver's `deploy/production/adapter_new_resource_model.yaml` and grant its Kubernetes
service account roles/monitoring.viewer through Workload Identity Federation:
- https://cloud.google.com/kubernetes-engine/docs/tutorials/serve-vllm-tpu (autoscaling section)
- https://cloud.google.com/kubernetes-engine/docs/how-to/machine-learning/inference/autoscaling
- https://github.com/GoogleCloudPlatform/k8s-stackdriver/blob/673c7dd8/
  custom-metrics-stackdriver-adapter/deploy/production/adapter_new_resource_model.yaml
stacks/gke/adapter.py declares these objects; this module holds what they must agree on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tpudeploy.gke import identifiers

# The manifest's namespace and service account, kept as published: the documented Workload
# Identity principal (.../subject/ns/custom-metrics/sa/custom-metrics-stackdriver-adapter) names
# them, and a second adapter under other names would fight this one over the APIService.
NAMESPACE = "custom-metrics"
SERVICE_ACCOUNT = "custom-metrics-stackdriver-adapter"
NAME = "custom-metrics-stackdriver-adapter"
# The release the production manifest ships (k8s-stackdriver commit 673c7dd8, 2026-08-18, PR
# #1242). Not pinned by digest: no published digest for this tag was found in the sources this
# project can read (no registry access here). tests/gke/test_gke_adapter.py refuses it (strict
# xfail) until DIGEST holds the manifest digest of this tag (`crane digest IMAGE`).
IMAGE = "gcr.io/gke-release/custom-metrics-stackdriver-adapter:v0.16.9-gke.0"
DIGEST: str | None = None
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
# The manifest's flags: the new resource model (k8s_pod, k8s_container, prometheus_target) and
# the container fallback. --cert-dir (k8s.io/apiserver's SecureServingOptions) puts the
# self-signed serving certificate on a memory volume, so the root filesystem stays read-only.
CERT_DIR = "/var/run/serving-cert"
COMMAND = (
    "/adapter",
    "--use-new-resource-model=true",
    "--fallback-for-container-metrics=true",
    f"--cert-dir={CERT_DIR}",
)
PORT = 443
# The manifest sizes it at 250m / 200Mi (requests = limits). It runs on the e2-standard-2 system
# node beside GKE's own system pods, so it requests less CPU than its limit; memory as upstream.
RESOURCES = {
    "requests": {"cpu": "100m", "memory": "200Mi"},
    "limits": {"cpu": "250m", "memory": "200Mi"},
}
LABELS = {"k8s-app": NAME}


@dataclass(frozen=True, slots=True)
class Rule:
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]


# The manifest's ClusterRole `custom-metrics-resource-reader`, no more: the adapter resolves the
# HPA's pod selector to pods (and nodes for node metrics) before it queries Cloud Monitoring.
RESOURCE_READER = "custom-metrics-resource-reader"
RESOURCE_READER_RULES = (Rule(("",), ("pods", "nodes", "nodes/stats"), ("get", "list", "watch")),)
# Every aggregated API server needs these two built-in roles (Kubernetes: "Configure the
# Aggregation Layer", authentication and authorization of the extension apiserver):
# system:auth-delegator (TokenReview/SubjectAccessReview) and, in kube-system,
# extension-apiserver-authentication-reader (the front proxy's client CA).
AUTH_DELEGATOR = "system:auth-delegator"
AUTH_READER = "extension-apiserver-authentication-reader"
AUTH_READER_NAMESPACE = "kube-system"

# The HPA's metric types and the aggregated API each is read through (Kubernetes HPA
# walkthrough, "Autoscaling on multiple metrics and custom metrics": Pods and Object metrics
# come from custom.metrics.k8s.io, External metrics from external.metrics.k8s.io).
API_GROUP_OF_METRIC_TYPE = {
    "Pods": "custom.metrics.k8s.io",
    "Object": "custom.metrics.k8s.io",
    "External": "external.metrics.k8s.io",
}
# What this deployment registers: the custom metrics API only (both versions the manifest
# serves). The manifest's external metrics APIService and its `external-metrics-reader` role are
# left out: the HPA uses a Pods metric (GKE's vLLM guide), and the external API would expose
# every Cloud Monitoring metric of the project to whoever may read external.metrics.k8s.io.
API_SERVICES = (
    ("custom.metrics.k8s.io", "v1beta1", 100),
    ("custom.metrics.k8s.io", "v1beta2", 200),
)
GROUP_PRIORITY_MINIMUM = 100
# At [gke] min_replicas = 0 the HPA also reads the wake gauge as an External metric (an HPA at
# minReplicas 0 needs one: tpudeploy.gke.zero.RULES), so the external metrics API is registered
# then, and only then, as the manifest registers it. Its reader role, `external-metrics-reader`
# bound to the HPA controller, is GKE's own (managed by GKE's add-on manager; KEDA's GKE
# troubleshooting notes clusters where it went missing): declaring it would fight GKE's.
EXTERNAL_API_SERVICE = ("external.metrics.k8s.io", "v1beta1", 100)


def api_services(*, external: bool) -> tuple[tuple[str, str, int], ...]:
    return (*API_SERVICES, EXTERNAL_API_SERVICE) if external else API_SERVICES


def api_service_name(group: str, version: str) -> str:
    """An APIService is named <version>.<group> (Kubernetes API reference, APIService)."""
    return f"{version}.{group}"


def image() -> str:
    """The adapter's image: by digest once DIGEST is known, else the tag (refused by a test)."""
    return f"{IMAGE}@{DIGEST}" if DIGEST else IMAGE


def pinned(ref: str) -> bool:
    """An image reference that names one manifest: ends in @sha256:<64 hex>."""
    _, sep, digest = ref.rpartition("@")
    return bool(sep) and _DIGEST_RE.fullmatch(digest) is not None


def principal(*, project: str, project_number: str) -> str:
    """The adapter's IAM principal (Workload Identity Federation for GKE; the form GKE's
    autoscaling guide grants roles/monitoring.viewer to)."""
    return identifiers.workload_principal(
        project=project,
        project_number=project_number,
        namespace=NAMESPACE,
        service_account=SERVICE_ACCOUNT,
    )


# roles/monitoring.viewer: read-only access to the Cloud Monitoring API (timeSeries.list is
# what the adapter calls; https://cloud.google.com/monitoring/access-control).
IAM_ROLE = "roles/monitoring.viewer"


# ---- the metric name, as the HPA spells it and as the adapter reads it --------------------------

# Google Cloud Managed Service for Prometheus stores a Prometheus metric as the Cloud Monitoring
# metric type prometheus.googleapis.com/<name>/<kind suffix>, on the prometheus_target resource
# (https://cloud.google.com/stackdriver/docs/managed-prometheus/troubleshooting, "Metric names";
# Cloud Monitoring "Prometheus metrics" pricing page lists the suffixes).
MANAGED_PROMETHEUS_PREFIX = "prometheus.googleapis.com"
KIND_SUFFIX = {
    "gauge": "gauge",
    "counter": "counter",
    "histogram": "histogram",
    "summary": "summary",
    "untyped": "unknown",
}
# vLLM exports the queue length as a Prometheus Gauge (vllm/v1/metrics/loggers.py,
# `vllm:num_requests_waiting`, "Number of requests waiting to be processed").
WAITING_METRIC = "vllm:num_requests_waiting"
WAITING_KIND = "gauge"
# And the KV pool's use, a Gauge from 0 to 1 (vllm/v1/metrics/loggers.py,
# `vllm:kv_cache_usage_perc`, "KV-cache usage. 1 means 100 percent usage."): the HPA's second
# signal, so a replica whose pool is full counts before its queue grows (issue 26).
KV_CACHE_METRIC = "vllm:kv_cache_usage_perc"
KV_CACHE_KIND = "gauge"
# The Custom Metrics API forbids "/" in a metric name; the adapter reads "|" as "/" (adapter
# README "Metric names"; provider.go getCustomMetricName: a name with "|" is used as the
# metric type with every "|" replaced, any other name is custom.googleapis.com/<name>), and a
# type under prometheus.googleapis.com is queried on prometheus_target (query_builder.go).
ADAPTER_SEPARATOR = "|"
ADAPTER_DEFAULT_PREFIX = "custom.googleapis.com/"


def managed_prometheus_type(name: str, kind: str) -> str:
    """The Cloud Monitoring metric type Managed Prometheus writes for a Prometheus metric."""
    return f"{MANAGED_PROMETHEUS_PREFIX}/{name}/{KIND_SUFFIX[kind]}"


def hpa_metric_name(metric_type: str) -> str:
    """How an HPA names a Cloud Monitoring metric type for the adapter."""
    return metric_type.replace("/", ADAPTER_SEPARATOR)


def adapter_metric_type(hpa_name: str) -> str:
    """The Cloud Monitoring metric type the adapter queries for an HPA's metric name."""
    if ADAPTER_SEPARATOR in hpa_name:
        return hpa_name.replace(ADAPTER_SEPARATOR, "/")
    return ADAPTER_DEFAULT_PREFIX + hpa_name


def waiting_metric_name() -> str:
    """The HPA's metric: vLLM's queue length as Managed Prometheus stores it."""
    return hpa_metric_name(managed_prometheus_type(WAITING_METRIC, WAITING_KIND))


def kv_cache_metric_name() -> str:
    """The HPA's second metric: the KV pool's use as Managed Prometheus stores it."""
    return hpa_metric_name(managed_prometheus_type(KV_CACHE_METRIC, KV_CACHE_KIND))
