"""Scale to zero on GKE: what a first request waits, what a client is told meanwhile, what zero
saves against keeping replicas, and the wake path's objects (stacks/gke/wake_objects.py).

Everything here comes from the planner's numbers (the build log's warm boot, the HPA's
scale-down window, the chip and idle-floor rates of tpudeploy.gke.replicaplan) and from the
documented rules below; nothing is measured on a cluster. At `[gke] min_replicas = 0` the serving
stack adds the wake responder (tpudeploy/gke/wake.py) behind a copy of the replicas' front door,
the HPA's External metric it feeds, and the Service's selector that reaches it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.gke import identifiers, wake
from tpudeploy.gke.replicaplan import ReplicaPlan, replica_plan, scale_down_window_s


@dataclass(frozen=True, slots=True)
class Rule:
    what: str
    source: str
    quote: str


# The documented rules scale to zero rests on, with their sources (read 2026-12-03 in the stored
# copies; the GKE tutorial's English page was stored only in part, its "Considerations" in the
# zh-cn copy, translated here).
RULES: tuple[Rule, ...] = (
    Rule(
        "GKE version",
        "docs.cloud.google.com/kubernetes-engine/docs/tutorials/scale-to-from-zero-hpa",
        "the GKE cluster control plane and nodes must run version 1.37 or later",
    ),
    Rule(
        "metric type at minReplicas 0",
        "docs.cloud.google.com/kubernetes-engine/docs/tutorials/scale-to-from-zero-hpa",
        "You must configure at least one External or Object metric ... GKE cannot collect "
        "CPU or memory (Resource) metrics when the workload has zero Pods",
    ),
    Rule(
        "minReplicas 0 in the API",
        "autoscaling/v2 HorizontalPodAutoscalerSpec.minReplicas (API reference)",
        "minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and "
        "at least one Object or External metric is configured",
    ),
    Rule(
        "nothing buffers a request",
        "kubernetes.io/blog/2026/09/02/kubernetes-v1-37-hpa-scale-to-zero-beta",
        "Kubernetes Services do not buffer requests while no Pods are ready, so HTTP and other "
        "request-driven workloads need a separate buffering layer",
    ),
    Rule(
        "the Gateway's callout bound",
        "Network Services API, ExtensionChain.Extension.timeout",
        "a callout's per-message timeout is 10 to 10,000 ms: the picker cannot hold a request "
        "through a boot",
    ),
)

# A TPU node's provisioning (the autoscaler's scale-up, the VM's creation, the node joining):
# ASSUMED. Neither the build log nor any stored Google page gives a figure for a ct5lp node; the
# upstream cluster autoscaler gives up on a node after 15 minutes (its max-node-provision-time
# default), which bounds it from above. Replace with a measured figure when a cluster shows one.
NODE_PROVISION_ASSUMED_S = 120
# Before the autoscaler acts: Managed Prometheus scrapes the responder's count every 15 s (the
# PodMonitoring interval the serving stack uses) and the HPA controller syncs every 15 s
# (kube-controller-manager --horizontal-pod-autoscaler-sync-period default).
DETECTION_S = 15 + 15
# The cluster autoscaler removes a node no pod needs after 10 minutes (its
# scale-down-unneeded-time; tpudeploy.gke.ops.SCALE_DOWN_UNNEEDED_S, with its source).
NODE_UNNEEDED_S = 600
# The least a 503 asks a client to wait: one readiness period of the replica (10 s) plus the
# Service dropping the responder; asking for less only adds retries that find the same 503.
MIN_RETRY_AFTER_S = 15


def first_request_s() -> int:
    """Seconds from the first request at zero to a ready replica: detection, a TPU node, a
    warm boot (the compile cache restored; build log 497 s)."""
    return math.ceil(DETECTION_S + NODE_PROVISION_ASSUMED_S + facts.WARM_BOOT_S)


def retry_after_s(since_wake_s: float) -> int:
    """What a 503 tells a client `since_wake_s` after the wake began: the rest of the timeline,
    never less than MIN_RETRY_AFTER_S (a boot past its estimate is answered with the floor)."""
    return wake.retry_after_s(since_wake_s, total_s=first_request_s(), floor_s=MIN_RETRY_AFTER_S)


def waking_response(since_wake_s: float) -> tuple[int, dict[str, str], bytes]:
    """The wake responder's answer while no replica is ready (tpudeploy/gke/wake.py)."""
    return wake.waking_response(since_wake_s, total_s=first_request_s(), floor_s=MIN_RETRY_AFTER_S)


def wake_arguments(cfg: DeployConfig) -> list[str]:
    """wake.py's arguments after its path: where it listens (vLLM's port, behind the same front
    door), whose readiness it reads, the timeline, and the gate the front door waits for."""
    return [
        str(cfg.vllm.port),
        identifiers.namespace(cfg),
        cfg.name,
        str(first_request_s()),
        str(MIN_RETRY_AFTER_S),
    ]


@dataclass(frozen=True, slots=True)
class NoTraffic:
    """$ per hour with no request, at a given min_replicas."""

    min_replicas: int
    per_hour: float


