"""The one seam between the two platforms: what differs by platform is asked of a Platform.

Callers (the CLI, main.py, stacks/app.py) never branch on `cfg.platform` themselves; they take
`platform_for(cfg)` and ask it. The TPU VM's implementation calls what existed before GKE;
GKE's lives in tpudeploy.gke.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Protocol

from tpudeploy import planner
from tpudeploy.config import DeployConfig
from tpudeploy.errors import UserError

if TYPE_CHECKING:
    from tpudeploy.bench.commands import BenchTarget
    from tpudeploy.bench.sweep import Executor
    from tpudeploy.frontdoor import Endpoint
    from tpudeploy.terraform import StateResource


class NotOnThisPlatform(UserError):
    """A command that exists for the other platform only; the message says what to use."""


class Platform(Protocol):
    name: str
    # `make deploy` first marks a dead (preempted, suspended) node for replacement.
    replaces_dead_nodes: bool
    # What a failed deploy or destroy looks for in state ("no TPU node or queued resource").
    billing_noun: str

    def stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        """Every stack, in the order `make deploy` applies them (destroy runs it backwards)."""
        ...

    def billing_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        """What `make destroy` removes: everything that bills per hour of chip."""
        ...

    def protected_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        """Stacks with a `deletion_protection` variable that `make destroy-all` sets false
        (an apply) before destroying them."""
        ...

    def describe(self, cfg: DeployConfig) -> str:
        """One line: what runs where."""
        ...

    def recover_note(self, cfg: DeployConfig) -> str | None:
        """None where `tpudeploy recover` (the first step of make deploy, and make recover)
        applies; else why this platform has nothing for it to replace."""
        ...

    def summary(self, cfg: DeployConfig, *, today: datetime.date | None) -> list[str]:
        """The cost and capacity lines `make synth`, `make check` and `make cost` end with."""
        ...

    def findings(self, cfg: DeployConfig) -> list[planner.Finding]:
        """The guard rails' findings on `cfg` (tpudeploy.policy sorts and applies them)."""
        ...

    def secrets(self, cfg: DeployConfig) -> tuple[tuple[str, str], ...]:
        """(secret id, the command that adds its version) for every secret the replicas read:
        the secrets stack declares them, preflight requires a version of each."""
        ...

    def permission_parts(self, cfg: DeployConfig, purpose: str) -> list[str]:
        """The tpudeploy.permissions.STACK_RESOURCES parts `make <purpose>` creates."""
        ...

    def apis(self, cfg: DeployConfig) -> tuple[tuple[str, bool, str], ...]:
        """(service, a stack enables it, what needs it): what preflight checks is enabled."""
        ...

    def billing_in_state(self, cfg: DeployConfig, resources: list[StateResource]) -> list[str]:
        """The resources of the billing-part stacks' state that bill, each with what it costs."""
        ...

    def wait(self, cfg: DeployConfig, project: str, *, timeout: float, interval: float) -> int:
        """`make wait`: follow the boot until the API is ready (0), failed (1), timed out (3)."""
        ...

    def status(self, cfg: DeployConfig, project: str) -> int:
        """`make status`: what runs, what it costs now, when the billing stops."""
        ...

    def endpoint(self, cfg: DeployConfig, project: str) -> Endpoint:
        """The front door's URL and the certificate fingerprint to pin (ENDPOINT and
        TLS_SHA256 override each lookup)."""
        ...

    def endpoint_report(self, cfg: DeployConfig, project: str, *, cert_out: str) -> int:
        """`make endpoint`: where the API is, the certificate and how clients pin it."""
        ...

    def tunnel(self, cfg: DeployConfig, project: str) -> int:
        """`make tunnel`: a local port to the front door."""
        ...

    def cleanup(self, cfg: DeployConfig, project: str, *, timeout: float | None) -> int:
        """What `make destroy` runs after cdktf destroy, whatever Terraform's state says."""
        ...

    def bench_target(
        self, cfg: DeployConfig, project: str, *, plan: bool, route: str = "replica"
    ) -> tuple[BenchTarget, Executor] | None:
        """Where `make bench` runs the sweep and how; None: on the TPU VM the config names
        (--node and --zone override it). `plan`: for printing only, without asking the cloud.
        `route`: "replica", one server's own vLLM; "gateway", the pool through [routing]'s
        Gateway (the CLI has checked that the config routes through one)."""
        ...

    def require(self, cfg: DeployConfig, command: str) -> None:
        """Raise NotOnThisPlatform for a command this platform does not have (extend, pin)."""
        ...


