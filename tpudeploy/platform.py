"""The one seam between the two platforms: what differs by platform is asked of a Platform.

Callers (the CLI, main.py, the stacks) never branch on `cfg.platform` themselves; they take
`platform_for(cfg)` and ask it. Each platform is one package below this module
(tpudeploy/tpuvm/, tpudeploy/gke/), which never imports the other nor anything above it.
What combines the platform with what both share (the guard rails, the summary the stacks and
`make check` print, a config's load with what the guard rails would also say) is here too.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tpudeploy import config, planner, policy
from tpudeploy import watchbudget as upstream_budget
from tpudeploy.config import ConfigError, DeployConfig
from tpudeploy.errors import NotOnThisPlatform
from tpudeploy.gke.platform import Gke
from tpudeploy.grants import PipelinePart
from tpudeploy.pins import moving_tags
from tpudeploy.tpuvm.platform import TpuVm

if TYPE_CHECKING:
    from tpudeploy.bench.commands import BenchTarget
    from tpudeploy.bench.sweep import Executor
    from tpudeploy.endpoint import Endpoint
    from tpudeploy.terraform import StateResource
    from tpudeploy.usage import ReplicaLog

__all__ = ["PLATFORMS", "NotOnThisPlatform", "Platform", "platform_for"]


class Platform(Protocol):
    name: str
    # `make deploy` first marks a dead (preempted, suspended) node for replacement.
    replaces_dead_nodes: bool
    # What a failed deploy or destroy looks for in state ("no TPU node or queued resource").
    billing_noun: str
    # The billing stacks' kinds after the secrets stack, in deploy order: the cdktf stacks
    # behind each are stacks/app.py's (tpudeploy never imports cdktf).
    billing_stack_kinds: tuple[str, ...]
    # What its deadline job deletes (one, many) and the permissions its stop role holds.
    stop_nouns: tuple[str, str]
    stop_permissions: tuple[str, ...]
    # Whether the nodes' service account (<name>-node) reads the replicas' secrets and compile
    # cache (the TPU VM: the node is the replica), or only runs the nodes (GKE: the pods read
    # them as their own Workload Identity; the node account holds node_project_roles only, so a
    # node or container escape, or a hostNetwork pod, gets no token and no key).
    node_reads_secrets: bool
    # Project roles the nodes' service account needs to run the nodes themselves.
    node_project_roles: tuple[str, ...]
    # The commands (make targets) that only one platform has, the same keys on each platform:
    # None where this one has it, else why not and what to use instead ({name} and {port}: the
    # deployment's name and front-door port). Every other command exists on both. require reads
    # it; make help, make check's summary and docs/scale-out.md are tied to it
    # (tests/layout/test_platform_commands.py).
    commands: Mapping[str, str | None]
    # When the front door starts serving a new version of <name>-tls (`make tls-cert` says it).
    tls_takes_effect: str
    # The GitOps pipeline's part of this platform (tpudeploy/identities.py adds what both
    # share): the platform package's pipeline module.
    pipeline: PipelinePart

    def declares_nat(self, cfg: DeployConfig) -> bool:
        """Whether the deployment gets a Cloud Router and NAT of its own (the billing stack's;
        a pipeline deployment's are the bootstrap's)."""
        ...

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

    def dashboard_tiles(self, cfg: DeployConfig) -> list[dict[str, Any]]:
        """The dashboard's widgets only this platform has (GKE: replicas and TPU nodes by
        capacity type), beside the shared ones (tpudeploy/dashboard.py)."""
        ...

    def absence_grace_s(self, cfg: DeployConfig) -> int | None:
        """How long no vLLM server may report before the no-server alert fires: the longest a
        boot may take here (no metric exists before its compile ends), or None where no server
        is expected at times (the alert is left out: tpudeploy/alertpolicies.declared)."""
        ...

    def metrics_selector(self, cfg: DeployConfig) -> str:
        """The PromQL label matchers that pick this deployment's vLLM series out of the
        project's (the dashboard's and the alert policies': tpudeploy/dashboard.py)."""
        ...

    def log_filter(
        self,
        cfg: DeployConfig,
        project: str,
        whats: tuple[str, ...],
        *,
        now: datetime.datetime,
        since_s: int,
    ) -> str:
        """`make logs`: the Logging query that reads this deployment's logs of the kinds
        `whats` (tpudeploy.logsources.WHATS) in the `since_s` seconds before `now`, and no
        other deployment's (tpudeploy/logsources.py holds the contract)."""
        ...

    def log_metric_filter(self, cfg: DeployConfig, what: str) -> str | None:
        """The filter of a log-based metric over this deployment's log `what` (no project, no
        time: the metric counts from its creation on), or None where the platform writes no
        such structured log."""
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

    def extend(
        self, cfg: DeployConfig, project: str, by: str, *, stack_dir: Callable[[], Path]
    ) -> int:
        """`make extend BY=...`: move the deadline job's deadline (the node's, the cluster's)
        later, through tpudeploy.deadline_ops; `stack_dir` synthesizes and names the stack that
        holds it (cfg.deadline_stack_name)."""
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

    def access_logs(self, cfg: DeployConfig, project: str, since_s: int) -> list[ReplicaLog]:
        """`make usage`: each running front door's access log of the last `since_s` seconds,
        with when it started and its chips."""
        ...

    def usage_model(self, cfg: DeployConfig) -> str:
        """The provisioning model `make usage` prices the chip-hours at."""
        ...

    def require(self, cfg: DeployConfig, command: str) -> None:
        """Raise NotOnThisPlatform for a command `commands` says this platform does not have,
        before any project, credential or API is asked for."""
        ...