def no_traffic(plan: ReplicaPlan, replicas: int) -> NoTraffic | None:
    hourly = plan.hourly(replicas)
    return None if hourly is None else NoTraffic(replicas, hourly)


def wake_overhead_s() -> int:
    """Seconds a replica bills around each active period without serving: its node's
    provisioning and warm boot before, the HPA's scale-down window and the node's unneeded time
    after."""
    return (
        NODE_PROVISION_ASSUMED_S
        + math.ceil(facts.WARM_BOOT_S)
        + scale_down_window_s()
        + (NODE_UNNEEDED_S)
    )


def break_even_active_hours(wakes_per_day: int) -> float:
    """Below this many active hours a day, zero costs less than one replica kept: a replica
    kept bills 24 h; at zero it bills the active hours plus each wake's overhead."""
    return 24.0 - wakes_per_day * wake_overhead_s() / 3600


def lines(cfg: DeployConfig) -> list[str]:
    """The summary's scale-to-zero lines: no-traffic cost at each min_replicas, the first
    request's latency from zero, the break-even."""
    plan = replica_plan(cfg)
    rows = [no_traffic(plan, n) for n in sorted({0, 1, cfg.gke.min_replicas})]
    if any(r is None for r in rows):
        return [f"no traffic: not priced: no {plan.chip_model} or idle-floor prices here"]
    priced = [r for r in rows if r is not None]
    by = ", ".join(
        f"${r.per_hour:.4f}/h at min_replicas = {r.min_replicas}"
        + (" (configured)" if r.min_replicas == cfg.gke.min_replicas else "")
        for r in priced
    )
    replica = priced[1].per_hour - priced[0].per_hour
    first = first_request_s()
    overhead = wake_overhead_s()
    return [
        f"no traffic: {by}: the idle floor plus min_replicas {plan.chip_model} chip(s) and "
        "their NAT share; the floor alone is what zero would cost",
        f"from zero: the first request waits ~{first} s (metric and HPA {DETECTION_S} s, a TPU "
        f"node ~{NODE_PROVISION_ASSUMED_S} s assumed, not measured, a warm boot "
        f"{facts.WARM_BOOT_S:g} s); meanwhile a client gets 503 with Retry-After from the wake "
        "responder (an always-on pod on the system node, inside the floor above)",
        f"break-even: zero is cheaper below {break_even_active_hours(1):.1f} active hours a day "
        f"with one wake a day ({break_even_active_hours(4):.1f} with four): each wake bills "
        f"~{overhead:,} s of a replica that serves nothing (boot before, the "
        f"{scale_down_window_s()} s scale-down window and {NODE_UNNEEDED_S} s node scale-down "
        "after), "
        f"${replica * overhead / 3600:.2f} at ${replica:.4f}/h",
    ]


# ---- the wake pod on the system node: its image, its share of the node, its disruptions -------

# Why the wake pod does not run the vLLM image (issue 39): it is always on, on the one system
# node, and uses python3 only. vllm/vllm-tpu is a multi-GB image (its size is not in the build
# log). Image streaming (the node pools' gcfs_config) does take public Docker Hub images, but
# "while streaming the image data, GKE downloads the entire container image onto the local disk
# in the background", and "during the first pull of an eligible image" its benefit may not show
# (cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, Overview and Limitations; the
# limitation read in the page's zh-cn copy in the stored corpus). So every new system node (an
# upgrade's surge node, a repair) would put all of it on its boot disk for a 180-line script,
# and a first pull there is the wake pod's start. The slim Python image (tpudeploy.pins.
# WAKE_IMAGE) holds what the three python3 steps need.

# What a Standard node offers pods: capacity less GKE's reservations ("Node allocatable
# resources": memory "25% of the first 4 GiB, 20% of the next 4 GiB, 10% of the next 8 GiB, 6%
# of the next 112 GiB, and 2% of any memory above 128 GiB", plus "an additional 100 MiB" for
# eviction; CPU 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% above 4:
# cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations;
# the memory tiers read through a calculator that quotes the page; the CPU tiers are the
# page's as commonly quoted, not read here: its English table was not in the stored excerpt).
_MEMORY_TIERS_GIB = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02))
_CPU_TIERS = ((1, 0.06), (1, 0.01), (2, 0.005), (float("inf"), 0.0025))
EVICTION_MIB = 100
# vCPUs and GiB of the system pool's machine types (Compute Engine's E2 standard types: 4 GiB
# per vCPU; cloud.google.com/compute/docs/general-purpose-machines, not re-read here).
SYSTEM_MACHINES = {"e2-standard-2": (2, 8), "e2-standard-4": (4, 16)}


def _reserved(total: float, tiers: tuple[tuple[float, float], ...]) -> float:
    left, out = total, 0.0
    for size, share in tiers:
        take = min(left, size)
        out, left = out + take * share, left - take
    return out


