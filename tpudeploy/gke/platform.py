"""GKE behind the seam (tpudeploy/platform.py): a cluster with TPU node pools and N replicas, its
stacks, its guard rails, its ops commands.

The ops commands' modules load when a command runs (imported in the method), always from this
package or below it; GKE never imports the TPU VM's package.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpudeploy import logsources, planner, policy, replicasecrets
from tpudeploy.alertpolicies import watching_parts
from tpudeploy.config import DeployConfig
from tpudeploy.errors import NotOnThisPlatform
from tpudeploy.gke import deadline_target, identifiers, nodetiles, pipeline, pod
from tpudeploy.gke.identifiers import NAMESPACE_PREFIX, NODE_PROJECT_ROLES
from tpudeploy.grants import PipelinePart

if TYPE_CHECKING:
    from tpudeploy.bench.commands import BenchTarget
    from tpudeploy.bench.sweep import Executor
    from tpudeploy.deadline_ops import Jobs
    from tpudeploy.endpoint import Endpoint
    from tpudeploy.terraform import StateResource
    from tpudeploy.usage import ReplicaLog


# The commands only one platform has (tpudeploy.platform.Platform.commands): why each TPU VM
# command is not GKE's, and what to use instead.
COMMANDS: Mapping[str, str | None] = {
    "tunnel": "it forwards a port to one TPU VM over IAP SSH; on GKE the front door is the "
    "Service's internal load balancer, which answers clients in the VPC's region only (every "
    "region with [gke] global_access; `make check` says who, `make endpoint` prints the "
    "address). A GKE tunnel is not built: it would reach one pod through the Kubernetes API "
    f"(port-forward), which `kubectl -n {NAMESPACE_PREFIX}{{name}} port-forward "
    "service/{name} {port}:{port}` already does with your cluster credentials",
    "recover": "it replaces one dead TPU VM; on GKE the Deployment replaces a lost replica by "
    "itself, and the node pools a preempted TPU node (`make status` shows both)",
    "pin": "it reads the image digests a TPU VM's boot published, and a pod cannot read the "
    "digest its node pulled; set [vllm] image (and [proxy] image) to a digest "
    "(image@sha256:...) yourself",
    "tune": "it boots the arms one after another on a TPU VM; running them side by side on GKE "
    "is not built yet (make tune-plan shows what it would cost). Tune with a tpu-vm config "
    '(platform = "tpu-vm"), then apply the winner to your GKE config',
}


def _cloud_scheduler() -> Jobs:
    from tpudeploy.gcp.scheduler import SchedulerApi

    return SchedulerApi(log=sys.stderr)


class Gke:
    name = "gke"
    replaces_dead_nodes = False
    billing_noun = "cluster, TPU node pool or replica"
    billing_stack_kinds: tuple[str, ...] = ("cluster", "serving")
    stop_nouns = deadline_target.STOP_NOUNS
    stop_permissions: tuple[str, ...] = deadline_target.STOP_PERMISSIONS
    node_reads_secrets = False
    node_project_roles: tuple[str, ...] = NODE_PROJECT_ROLES
    commands = COMMANDS
    # Each pod reads the certificate's files when it starts (the Secret Manager add-on).
    tls_takes_effect = (
        "from each replica's next start: replicas running now keep the old one until they are "
        "replaced (a rollout, or delete the pods)"
    )
    pipeline: PipelinePart = pipeline

    def declares_nat(self, cfg: DeployConfig) -> bool:
        # The nodes are always private (no external address): [network] nat = false only where
        # another deployment's NAT already serves the subnetwork.
        return cfg.network.nat

    def __init__(self, *, deadline_jobs: Callable[[], Jobs] | None = None) -> None:
        """`deadline_jobs`: the Cloud Scheduler client the cluster's deadline job is read and
        moved with (tpudeploy/gcp/scheduler.py unless a test hands in a fake)."""
        self.deadline_jobs = deadline_jobs or _cloud_scheduler

    def stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return (cfg.secrets_stack_name, cfg.gke_stack_name, cfg.serving_stack_name)

    def billing_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        # The serving objects: with no pod asking for google.com/tpu, the cluster autoscaler
        # removes the TPU nodes (both pools scale from 0), so the chip-hours stop. The cluster
        # (deletion protection on) and its idle floor stay until make destroy-all; the secrets
        # and the compile cache stay like on the TPU VM.
        return (cfg.serving_stack_name,)

    def protected_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return (cfg.gke_stack_name,)

    def describe(self, cfg: DeployConfig) -> str:
        g = cfg.gke
        return (
            f"GKE: {g.min_replicas}-{g.max_replicas} replicas of {cfg.accelerator_type} "
            f"({g.capacity}) in {cfg.zone}"
        )

    def recover_note(self, cfg: DeployConfig) -> str | None:
        # A preempted spot node or a recycled flex-start node is the node pool's: GKE's auto-repair
        # and the cluster autoscaler replace it while the Deployment asks for the replica. There is
        # no queued resource or VM in Terraform's state to replace (make rehearse PLATFORM=gke
        # found make deploy failing here: recover looked for the TPU VM's node stack).
        return (
            f"{cfg.name} runs on GKE: the node pools replace preempted or recycled TPU nodes "
            "themselves; nothing to recover"
        )

    def dashboard_tiles(self, cfg: DeployConfig) -> list[dict[str, Any]]:
        return nodetiles.tiles(cfg, selector=self.metrics_selector(cfg))

    def absence_grace_s(self, cfg: DeployConfig) -> int | None:
        if cfg.gke.min_replicas == 0:
            # Scale to zero (issue 39): no replica is expected while idle, so an absence is no
            # fault. A request that wakes the pool and is not served shows as the front door's
            # 5xx (the errors policy); with no replica there is no vLLM series to read a queue
            # from, so "requests waiting with no replica" has no metric here.
            return None
        # A replacement replica waits for spot capacity, then boots cold within its startup
        # probe's budget: the same bound the rollout's progress deadline uses.
        return pod.progress_deadline_s()

    def metrics_selector(self, cfg: DeployConfig) -> str:
        # Managed Prometheus writes each scraped series to the prometheus_target resource with
        # the cluster's name and the PodMonitoring's namespace as labels (cloud.google.com/
        # stackdriver/docs/managed-prometheus/query: "cluster", "namespace", "job"): the
        # deployment's own cluster and namespace (tpudeploy/gke/manifests.pod_monitoring).
        return f'cluster="{identifiers.cluster_name(cfg)}",namespace="{identifiers.namespace(cfg)}"'

    def log_filter(
        self,
        cfg: DeployConfig,
        project: str,
        whats: tuple[str, ...],
        *,
        now: datetime.datetime,
        since_s: int,
    ) -> str:
        # GKE's container logs, told apart by the deployment's own cluster and namespace.
        return logsources.gke_filter(
            project=project,
            cluster=identifiers.cluster_name(cfg),
            namespace=identifiers.namespace(cfg),
            whats=whats,
            now=now,
            since_s=since_s,
        )

    def log_metric_filter(self, cfg: DeployConfig, what: str) -> str | None:
        if what == logsources.PREEMPTION:
            # Only the spot pool's nodes are preempted; a flex-start node runs to its end.
            if "spot" not in cfg.gke.capacity_order:
                return None
            return logsources.gke_preemption_filter(
                cluster=identifiers.cluster_name(cfg), pool=identifiers.pool_name("spot")
            )
        return logsources.gke_metric_filter(
            cluster=identifiers.cluster_name(cfg), namespace=identifiers.namespace(cfg), what=what
        )

    def summary(self, cfg: DeployConfig, *, today: datetime.date | None) -> list[str]:
        from tpudeploy.gke.cache import cache_findings
        from tpudeploy.gke.scaleplan import configured
        from tpudeploy.gke.summary import summary

        return [*map(str, cache_findings(cfg)), *summary(cfg), *configured(cfg)]

    def findings(self, cfg: DeployConfig) -> list[planner.Finding]:
        from tpudeploy.gke import reach, routing, scaleplan, vpc

        return (
            routing.findings(cfg)
            + scaleplan.findings(cfg)
            + reach.findings(cfg)
            + vpc.findings(cfg)
            + policy.shared_findings(cfg)
        )

    def secrets(self, cfg: DeployConfig) -> tuple[tuple[str, str], ...]:
        # One front-door certificate for every replica (tpudeploy/tlscert.py) among them.
        return replicasecrets.shared(cfg)

    def permission_parts(self, cfg: DeployConfig, purpose: str) -> list[str]:
        keys = ["secrets (all models)", "secrets (gke: the nodes' account's project roles)"]
        deadline = cfg.deadline_seconds is not None
        if deadline:  # the job's account and role, in the secrets stack as on the TPU VM
            keys.append("secrets (a deadline job's account and role: spot, on-demand, GKE)")
        if purpose == "deploy":
            keys += ["cluster (gke)", "serving (gke)", "serving (gke: the custom metrics adapter)"]
            if deadline:
                keys.append("cluster (gke: the deadline job)")
            if cfg.routing.gateway:
                keys.append("serving (gke, [routing] gateway: the endpoint picker)")
        return keys + watching_parts(cfg, purpose)

    def apis(self, cfg: DeployConfig) -> tuple[tuple[str, bool, str], ...]:
        return (
            # The cluster stack enables it (google_project_service) before the cluster.
            ("container.googleapis.com", True, "the GKE cluster"),
            # Managed Prometheus stores vLLM's metrics in Cloud Monitoring, and the HPA reads
            # vllm:num_requests_waiting from there
            # (cloud.google.com/stackdriver/docs/managed-prometheus/setup-managed); the secrets
            # stack enables it now, for the dashboard and the alert policies (stacks/watch.py).
            ("monitoring.googleapis.com", True, "Managed Prometheus, the HPA, the dashboard"),
            # GKE Inference Gateway: "Enable the Compute Engine API, the Network Services API
            # ..." (cloud.google.com/kubernetes-engine/docs/how-to/deploy-gke-inference-gateway,
            # Before you begin); its certificate is a Certificate Manager one (tpudeploy.gke.
            # routing.CERT_OPTION). No stack enables either (issue 36, settled by reading).
            *(
                (
                    ("networkservices.googleapis.com", False, "GKE Inference Gateway"),
                    ("certificatemanager.googleapis.com", False, "the Gateway's certificate"),
                )
                if cfg.routing.gateway
                else ()
            ),
        )

    def billing_in_state(self, cfg: DeployConfig, resources: list[StateResource]) -> list[str]:
        from tpudeploy.gke.replicaplan import billing_in_state

        return billing_in_state(cfg, resources)

    def wait(self, cfg: DeployConfig, project: str, *, timeout: float, interval: float) -> int:
        from tpudeploy.gke import ops

        return ops.wait_ready(cfg, project, timeout=timeout, interval=interval)

    def status(self, cfg: DeployConfig, project: str) -> int:
        from tpudeploy.gke import ops

        return ops.status(cfg, project, jobs=self.deadline_jobs)

    def extend(
        self, cfg: DeployConfig, project: str, by: str, *, stack_dir: Callable[[], Path]
    ) -> int:
        # The cluster stack declares the TPU VM's deadline and job (stacks/deadline.py), with
        # the same addresses and variable: the shared extend moves them, reading the job through
        # the client the seam handed over.
        from tpudeploy.deadline_ops import extend

        extend(cfg, project, by, jobs=self.deadline_jobs(), stack_dir=stack_dir)
        return 0

    def endpoint(self, cfg: DeployConfig, project: str) -> Endpoint:
        from tpudeploy.gke import frontdoor

        return frontdoor.resolve_endpoint(cfg, project)

    def endpoint_report(self, cfg: DeployConfig, project: str, *, cert_out: str) -> int:
        from tpudeploy.gke import frontdoor

        return frontdoor.endpoint_report(cfg, project, cert_out=cert_out)

    def tunnel(self, cfg: DeployConfig, project: str) -> int:
        self.require(cfg, "tunnel")  # refuses: COMMANDS says what to use instead
        return 1

    def cleanup(self, cfg: DeployConfig, project: str, *, timeout: float | None) -> int:
        from tpudeploy.gke import ops

        return ops.after_destroy(cfg, project)

    def bench_target(
        self, cfg: DeployConfig, project: str, *, plan: bool, route: str = "replica"
    ) -> tuple[BenchTarget, Executor] | None:
        from tpudeploy.bench.sweep import subprocess_executor
        from tpudeploy.gke import bench

        if plan:
            return bench.plan_target(cfg, route), subprocess_executor
        return bench.bench_target(cfg, project, route=route)

    def access_logs(self, cfg: DeployConfig, project: str, since_s: int) -> list[ReplicaLog]:
        from tpudeploy.gke import accesslog

        return accesslog.access_logs(cfg, project, since_s)

    def usage_model(self, cfg: DeployConfig) -> str:
        # The ComputeClass's first capacity: what a replica runs on while it has it.
        return cfg.gke.capacity_order[0]

    def require(self, cfg: DeployConfig, command: str) -> None:
        instead = self.commands.get(command)
        if instead is not None:
            raise NotOnThisPlatform(
                command, self.name, instead.format(name=cfg.name, port=cfg.proxy.port)
            )