PLATFORMS: dict[str, Platform] = {"tpu-vm": TpuVm(), "gke": Gke()}


def platform_for(cfg: DeployConfig) -> Platform:
    return PLATFORMS[cfg.platform]


def guard_rails(cfg: DeployConfig) -> list[planner.Finding]:
    """Every guard-rail finding on `cfg`, the shared ones and its platform's (tpudeploy.policy
    applies them: errors refuse, the rest is printed)."""
    return platform_for(cfg).findings(cfg)


def load_config(path: str | Path | None = None) -> DeployConfig:
    """The config at `path` (DEPLOY_CONFIG, else deploy.toml), validated; a file that fails
    also hears what the guard rails would refuse next, so one round names every problem.

    Loading itself (tpudeploy.config) validates the shape only; a valid file meets the guard
    rails where a command creates or changes what bills (policy.enforce)."""
    try:
        return config.load_config(path)
    except ConfigError as exc:
        raise with_later_refusals(exc) from None


def parse_config(data: dict[str, Any], *, source: str) -> DeployConfig:
    """tpudeploy.config.parse_config, a failure completed as load_config's is."""
    try:
        return config.parse_config(data, source=source)
    except ConfigError as exc:
        raise with_later_refusals(exc) from None


def with_later_refusals(exc: ConfigError) -> ConfigError:
    """`exc` with the guard-rail refusals of the config it could still judge (exc.judged): the
    file fails anyway, so saying them now costs nothing."""
    if exc.judged is None:
        return exc
    return exc.with_later(policy.refusals(guard_rails(exc.judged)))


def summary_lines(cfg: DeployConfig, *, today: datetime.date | None = None) -> list[str]:
    """What `make synth` and `make check` end with: guard-rail warnings, a moving image tag,
    then cost, what stops the billing, what the cost leaves out, who reaches the endpoint, KV
    pool. `today` adds the prices' age (generated README text leaves it out to stay stable)."""
    lines = policy.warnings(guard_rails(cfg))
    platform = platform_for(cfg)
    # Not a guard rail (nothing is refused): what a tag risks, once, and `make pin` as the fix
    # where the platform has it.
    pin_instead = platform.commands.get("pin")
    lines += [str(f) for f in moving_tags(cfg, pin_instead=pin_instead)]
    lines += platform.summary(cfg, today=today)
    lines += watching_lines(cfg)
    # The watch boots its builds with make tune's harness: where the platform has no make tune,
    # its reason refuses the watch too.
    lines += upstream_budget.check_lines(cfg, unsupported=platform.commands.get("tune"))
    return lines


def log_metrics_for(cfg: DeployConfig) -> dict[str, dict[str, Any]]:
    """The deployment's log-based metrics (LogMetric JSON by key), over the logs its platform
    writes (Platform.log_metric_filter)."""
    from tpudeploy.logmetrics import log_metrics

    platform = platform_for(cfg)
    return log_metrics(cfg, lambda what: platform.log_metric_filter(cfg, what))


def watching_lines(cfg: DeployConfig) -> list[str]:
    """The dashboard and the alert policies: where they are, what they show, who they notify."""
    from tpudeploy import stopsoon
    from tpudeploy.alertpolicies import declared, log_policies, notifications_line

    if cfg.gitops_managed:
        # The deploy identity would need monitoring.dashboards.* and alertPolicies.* on the
        # project (no IAM condition narrows them: docs/see-it-running.md); not granted yet.
        return [
            "dashboard and alerts: not declared for a pipeline deployment (its deploy identity "
            "holds no Cloud Monitoring permissions); see docs/see-it-running.md"
        ]
    from tpudeploy.gke.metrics import published
    from tpudeploy.watchcost import line as watching_cost_line

    log_metrics = tuple(log_metrics_for(cfg))
    policies = declared(platform_for(cfg).absence_grace_s(cfg)) + log_policies(cfg, log_metrics)
    # The "stops soon" warnings (tpudeploy/stopsoon.py): the deadline's beside the deadline
    # job, the idle stop's with the node's other alerts (stacks/watch.py).
    soon = stopsoon.titles(cfg, idle_watcher=cfg.idle.seconds is not None)
    titles = ", ".join([*(p.title for p in policies), *soon])
    metrics = ", ".join(log_metrics)
    lines = [
        f"dashboard: {cfg.name!r} in Cloud Monitoring (make dashboard prints its URL); alert "
        f"policies: {titles}; log-based metrics: {metrics} (docs/see-it-running.md)",
        notifications_line(cfg),
        watching_cost_line(
            cfg,
            metric_types=list(published().values()),
            conditions=len(policies) + len(soon),
            log_metrics=len(log_metrics),
        ),
    ]
    return lines
