"""The ops commands on GKE, behind tpudeploy.platform.Gke: `make wait` (the rollout and each
replica's phase), `make status` (replicas, TPU nodes by capacity type, the HPA, $/hour now),
the front door's address for `make endpoint` / `make smoke`, and what `make destroy` leaves."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.deadline_ops import Jobs
from tpudeploy.gcp.container import ClusterMissing, KubeError
from tpudeploy.gke import deadline_target, identifiers, replicaplan
from tpudeploy.gke import pod as pod_targets
from tpudeploy.gke.identifiers import namespace as ns
from tpudeploy.gke.kube import KubeApi
from tpudeploy.gke.manifests import labels
from tpudeploy.gke.metrics_adapter import KV_CACHE_METRIC, WAITING_METRIC
from tpudeploy.gke.pod import VLLM_CONTAINER
from tpudeploy.planner import NoPricesError, price_table
from tpudeploy.planner.cost import SEED_BOOT
from tpudeploy.terminal import printable
from tpudeploy.timefmt import format_seconds

# The labels GKE puts on a node by how it was provisioned, value "true" (Spot VMs:
# cloud.google.com/kubernetes-engine/docs/concepts/spot-vms; flex-start: the GKE docs' pods
# select it with nodeSelector cloud.google.com/gke-flex-start: "true", and the cluster
# autoscaler's GCE provider names it FlexStartLabel), then the pools' own label
# (tpudeploy.gke.identifiers.pool_labels) for a node GKE labelled neither way.
SPOT_LABEL = "cloud.google.com/gke-spot"
FLEX_START_LABEL = "cloud.google.com/gke-flex-start"
OWN_CAPACITY_LABEL = "tpudeploy/capacity"
TPU_NODE_SELECTOR = "cloud.google.com/gke-tpu-accelerator"
# Cluster autoscaler: a node unneeded for 10 minutes is removed (--scale-down-unneeded-time,
# github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/FAQ.md).
SCALE_DOWN_UNNEEDED_S = 600


def _deployment_path(cfg: DeployConfig) -> str:
    return f"/apis/apps/v1/namespaces/{ns(cfg)}/deployments/{cfg.name}"


def selector(cfg: DeployConfig) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels(cfg).items()))


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


# --- one replica's phase ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Replica:
    name: str
    phase: str  # waiting-for-node, starting, compiling, ready, failed
    detail: str
    node: str
    started: datetime | None


_PHASES = {
    "waiting-for-node": "no TPU node fits yet: the autoscaler adds one (spot first, then "
    "flex-start)",
    "starting": "on a node: the init container writes the front door's files, the image starts",
    "compiling": "vLLM is loading and compiling (build log: cold boot 857 s, warm 497 s)",
    "ready": "vLLM and the front door answer /health",
}
# Container waiting reasons that do not fix themselves (kubelet: the ContainerStatus reasons).
_STUCK = {
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "InvalidImageName",
    "CreateContainerError",
}


def vllm_status(pod: dict[str, Any]) -> dict[str, Any]:
    """The vLLM container's ContainerStatus in a pod ({} before the kubelet reports one)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((dict(c) for c in statuses if c.get("name") == VLLM_CONTAINER), {})


