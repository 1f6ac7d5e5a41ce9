"""The TPU VM behind the seam (tpudeploy/platform.py): one node, a spot or on-demand TPU VM or a
flex-start queued resource, its stacks, its guard rails, its ops commands.

The ops commands' modules load when a command runs (imported in the method: a `make check`
never pays for the TPU API client), always from this package or below it.
"""

from __future__ import annotations

import datetime
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpudeploy import facts, logsources, opsagent, planner, policy, replicasecrets
from tpudeploy.alertpolicies import BOOT_GRACE_MARGIN, watching_parts
from tpudeploy.config import DeployConfig
from tpudeploy.errors import NotOnThisPlatform
from tpudeploy.grants import PipelinePart
from tpudeploy.tpuvm import billing_state, deadline_target, pipeline

if TYPE_CHECKING:
    from tpudeploy.bench.commands import BenchTarget
    from tpudeploy.bench.sweep import Executor
    from tpudeploy.endpoint import Endpoint
    from tpudeploy.terraform import StateResource
    from tpudeploy.usage import ReplicaLog


# The commands only one platform has (tpudeploy.platform.Platform.commands).
COMMANDS: Mapping[str, str | None] = {
    "tunnel": None,
    "recover": None,
    "pin": None,
    "tune": None,
}


class TpuVm:
    name = "tpu-vm"
    replaces_dead_nodes = True
    billing_noun = "TPU node or queued resource"
    billing_stack_kinds: tuple[str, ...] = ("node",)
    stop_nouns = deadline_target.STOP_NOUNS
    stop_permissions: tuple[str, ...] = deadline_target.STOP_PERMISSIONS
    node_reads_secrets = True
    # The Ops Agent's log and metric writers (tpudeploy/opsagent.py says why, and why the
    # project: no condition narrows them).
    node_project_roles: tuple[str, ...] = opsagent.NODE_PROJECT_ROLES
    commands = COMMANDS
    # The node reads <name>-tls at every boot (templates/startup.sh.j2, read_tls), and a rerun
    # of the startup script restarts the proxy on what it read.
    tls_takes_effect = (
        "from the node's next boot (a new node: `make recover`, a config change, a renewal), "
        "or at once on the running node with `sudo google_metadata_script_runner startup` over "
        "SSH (it restarts the proxy, not vLLM)"
    )
    pipeline: PipelinePart = pipeline

    def declares_nat(self, cfg: DeployConfig) -> bool:
        # A public node (the default) needs none; a private one gets its own router and NAT.
        return cfg.declares_nat

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

    def dashboard_tiles(self, cfg: DeployConfig) -> list[dict[str, Any]]:
        # One node, one server: the shared "servers reporting" tile says it all.
        return []

    def absence_grace_s(self, cfg: DeployConfig) -> int | None:
        # A cold boot with the margin GKE's startup probe gives one: a recovered or re-created
        # node compiles again (the build log's 857 s) before its first metric.
        return math.ceil(facts.COLD_BOOT_S * BOOT_GRACE_MARGIN)

    def metrics_selector(self, cfg: DeployConfig) -> str:
        # The Ops Agent's Prometheus receiver labels each series with its scrape job's job_name,
        # which tpudeploy/opsagent.py sets to the deployment's name (tests/tpuvm/
        # test_ops_agent.py). That the label reaches PromQL as `job` rests on the issue's
        # reading: the agent's label page was not in the stored corpus.
        return f'job="{cfg.name}"'

    def log_filter(
        self,
        cfg: DeployConfig,
        project: str,
        whats: tuple[str, ...],
        *,
        now: datetime.datetime,
        since_s: int,
    ) -> str:
        # The node's own logs, told apart by their label (the log contract).
        return logsources.tpuvm_filter(
            project=project, deployment=cfg.name, whats=whats, now=now, since_s=since_s
        )

    def log_metric_filter(self, cfg: DeployConfig, what: str) -> str | None:
        if what == logsources.PREEMPTION:
            # Only a spot node is preempted (on-demand is not; flex-start runs to its end).
            if cfg.provisioning != "spot":
                return None
            return logsources.tpuvm_preemption_filter(deployment=cfg.name)
        return logsources.tpuvm_metric_filter(deployment=cfg.name, what=what)

    def summary(self, cfg: DeployConfig, *, today: datetime.date | None) -> list[str]:
        return planner.synth_summary(cfg, today=today)

    def findings(self, cfg: DeployConfig) -> list[planner.Finding]:
        return policy.shared_findings(cfg)

    def secrets(self, cfg: DeployConfig) -> tuple[tuple[str, str], ...]:
        return replicasecrets.shared(cfg)

    def permission_parts(self, cfg: DeployConfig, purpose: str) -> list[str]:
        vm = cfg.provisioning != "flex-start"
        keys = ["secrets (all models)", "secrets (tpu vm: the node account's access)"]
        if not cfg.gitops_managed:
            keys.append("secrets (tpu vm: the node account's log and metric writers)")
        if vm:
            keys.append("secrets (a deadline job's account and role: spot, on-demand, GKE)")
        if purpose == "deploy":
            keys += ["node (all models)", "node (spot, on-demand)" if vm else "node (flex-start)"]
            if cfg.declares_nat:
                keys.append("node (no external address)")
        return keys + watching_parts(cfg, purpose)

    def apis(self, cfg: DeployConfig) -> tuple[tuple[str, bool, str], ...]:
        # The secrets stack enables every API the TPU VM uses (stacks/secrets.py).
        return ()

    def billing_in_state(self, cfg: DeployConfig, resources: list[StateResource]) -> list[str]:
        return billing_state.billing_resources(cfg, resources)

    def wait(self, cfg: DeployConfig, project: str, *, timeout: float, interval: float) -> int:
        from tpudeploy.tpuvm import wait

        return wait.wait_ready(cfg, project, timeout=timeout, interval=interval)

    def status(self, cfg: DeployConfig, project: str) -> int:
        from tpudeploy.tpuvm.vmstatus import status

        return status(cfg, project)

    def extend(
        self, cfg: DeployConfig, project: str, by: str, *, stack_dir: Callable[[], Path]
    ) -> int:
        from tpudeploy.deadline_ops import extend
        from tpudeploy.gcp.scheduler import SchedulerApi

        extend(cfg, project, by, jobs=SchedulerApi(log=sys.stderr), stack_dir=stack_dir)
        return 0

    def endpoint(self, cfg: DeployConfig, project: str) -> Endpoint:
        from tpudeploy.tpuvm import frontdoor

        return frontdoor.resolve_endpoint(cfg, project)

    def endpoint_report(self, cfg: DeployConfig, project: str, *, cert_out: str) -> int:
        from tpudeploy.tpuvm import frontdoor

        return frontdoor.endpoint_report(cfg, project, cert_out=cert_out)

    def tunnel(self, cfg: DeployConfig, project: str) -> int:
        from tpudeploy.tpuvm import frontdoor

        return frontdoor.run_tunnel(cfg, project)

    def cleanup(self, cfg: DeployConfig, project: str, *, timeout: float | None) -> int:
        from tpudeploy.tpuvm.flex import delete_queued_resource

        return delete_queued_resource(cfg, project, timeout=timeout)

    def bench_target(
        self, cfg: DeployConfig, project: str, *, plan: bool, route: str = "replica"
    ) -> tuple[BenchTarget, Executor] | None:
        return None

    def access_logs(self, cfg: DeployConfig, project: str, since_s: int) -> list[ReplicaLog]:
        from tpudeploy.tpuvm import accesslog

        return accesslog.access_logs(cfg, project, since_s)

    def usage_model(self, cfg: DeployConfig) -> str:
        return cfg.provisioning

    def require(self, cfg: DeployConfig, command: str) -> None:
        instead = self.commands.get(command)
        if instead is not None:
            raise NotOnThisPlatform(
                command, self.name, instead.format(name=cfg.name, port=cfg.proxy.port)
            )
