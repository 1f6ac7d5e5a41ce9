"""Names, labels, taints and identities the cluster stack and the serving stack must agree on."""

from __future__ import annotations

from tpudeploy import facts
from tpudeploy.config import DeployConfig

# The Kubernetes namespace and service account the replicas run as.
NAMESPACE = "tpudeploy"
SERVICE_ACCOUNT = "vllm"
# Manually created pools join a ComputeClass by this label and taint (GKE: "About custom
# ComputeClasses", nodes of a class carry cloud.google.com/compute-class=<class>).
COMPUTE_CLASS_KEY = "cloud.google.com/compute-class"
# GKE taints TPU nodes with google.com/tpu; the pools say so themselves as well, so nothing but a
# pod that tolerates it (one asking for a chip) lands on a node billed per chip-hour.
TPU_TAINT_KEY = "google.com/tpu"


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
    """The replicas' Kubernetes service account."""
    return workload_principal(
        project=project,
        project_number=project_number,
        namespace=NAMESPACE,
        service_account=SERVICE_ACCOUNT,
    )