def replica_of(pod: dict[str, Any]) -> Replica:
    """A pod's phase in the words `make wait` prints, from its status (v1 PodStatus)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    name, node = printable(str(meta.get("name", "?"))), printable(str(spec.get("nodeName", "")))
    started = _parse_time(str(status.get("startTime") or meta.get("creationTimestamp") or ""))
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if status.get("phase") in ("Failed", "Unknown"):
        return Replica(
            name,
            "failed",
            printable(str(status.get("reason") or status.get("phase"))),
            node,
            started,
        )
    for c in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _STUCK:
            why = printable(
                f"{c.get('name')}: {waiting.get('reason')} {waiting.get('message', '')}"
            )
            return Replica(name, "failed", why.strip(), node, started)
        terminated = (c.get("state") or {}).get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) != 0 and c.get("name") == "frontdoor-prep":
            why = printable(
                f"frontdoor-prep exited {terminated.get('exitCode')}: "
                f"{terminated.get('message') or terminated.get('reason', '')}"
            )
            return Replica(name, "failed", why, node, started)
    scheduled = conditions.get("PodScheduled") or {}
    if not node:
        detail = str(scheduled.get("message") or "") if scheduled.get("status") == "False" else ""
        return Replica(name, "waiting-for-node", printable(detail), node, started)
    if (conditions.get("Ready") or {}).get("status") == "True":
        return Replica(name, "ready", "", node, started)
    vllm = vllm_status(pod)
    if "running" in (vllm.get("state") or {}):
        return Replica(name, "compiling", "", node, started)
    return Replica(name, "starting", "", node, started)


@dataclass(frozen=True, slots=True)
class Rollout:
    desired: int
    updated: int
    ready: int
    current: bool  # the controller has seen the latest spec
    replicas: tuple[Replica, ...]
    total: int = 0  # status.replicas: old and new pods together
    available: int = 0

    @property
    def done(self) -> bool:
        """kubectl rollout status's test: the latest spec seen, every wanted replica on it,
        no old replica left, every new one available (kubectl's rollout_status.go)."""
        return (
            self.current
            and self.desired > 0
            and self.updated >= self.desired
            and self.total <= self.updated
            and self.available >= self.updated
        )


def read_rollout(cfg: DeployConfig, api: KubeApi) -> Rollout | None:
    """The Deployment's status and its pods; None when the Deployment does not exist."""
    dep = api.get(_deployment_path(cfg))
    if dep is None:
        return None
    status, spec = dep.get("status") or {}, dep.get("spec") or {}
    generation = int((dep.get("metadata") or {}).get("generation") or 0)
    pods = api.items(f"/api/v1/namespaces/{ns(cfg)}/pods", selector(cfg))
    return Rollout(
        # spec.replicas defaults to 1 (DeploymentSpec); the HPA sets it after the first apply.
        desired=int(spec.get("replicas", 1)),
        updated=int(status.get("updatedReplicas") or 0),
        ready=int(status.get("readyReplicas") or 0),
        current=int(status.get("observedGeneration") or 0) >= generation,
        total=int(status.get("replicas") or 0),
        available=int(status.get("availableReplicas") or 0),
        replicas=tuple(sorted((replica_of(p) for p in pods), key=lambda r: r.name)),
    )


def _replica_line(r: Replica, now: datetime) -> str:
    age = ""
    if r.started is not None:
        age = f" for {format_seconds(max(0.0, (now - r.started).total_seconds()))}"
    where = f" on {r.node}" if r.node else ""
    return f"  {r.name}: {r.phase}{age}{where}: {r.detail or _PHASES.get(r.phase, '')}"


def wait_ready(
    cfg: DeployConfig,
    project: str,
    *,
    api: KubeApi | None = None,
    timeout: float,
    interval: float,
    out: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Follow the rollout until every wanted replica is ready (0), one failed (1) or the
    timeout (3); the replicas' lines again whenever one changes phase."""
    out = out or sys.stdout
    api = api or KubeApi.for_deployment(cfg, project)
    budget = replicaplan.startup_budget_s()
    print(
        f"following Deployment {ns(cfg)}/{cfg.name}: a new replica needs a TPU node, then a boot "
        f"(planner: cold {SEED_BOOT.cold_s:g} s, warm {SEED_BOOT.warm_s:g} s with the compile "
        f"cache; the startup probe gives up after {budget} s)",
        file=out,
    )
    start, last = clock(), None
    while True:
        elapsed = clock() - start
        rollout = read_rollout(cfg, api)
        if rollout is None:
            print(
                f"Deployment {ns(cfg)}/{cfg.name} does not exist: `make deploy` applies the "
                "serving stack (after the cluster)",
                file=out,
            )
            return 1
        seen = (
            rollout.ready,
            rollout.updated,
            rollout.desired,
            tuple((r.name, r.phase) for r in rollout.replicas),
        )
        if seen != last:
            print(
                f"[{format_seconds(elapsed)}] {rollout.ready}/{rollout.desired} replica(s) "
                f"ready, {rollout.updated} on the latest spec",
                file=out,
            )
            for replica in rollout.replicas:
                print(_replica_line(replica, now()), file=out)
            last = seen
        failed = [r for r in rollout.replicas if r.phase == "failed"]
        if failed:
            print(
                f"replica {failed[0].name} failed: {failed[0].detail}. Next: `make status`; its "
                f"logs: kubectl -n {ns(cfg)} logs {failed[0].name} -c vllm (after `gcloud "
                f"container clusters get-credentials {identifiers.cluster_name(cfg)} --zone "
                f"{cfg.zone} --project {project}`)",
                file=out,
            )
            return 1
        if rollout.done:
            print(
                f"ready after {format_seconds(elapsed)} of waiting: {rollout.ready} replica(s). "
                "Next: make endpoint (address and certificate), make smoke, then make accept "
                "(the build log's acceptance table)",
                file=out,
            )
            return 0
        if elapsed >= timeout:
            print(
                f"timed out after {format_seconds(elapsed)}: {rollout.ready}/{rollout.desired} "
                "ready"
                + (
                    ""
                    if rollout.current
                    else " (of the previous spec: the new one is not rolled out yet)"
                )
                + ". Next: `make status` (a replica waiting for a node means neither spot "
                "nor flex-start had capacity yet)",
                file=out,
            )
            return 3
        sleep(interval)


# --- make status ------------------------------------------------------------------------------


def capacity_of(node: dict[str, Any]) -> str:
    node_labels = (node.get("metadata") or {}).get("labels") or {}
    if node_labels.get(SPOT_LABEL) == "true":
        return "spot"
    if node_labels.get(FLEX_START_LABEL) == "true":
        return "flex-start"
    return str(node_labels.get(OWN_CAPACITY_LABEL) or "on-demand")


def tpu_nodes(api: KubeApi) -> dict[str, list[str]]:
    """TPU node names by capacity type."""
    found: dict[str, list[str]] = {}
    for node in api.items("/api/v1/nodes", TPU_NODE_SELECTOR):
        name = printable(str((node.get("metadata") or {}).get("name", "?")))
        found.setdefault(capacity_of(node), []).append(name)
    return found


def hourly_now(cfg: DeployConfig, by_capacity: dict[str, list[str]]) -> str:
    """$/hour of what runs now: the idle floor plus each TPU node at its model's rate and
    its NAT gateway share (tpudeploy.gke.replicaplan)."""
    try:
        prices = price_table(cfg)
        floor = replicaplan.idle_items(cfg)
        nat = facts.GKE_IDLE_PRICES[cfg.effective_region][1].per_hour
        chips = sum(
            len(nodes) * (prices.rate(capacity) + nat) for capacity, nodes in by_capacity.items()
        )
    except (NoPricesError, KeyError) as exc:
        return f"cost now: not estimated ({exc})"
    idle = sum(rate for _, rate in floor)
    count = sum(len(n) for n in by_capacity.values())
    return (
        f"cost now: ${idle + chips:.4f}/h (idle floor ${idle:.4f} + {count} TPU node(s) "
        f"${chips:.4f})"
    )


def _hpa_lines(cfg: DeployConfig, api: KubeApi) -> list[str]:
    hpa = api.get(f"/apis/autoscaling/v2/namespaces/{ns(cfg)}/horizontalpodautoscalers/{cfg.name}")
    if hpa is None:
        return ["autoscaler: none (the serving stack is not applied)"]
    status = hpa.get("status") or {}
    value, kv = "no reading yet", "no reading yet"
    for metric in status.get("currentMetrics") or []:
        pods = metric.get("pods") or {}
        name = str((pods.get("metric") or {}).get("name", ""))
        current = printable(str((pods.get("current") or {}).get("averageValue")))
        if WAITING_METRIC in name:
            value = f"{current} waiting"
        elif KV_CACHE_METRIC in name:
            kv = current
    conditions = ", ".join(
        printable(f"{c.get('type')}={c.get('status')} ({c.get('reason', '')})")
        for c in status.get("conditions") or []
    )
    target = replicaplan.replica_plan(cfg).autoscaling.waiting_target
    return [
        f"autoscaler: {status.get('currentReplicas', 0)} -> {status.get('desiredReplicas', 0)} "
        f"replica(s) ({cfg.gke.min_replicas}..{cfg.gke.max_replicas}); {WAITING_METRIC} {value} "
        f"per replica, target {target}",
        f"  {KV_CACHE_METRIC} {kv} per replica, target {pod_targets.hpa_kv_target(cfg)}",
        *([f"  {conditions}"] if conditions else []),
    ]


def status_lines(
    cfg: DeployConfig,
    project: str,
    *,
    jobs: Callable[[], Jobs],
    api: KubeApi | None = None,
    now: datetime | None = None,
) -> list[str]:
    """`jobs`: the Cloud Scheduler client the cluster's deadline is read with (tpudeploy.platform
    hands it over)."""
    now = now or datetime.now(UTC)
    try:
        api = api or KubeApi.for_deployment(cfg, project)
    except ClusterMissing as exc:
        # The deadline job deletes the cluster: when it is gone, what the job says is the news.
        return [str(exc), *deadline_target.status_lines(cfg, project, jobs, exists=False, now=now)]
    lines = [f"cluster {identifiers.cluster_name(cfg)} ({cfg.zone})"]
    rollout = read_rollout(cfg, api)
    if rollout is None:
        lines.append(
            f"replicas: none (no Deployment {ns(cfg)}/{cfg.name}; `make deploy` applies it)"
        )
    else:
        lines.append(
            f"replicas: {rollout.ready}/{rollout.desired} ready, {rollout.updated} on "
            "the latest spec"
        )
        lines += [_replica_line(r, now) for r in rollout.replicas]
    nodes = tpu_nodes(api)
    shown = ", ".join(f"{len(v)} {k} ({', '.join(v)})" for k, v in sorted(nodes.items()))
    lines.append(f"TPU nodes: {shown or 'none'}")
    lines += _hpa_lines(cfg, api)
    lines.append(hourly_now(cfg, nodes))
    lines.append(
        f"billing stops: flex-start nodes after {cfg.gke.max_run_duration_seconds / 3600:g} h; "
        "spot nodes when `make destroy` removes the replicas; the idle floor at "
        "`make destroy-all`"
    )
    return lines + deadline_target.status_lines(cfg, project, jobs, exists=True, now=now)


def status(
    cfg: DeployConfig,
    project: str,
    *,
    jobs: Callable[[], Jobs],
    out: TextIO | None = None,
    api: KubeApi | None = None,
) -> int:
    print("\n".join(status_lines(cfg, project, jobs=jobs, api=api)), file=out or sys.stdout)
    return 0


# --- the front door ---------------------------------------------------------------------------


def service_address(cfg: DeployConfig, project: str, *, api: KubeApi | None = None) -> str:
    """The internal load balancer's address from the Service's status, or KubeError."""
    api = api or KubeApi.for_deployment(cfg, project)
    svc = api.get(f"/api/v1/namespaces/{ns(cfg)}/services/{cfg.name}")
    if svc is None:
        raise KubeError(
            f"Service {ns(cfg)}/{cfg.name} does not exist: `make deploy` applies the serving stack"
        )
    for ingress in ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
        if ingress.get("ip"):
            return printable(str(ingress["ip"]))
    raise KubeError(
        f"Service {ns(cfg)}/{cfg.name} has no load balancer address yet (GKE provisions it in a "
        "minute or two after the apply): try again, `make status` shows the replicas"
    )


class GatewayNotReady(KubeError):
    """The Gateway is not there, or has no address yet; the message says which and why."""


def gateway_address(cfg: DeployConfig, api: KubeApi) -> str:
    """The Gateway's address from its status (Gateway API v1 GatewayStatus: addresses[].value
    once the controller programmed it); GatewayNotReady saying why there is none yet."""
    path = f"/apis/gateway.networking.k8s.io/v1/namespaces/{ns(cfg)}/gateways/{cfg.name}"
    gateway = api.get(path)
    if gateway is None:
        raise GatewayNotReady(
            f"Gateway {ns(cfg)}/{cfg.name} does not exist: `make deploy` applies it with the "
            "serving stack"
        )
    status = gateway.get("status") or {}
    for address in status.get("addresses") or []:
        if address.get("value"):
            return printable(str(address["value"]))
    programmed = {c.get("type"): c for c in status.get("conditions") or []}.get("Programmed", {})
    why = printable(str(programmed.get("message") or programmed.get("reason") or "no status yet"))
    raise GatewayNotReady(
        f"Gateway {ns(cfg)}/{cfg.name} has no address yet ({why}): GKE creates its load balancer a "
        "few minutes after the apply; try again"
    )


def gateway_line(cfg: DeployConfig, project: str, *, api: KubeApi | None = None) -> str:
    """Where the Gateway ([routing] gateway) answers, or why not yet."""
    try:
        return f"https://{gateway_address(cfg, api or KubeApi.for_deployment(cfg, project))}/v1"
    except GatewayNotReady as exc:
        return str(exc)


# --- after make destroy -----------------------------------------------------------------------


def after_destroy(
    cfg: DeployConfig, project: str, *, api: KubeApi | None = None, out: TextIO | None = None
) -> int:
    """What still bills once the serving stack is gone: TPU nodes until the autoscaler removes
    them (no pod asks for a chip any more), and the idle floor until `make destroy-all`."""
    out = out or sys.stdout
    try:
        nodes = tpu_nodes(api or KubeApi.for_deployment(cfg, project))
    except ClusterMissing:
        # After make destroy-all (or before any deploy): no cluster, so no node and no floor.
        print(
            f"cluster {identifiers.cluster_name(cfg)} does not exist: nothing of it bills.",
            file=out,
        )
        return 0
    except KubeError as exc:
        print(
            f"could not list the cluster's TPU nodes after the destroy ({exc}); "
            "`make status` shows them",
            file=out,
        )
        return 0
    count = sum(len(v) for v in nodes.values())
    if count:
        print(
            f"{count} TPU node(s) still up ({hourly_now(cfg, nodes)}): the cluster autoscaler "
            f"removes a node no pod needs after {SCALE_DOWN_UNNEEDED_S // 60} minutes; "
            "`make status` shows when they are gone",
            file=out,
        )
    else:
        print("no TPU node is up: no chip bills.", file=out)
    print(
        f"the cluster {identifiers.cluster_name(cfg)} stays (its TPU pools are empty, autoscaled "
        "from 0; an empty pool has no VM and bills nothing) and so does its idle floor: "
        "`make destroy-cluster` removes it (the secrets stay), `make destroy-all` everything",
        file=out,
    )
    return 0