class TpuVm:
    name = "tpu-vm"
    replaces_dead_nodes = True
    billing_noun = "TPU node or queued resource"

    def stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return (cfg.secrets_stack_name, cfg.node_stack_name)

    def billing_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return (cfg.node_stack_name,)

    def protected_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return ()

    def describe(self, cfg: DeployConfig) -> str:
        return f"{cfg.provisioning} {cfg.accelerator_type} in {cfg.zone}"

    def recover_note(self, cfg: DeployConfig) -> str | None:
        return None

    def summary(self, cfg: DeployConfig, *, today: datetime.date | None) -> list[str]:
        return planner.synth_summary(cfg, today=today)

    def findings(self, cfg: DeployConfig) -> list[planner.Finding]:
        return planner.check_settings(cfg)

    def secrets(self, cfg: DeployConfig) -> tuple[tuple[str, str], ...]:
        return ((cfg.hf_token_secret_id, "make secret"), (cfg.api_key_secret_id, "make api-key"))

    def permission_parts(self, cfg: DeployConfig, purpose: str) -> list[str]:
        vm = cfg.provisioning != "flex-start"
        keys = ["secrets (all models)"]
        if vm:
            keys.append("secrets (a deadline job's account and role: spot, on-demand, GKE)")
        if purpose == "deploy":
            keys += ["node (all models)", "node (spot, on-demand)" if vm else "node (flex-start)"]
            if cfg.declares_nat:
                keys.append("node (no external address)")
        return keys

    def apis(self, cfg: DeployConfig) -> tuple[tuple[str, bool, str], ...]:
        # The secrets stack enables every API the TPU VM uses (stacks/secrets.py).
        return ()

    def billing_in_state(self, cfg: DeployConfig, resources: list[StateResource]) -> list[str]:
        from tpudeploy.failures import billing_resources

        return billing_resources(cfg, resources)

    def wait(self, cfg: DeployConfig, project: str, *, timeout: float, interval: float) -> int:
        from tpudeploy.tpuvm import wait

        return wait.wait_ready(cfg, project, timeout=timeout, interval=interval)

    def status(self, cfg: DeployConfig, project: str) -> int:
        from tpudeploy.tpuvm.vmstatus import status

        return status(cfg, project)

    def endpoint(self, cfg: DeployConfig, project: str) -> Endpoint:
        from tpudeploy import frontdoor

        return frontdoor.resolve_endpoint(cfg, project)

    def endpoint_report(self, cfg: DeployConfig, project: str, *, cert_out: str) -> int:
        from tpudeploy import frontdoor

        return frontdoor.endpoint_report(cfg, project, cert_out=cert_out)

    def tunnel(self, cfg: DeployConfig, project: str) -> int:
        from tpudeploy import frontdoor

        return frontdoor.run_tunnel(cfg, project)

    def cleanup(self, cfg: DeployConfig, project: str, *, timeout: float | None) -> int:
        from tpudeploy.tpuvm.flex import delete_queued_resource

        return delete_queued_resource(cfg, project, timeout=timeout)

    def bench_target(
        self, cfg: DeployConfig, project: str, *, plan: bool, route: str = "replica"
    ) -> tuple[BenchTarget, Executor] | None:
        return None

    def require(self, cfg: DeployConfig, command: str) -> None:
        return None


# Not built for GKE (issue 25 leaves them): what to do instead.
GKE_NOT_BUILT = {
    "extend": "make extend moves a TPU VM's deadline job; GKE's TPU nodes end by "
    "[gke] max_run_duration (flex-start) or `make destroy`",
    "pin": "make pin reads the digests one TPU VM published; on GKE set [vllm] image to a "
    "digest (image@sha256:...) yourself",
}


