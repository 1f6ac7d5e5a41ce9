"""Names, labels, taints and identities the cluster stack and the serving stack must agree on."""

from __future__ import annotations

from tpudeploy import facts
from tpudeploy.config import DeployConfig

# The replicas run as Kubernetes service account SERVICE_ACCOUNT in their deployment's own
# namespace (namespace(cfg)). The Workload Identity pool is the project's (PROJECT.svc.id.goog),
# shared by every cluster of the project: "workloads running in a specific namespace share the
# same IAM identity across clusters within a project" (cloud.google.com/kubernetes-engine/
# fleet-management/docs/best-practices-workload-identity, "Fleet and project identity pools").
# One namespace for every deployment made one principal of them all: deployment B's pods read
# A's token, API key and TLS key, and planted archives in A's compile cache.
NAMESPACE_PREFIX = "tpudeploy-"
SERVICE_ACCOUNT = "vllm"
# A namespace name is an RFC 1123 DNS label: at most 63 characters, lowercase alphanumerics and
# '-', starting and ending with an alphanumeric (kubernetes.io/docs/concepts/overview/
# working-with-objects/names, "DNS Label Names"). A deployment name (tpudeploy.names.
# DEPLOYMENT_NAME: 3-24 such characters) after the prefix is one: 34 at most.
DNS_LABEL_MAX = 63
# The nodes' own service account (<name>-node on GKE) holds this and nothing else: "These node
# service accounts must have the Kubernetes Engine Default Node Service Account
# (roles/container.defaultNodeServiceAccount) role on the project" for GKE's system tasks,
# "logging and monitoring" (cloud.google.com/kubernetes-engine/security/
# configure-node-service-accounts, "Grant the minimum required role for GKE"). Without it the
# nodes' system logs and metrics are denied; Managed Prometheus's managed collectors, which
# carry the HPA's vLLM metric, run on those nodes (docs/scale-out.md, "Identities and grants").
# The secrets and the compile cache are the pods' own Workload Identity's, never the nodes'.
NODE_PROJECT_ROLES = ("roles/container.defaultNodeServiceAccount",)
# Manually created pools join a ComputeClass by this label and taint (GKE: "About custom
# ComputeClasses", nodes of a class carry cloud.google.com/compute-class=<class>).
COMPUTE_CLASS_KEY = "cloud.google.com/compute-class"
# GKE taints TPU nodes with google.com/tpu; the pools say so themselves as well, so nothing but a
# pod that tolerates it (one asking for a chip) lands on a node billed per chip-hour.
TPU_TAINT_KEY = "google.com/tpu"


def namespace(cfg: DeployConfig) -> str:
    """The deployment's own Kubernetes namespace: its pods' Workload Identity principal is
    ns/<this>/sa/vllm, distinct from every other deployment's in the project."""
    return f"{NAMESPACE_PREFIX}{cfg.name}"


def cluster_name(cfg: DeployConfig) -> str:
    return cfg.name


def router_name(cfg: DeployConfig) -> str:
    return f"{cfg.name}-router"


def nat_name(cfg: DeployConfig) -> str:
    return f"{cfg.name}-nat"


def compute_class_name(cfg: DeployConfig) -> str:
    return f"{cfg.name}-tpu"


def pool_name(capacity: str) -> str:
    """tpu-spot, tpu-flex: GKE pool names are at most 40 characters."""
    return {"spot": "tpu-spot", "flex-start": "tpu-flex"}[capacity]


def pool_labels(cfg: DeployConfig, capacity: str) -> dict[str, str]:
    return {COMPUTE_CLASS_KEY: compute_class_name(cfg), "tpudeploy/capacity": capacity}


def pool_taints(cfg: DeployConfig) -> list[tuple[str, str, str]]:
    """(key, value, effect) of every TPU pool."""
    return [
        (TPU_TAINT_KEY, "present", "NO_SCHEDULE"),
        (COMPUTE_CLASS_KEY, compute_class_name(cfg), "NO_SCHEDULE"),
    ]


def tpu_node_selector() -> dict[str, str]:
    """The v5e single-host labels GKE sets on each TPU node (facts: tpu-v5-lite-podslice, 1x1)."""
    return {
        "cloud.google.com/gke-tpu-accelerator": facts.GKE_TPU_ACCELERATOR_LABEL,
        "cloud.google.com/gke-tpu-topology": facts.GKE_TPU_TOPOLOGY,
    }


def workload_pool(project: str) -> str:
    return f"{project}.svc.id.goog"


def workload_principal(
    *, project: str, project_number: str, namespace: str, service_account: str
) -> str:
    """The IAM principal of a Kubernetes service account (Workload Identity Federation for GKE:
    a KSA is granted roles directly, no Google service account to hold;
    cloud.google.com/kubernetes-engine/docs/how-to/workload-identity)."""
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
        f"workloadIdentityPools/{workload_pool(project)}/subject/ns/{namespace}/sa/"
        f"{service_account}"
    )


def serving_principal(cfg: DeployConfig, *, project: str, project_number: str) -> str:
    """The replicas' Kubernetes service account, in the deployment's own namespace."""
    return workload_principal(
        project=project,
        project_number=project_number,
        namespace=namespace(cfg),
        service_account=SERVICE_ACCOUNT,
    )