def system_allocatable(machine_type: str) -> tuple[int, int]:
    """(millicores, MiB) a node of `machine_type` offers pods; KeyError for a type not read."""
    cpus, gib = SYSTEM_MACHINES[machine_type]
    cpu_m = round((cpus - _reserved(cpus, _CPU_TIERS)) * 1000)
    memory_mib = int((gib - _reserved(gib, _MEMORY_TIERS_GIB)) * 1024) - EVICTION_MIB
    return cpu_m, memory_mib


# No PodDisruptionBudget for the wake pod. A budget that keeps its one pod (minAvailable 1)
# refuses every eviction of it: "A maxUnavailable of 0% or 0 or a minAvailable of 100% or equal
# to the number of replicas is permitted but can block nodes from being drained" (Red Hat's
# OpenShift docs on the Kubernetes PodDisruptionBudget, "Understanding how to use pod
# disruption budgets"; kubernetes.io's own page was not found in the stored corpus), and GKE's
# node upgrades keep disruption "within the limits of PodDisruptionBudget"
# (google.container.v1.NodePool.UpgradeSettings). On a one-node system pool every upgrade would
# stall on it until GKE gives up on the budget (how long GKE waits was not read here), and the
# pod goes anyway. A surge upgrade (GKE's default) creates the new node first:
# the wake pod is evicted and started there, and the gap is its start (a small pinned image,
# above). In that gap a request meets no ready endpoint and its connection fails at the load
# balancer, as it would at the end of a stall; a client that retries connection errors reaches
# the new pod. Only while no replica serves: the replicas never depend on the wake pod.


# ---- the wake path's Kubernetes objects (stacks/gke/wake_objects.py, at min_replicas 0) -------

WAKE_SCRIPT = "wake.py"
WAKE_DIR = "/opt/tpudeploy-wake"
# Both the replicas and the wake responder carry it; the Service selects it at min_replicas 0,
# so the load balancer reaches whichever of them is ready (the responder only while no replica
# is). The Deployments keep selectors of their own: overlapping selectors make controllers fight
# (kubernetes.io, Deployments, "Label selector updates").
SERVES_LABEL = "tpudeploy.dev/serves"
# The gauge's Cloud Monitoring name as the adapter reads it for an External metric: "|" for the
# "/" of prometheus.googleapis.com/<name>/gauge (tpudeploy.gke.metrics_adapter, the same rule
# the HPA's Pods metrics follow); its selector names the deployment's own namespace and cluster
# (Managed Prometheus's prometheus_target resource labels), so a second deployment in the
# project never wakes this one.
WAKE_TARGET = "1"


def scaled_to_zero(cfg: DeployConfig) -> bool:
    return cfg.gke.min_replicas == 0


def wake_name(cfg: DeployConfig) -> str:
    return f"{cfg.name}-wake"


def wake_labels(cfg: DeployConfig) -> dict[str, str]:
    return {"app.kubernetes.io/name": "wake", "app.kubernetes.io/instance": cfg.name}


def serves_labels(cfg: DeployConfig) -> dict[str, str]:
    return {SERVES_LABEL: cfg.name}


def wake_scripts() -> dict[str, str]:
    """The responder's file, verbatim (standard library only; tests run the same file)."""
    return {WAKE_SCRIPT: Path(wake.__file__).read_text(encoding="utf-8")}


def wake_command(cfg: DeployConfig, gate_file: str) -> list[str]:
    return ["python3", f"{WAKE_DIR}/{WAKE_SCRIPT}", *wake_arguments(cfg), gate_file]


def external_metric_name() -> str:
    return f"prometheus.googleapis.com|{wake.METRIC}|gauge"


def hpa_external_metric(cfg: DeployConfig) -> dict[str, Any]:
    """Provider-shaped (kubernetes_horizontal_pod_autoscaler_v2): the wake gauge of this
    deployment only, one replica while it is 1 (AverageValue: replicas = ceil(value / target),
    whatever runs now, so it works from zero)."""
    return {
        "type": "External",
        "external": {
            "metric": {
                "name": external_metric_name(),
                "selector": {
                    "match_labels": {
                        "resource.labels.namespace": identifiers.namespace(cfg),
                        "resource.labels.cluster": identifiers.cluster_name(cfg),
                    }
                },
            },
            "target": {"type": "AverageValue", "average_value": WAKE_TARGET},
        },
    }


def wake_pod_monitoring(cfg: DeployConfig, *, port: int) -> dict[str, Any]:
    """Managed Prometheus scrapes the responder's gauge through its front door's metrics port."""
    return {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": {"name": wake_name(cfg), "namespace": identifiers.namespace(cfg)},
        "spec": {
            "selector": {"matchLabels": wake_labels(cfg)},
            "endpoints": [{"port": port, "path": "/metrics", "interval": "15s"}],
        },
    }


def wake_role_rules(cfg: DeployConfig) -> list[dict[str, Any]]:
    """What the responder reads: its own Deployment's status, and nothing else."""
    return [
        {
            "api_groups": ["apps"],
            "resources": ["deployments"],
            "resource_names": [cfg.name],
            "verbs": ["get"],
        }
    ]