class Gke:
    name = "gke"
    replaces_dead_nodes = False
    billing_noun = "cluster, TPU node pool or replica"

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

    def summary(self, cfg: DeployConfig, *, today: datetime.date | None) -> list[str]:
        from tpudeploy.gke.cache import cache_findings
        from tpudeploy.gke.plan import summary
        from tpudeploy.gke.scaleplan import configured

        return [*map(str, cache_findings(cfg)), *summary(cfg), *configured(cfg)]

    def findings(self, cfg: DeployConfig) -> list[planner.Finding]:
        from tpudeploy.gke import routing, scaleplan

        return routing.findings(cfg) + scaleplan.findings(cfg) + planner.check_settings(cfg)

    def secrets(self, cfg: DeployConfig) -> tuple[tuple[str, str], ...]:
        # One front-door certificate for every replica (tpudeploy/gke/tlscert.py).
        return (*TpuVm().secrets(cfg), (cfg.tls_secret_id, "make tls-cert"))

    def permission_parts(self, cfg: DeployConfig, purpose: str) -> list[str]:
        keys = ["secrets (all models)"]
        deadline = cfg.deadline_seconds is not None
        if deadline:  # the job's account and role, in the secrets stack as on the TPU VM
            keys.append("secrets (a deadline job's account and role: spot, on-demand, GKE)")
        if purpose == "deploy":
            keys += ["cluster (gke)", "serving (gke)", "serving (gke: the custom metrics adapter)"]
            if deadline:
                keys.append("cluster (gke: the deadline job)")
            if cfg.routing.gateway:
                keys.append("serving (gke, [routing] gateway: the endpoint picker)")
        return keys

    def apis(self, cfg: DeployConfig) -> tuple[tuple[str, bool, str], ...]:
        return (
            # The cluster stack enables it (google_project_service) before the cluster.
            ("container.googleapis.com", True, "the GKE cluster"),
            # Managed Prometheus stores vLLM's metrics in Cloud Monitoring, and the HPA reads
            # vllm:num_requests_waiting from there; no stack enables it
            # (cloud.google.com/stackdriver/docs/managed-prometheus/setup-managed).
            ("monitoring.googleapis.com", False, "Managed Prometheus and the HPA's metric"),
        )

    def billing_in_state(self, cfg: DeployConfig, resources: list[StateResource]) -> list[str]:
        from tpudeploy.gke.plan import billing_in_state

        return billing_in_state(cfg, resources)

    def wait(self, cfg: DeployConfig, project: str, *, timeout: float, interval: float) -> int:
        from tpudeploy.gke import ops

        return ops.wait_ready(cfg, project, timeout=timeout, interval=interval)

    def status(self, cfg: DeployConfig, project: str) -> int:
        from tpudeploy.gke import ops

        return ops.status(cfg, project)

    def endpoint(self, cfg: DeployConfig, project: str) -> Endpoint:
        from tpudeploy.gke import frontdoor

        return frontdoor.resolve_endpoint(cfg, project)

    def endpoint_report(self, cfg: DeployConfig, project: str, *, cert_out: str) -> int:
        from tpudeploy.gke import frontdoor

        return frontdoor.endpoint_report(cfg, project, cert_out=cert_out)

    def tunnel(self, cfg: DeployConfig, project: str) -> int:
        raise NotOnThisPlatform(
            "make tunnel forwards a port to one TPU VM over IAP SSH; on GKE the front door is "
            "the Service's internal load balancer: reach it from the VPC or [network] "
            "allowed_cidrs (`make endpoint` prints the address), or forward a port with "
            f"`kubectl -n tpudeploy port-forward service/{cfg.name} "
            f"{cfg.proxy.port}:{cfg.proxy.port}`"
        )

    def cleanup(self, cfg: DeployConfig, project: str, *, timeout: float | None) -> int:
        from tpudeploy.gke import ops

        return ops.after_destroy(cfg, project)

    def bench_target(
        self, cfg: DeployConfig, project: str, *, plan: bool, route: str = "replica"
    ) -> tuple[BenchTarget, Executor] | None:
        from tpudeploy.bench.sweep import subprocess_executor
        from tpudeploy.gke import bench

        if plan:
            return bench.plan_target(route), subprocess_executor
        return bench.bench_target(cfg, project, route=route)

    def require(self, cfg: DeployConfig, command: str) -> None:
        if command in GKE_NOT_BUILT:
            raise NotOnThisPlatform(f'{GKE_NOT_BUILT[command]} (platform = "gke")')


PLATFORMS: dict[str, Platform] = {"tpu-vm": TpuVm(), "gke": Gke()}


def platform_for(cfg: DeployConfig) -> Platform:
    return PLATFORMS[cfg.platform]
