"""The deployment config's schema: pydantic models only, every default the build log's value.

A leaf: it imports the facts (tpudeploy.facts), the naming rules (tpudeploy.names) and the
duration grammar, and no feature module (planner, bench, rendering, API clients, CLI). Loading
lives in tpudeploy.config.loading; the guard rails in tpudeploy.policy.
"""

from __future__ import annotations

import datetime
from types import MappingProxyType
from typing import Literal

from pydantic import Field, field_validator, model_validator

from tpudeploy import facts, names
from tpudeploy.config import checks
from tpudeploy.config import prices as prices_config
from tpudeploy.config.access import AccessConfig
from tpudeploy.config.alerts_table import AlertsConfig
from tpudeploy.config.base import Strict
from tpudeploy.config.checks import NO_END
from tpudeploy.config.deadline_table import DeadlineConfig
from tpudeploy.config.gke import GkeConfig
from tpudeploy.config.idle_table import IdleConfig
from tpudeploy.config.ladder import DEFAULT_NAME, Rung, check_capacity, select
from tpudeploy.config.model_geometry import ModelGeometry
from tpudeploy.config.network import NetworkConfig
from tpudeploy.config.platforms import PlatformSection, section_of
from tpudeploy.config.proxy import ProxyConfig
from tpudeploy.config.routing_table import RoutingConfig
from tpudeploy.config.vllm_table import VllmConfig
from tpudeploy.config.watch_table import WatchConfig
from tpudeploy.config.workload import BenchConfig, LoadConfig
from tpudeploy.durations import parse_duration

PROVISIONING_MODELS = ("flex-start", "spot", "on-demand")
# max_run_duration when unset. Flex-start: the build log's 4h runs. Spot and on-demand bill until
# deleted (build log: "no automatic stop"), so they get a deadline the cloud enforces (a Cloud
# Scheduler job deleting the node): one forgotten weekend on spot costs about $35. GKE's
# cluster takes one of these too (config/platforms.py: run_duration_as).
ACCEL = facts.ACCELERATOR_TYPE
DEFAULT_RUN_DURATION = MappingProxyType({"flex-start": "4h", "spot": "8h", "on-demand": "8h"})


class DeployConfig(Strict):
    """One deployment. An empty file gives the build log's deployment."""

    project: str = ""
    """needed to deploy, not to synth; else GOOGLE_CLOUD_PROJECT"""
    region: str = ""
    """derived from zone; when set it must contain the zone"""
    zone: str = facts.ZONE
    """a zone Google lists for TPU v5e; flex-start ones are checked against known-good data"""
    name: str = DEFAULT_NAME
    """3-24 characters; prefixes the node, its account, secrets and stacks"""
    # One TPU VM (the build log's) or N replicas of the same server on GKE ([gke]).
    platform: Literal["tpu-vm", "gke"] = "tpu-vm"
    """tpu-vm (one chip, the build log's) or gke (replicas of it, [gke] table)"""
    # Flex-start is the default: the only model that stops billing on its own, for 3.8% more
    # than spot (seed). Spot and on-demand get a deadline job instead (max_run_duration).
    provisioning: Literal["flex-start", "spot", "on-demand"] = "flex-start"
    """flex-start (stops billing itself), spot or on-demand (stopped by a deadline job)"""
    # The capacity ladder (config/ladder.py): rungs tried in order on a documented stockout or
    # quota error; instead of provisioning and zone, which loading fills in from the rung in use.
    capacity: tuple[Rung, ...] = Field(
        default=(),
        examples=[
            [
                {"provisioning": "spot", "zone": facts.ZONE},
                {"provisioning": "flex-start", "zone": list(facts.FLEX_START_ZONES[ACCEL])[-1]},
            ]
        ],
    )
    """TPU VM: {provisioning, zone} rungs make deploy tries in order (docs/capacity-and-cost.md)"""
    max_run_duration: str | int | None = Field(
        default=None,
        json_schema_extra={"shown_default": '"4h" flex-start, "8h" spot, on-demand and GKE'},
    )
    """how long a node (GKE: cluster) bills: 4h, 2d, at most 7d; "none" opts out (not flex)"""
    # A preempted spot node cannot restart; the recover workflow replaces it (docs/gitops.md).
    auto_recover: bool = False
    """spot, on-demand: the GitOps recover workflow replaces a preempted node by itself"""
    # How long `deploy` waits for flex-start capacity before giving up (not an error until then).
    flex_start_timeout: str | int = "1h"
    """how long a deploy waits for flex-start capacity"""
    # Flex-start in a zone not known to accept it is refused unless the user says otherwise.
    allow_untested_flex_zone: bool = False
    """try flex-start outside the known-good zones"""
    # A zone Google's TPU page does not list for the accelerator's generation is refused (a typo
    # would otherwise fail only at apply) unless the user says the page lists it now.
    allow_unlisted_zone: bool = False
    """deploy into a zone tpudeploy's list of TPU v5e zones lacks (Google added one)"""
    # With a bucket, every stack keeps its Terraform state in GCS (the team's, the GitOps
    # pipeline's); without, locally, on one machine.
    state_bucket: str = ""
    """GCS bucket for Terraform state, shared (`make state-init` makes it); else local"""
    # Remote state alone changes no resource: a teammate's deployment with state_bucket still
    # declares its node account, secrets, APIs and NAT. Only a deployment the GitOps pipeline
    # applies leaves those to the bootstrap (stacks/bootstrap.py), and says so here: a stack
    # that stopped declaring them would have Terraform destroy them at the next apply.
    pipeline: bool = False
    """GitOps pipeline applies it; its bootstrap makes node account, secrets, APIs, NAT"""
    accelerator_type: str = facts.ACCELERATOR_TYPE
    """gcloud spells v5e v5litepod; v5e-1 is refused with the fix"""
    runtime_version: str = facts.V5E.runtime_version
    """the runtime of the accelerator's generation"""
    labels: dict[str, str] = Field(default_factory=dict, examples=[{"team": "ml"}])
    """extra labels on the node"""
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    """[network] table"""
    vllm: VllmConfig = Field(default_factory=VllmConfig)
    """[vllm] table: the `vllm serve` flags and tpu-inference variables"""
    proxy: ProxyConfig = Field(default_factory=ProxyConfig)
    """[proxy] table: the TLS proxy in front of vLLM"""
    access: AccessConfig = Field(default_factory=AccessConfig)
    """[access] table: the clients (agents), one key and one set of limits each"""
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    """[alerts] table: who the deployment's alert policies notify"""
    deadline: DeadlineConfig = Field(default_factory=DeadlineConfig)
    """[deadline] table: where a spot or on-demand node's deadline job runs"""
    idle: IdleConfig = Field(default_factory=IdleConfig)
    """[idle] table: a spot or on-demand node deletes itself after stop_after with no request"""
    load: LoadConfig = Field(default_factory=LoadConfig)
    """[load] table"""
    gke: GkeConfig = Field(default_factory=GkeConfig)
    """[gke] table: replicas, capacity and cluster (platform = "gke" only)"""
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    """[routing] table: the Gateway and endpoint picker (platform = "gke" only)"""
    watch: WatchConfig = Field(default_factory=WatchConfig)
    """[watch] table: the scheduled upstream watch of new vllm-tpu builds (off by default)"""
    # $/chip-hour per region where the build log has none (tpudeploy.config.prices): a rate is
    # never applied to a region it was not read for.
    prices: dict[str, dict[str, float | datetime.date | str]] = Field(
        default_factory=dict, examples=[prices_config.EXAMPLE]
    )
    """[prices.REGION]: $/chip-hour by model (spot, flex-start, on-demand, commit-1y/-3y), as_of"""
    model_geometry: ModelGeometry = Field(default_factory=ModelGeometry)
    """[model_geometry] table: the served model's layout (Gemma 4 E2B)"""
    # `make bench`: the build log's 12-cell sweep by default.
    bench: BenchConfig = Field(default_factory=BenchConfig)
    """[bench] table: the benchmark sweep"""

    @model_validator(mode="before")
    @classmethod
    def _first_rung(cls, data: object) -> object:
        """A ladder without a chosen rung runs its first (loading picks another for the walk)."""
        if (
            isinstance(data, dict)
            and data.get("capacity")
            and not {"zone", "provisioning"} & set(data)
        ):
            data = dict(data)
            select(data, 1)
        return data

    # Before type checks: a value of neither type (true, 1.5) gets one message with the fix,
    # not one per member of the union.
    @field_validator("max_run_duration", mode="before")
    @classmethod
    def _run_duration(cls, v: object) -> object:
        return checks.check_run_duration(v)

    @field_validator("capacity", mode="before")
    @classmethod
    def _capacity(cls, v: object) -> object:
        return check_capacity(v)

    @field_validator("flex_start_timeout", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> object:
        return checks.check_duration(v)

    @field_validator("state_bucket")
    @classmethod
    def _bucket(cls, v: str) -> str:
        return checks.check_bucket(v)

    @field_validator("prices", mode="before")
    @classmethod
    def _prices(cls, v: object) -> object:
        return prices_config.check_prices(v)

    @property
    def section(self) -> PlatformSection:
        """What config derives and validates differently on this platform (config/platforms)."""
        return section_of(self.platform)

    @property
    def max_run_duration_seconds(self) -> int | None:
        """Seconds a node bills before it is stopped; None for "none" (spot, on-demand only)."""
        value = self.max_run_duration
        if value is None:
            value = DEFAULT_RUN_DURATION[self.section.run_duration_as or self.provisioning]
        if isinstance(value, str) and value.strip().lower() == NO_END:
            return None
        return parse_duration(value, name="max_run_duration")

    @property
    def deadline_seconds(self) -> int | None:
        """Spot and on-demand: how long after a deploy the deadline job deletes the node; GKE:
        the cluster. None for a flex-start TPU VM (its queued resource carries the run duration)
        and for "none"."""
        if self.flex_start_node:
            return None
        return self.max_run_duration_seconds

    @property
    def flex_start_node(self) -> bool:
        """One flex-start TPU VM (its queued resource fixes the run's end when it is created);
        GKE's flex-start pool is [gke] capacity, not this."""
        return self.section.one_node and self.provisioning == "flex-start"

    @property
    def deadline_job_name(self) -> str:
        """The Cloud Scheduler job that deletes the node (GKE: the cluster) at its deadline."""
        return f"{self.name}-deadline"

    @property
    def deadline_stack_name(self) -> str:
        """The stack holding the deadline and its job: the node's, or GKE's cluster stack."""
        return f"{self.name}-{self.section.deadline_stack}"

    @property
    def deadline_target(self) -> str:
        """What the deadline job deletes, in messages."""
        return self.section.deadline_target

    @property
    def stop_account_id(self) -> str:
        """The deadline job's identity: may delete TPU nodes (GKE: clusters) and nothing else."""
        return names.stop_account_id(self.name)

    @property
    def stop_role_id(self) -> str:
        """The custom role holding tpu.nodes.delete for a local (non-GitOps) deployment. One per
        deployment (role ids allow letters, digits, '_' and '.'): two deployments of one project
        must not fight over one role. The GitOps bootstrap defines a shared one instead. GKE's
        holds container.clusters.delete instead, under its own id (a role's id names it)."""
        return self.section.stop_role_prefix + self.name.replace("-", "_")

    @property
    def flex_start_timeout_seconds(self) -> int:
        return parse_duration(self.flex_start_timeout, name="flex_start_timeout")

    @property
    def queued_resource_id(self) -> str:
        return f"{self.name}-qr"

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        return checks.check_project(v)

    @field_validator("zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        return checks.check_zone(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return checks.check_deployment_name(v)

    @field_validator("accelerator_type")
    @classmethod
    def _accel(cls, v: str) -> str:
        return checks.check_accelerator(v)

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        return checks.check_labels(v)

    # Derived names: deterministic, from the deployment name (no random suffixes).
    @property
    def effective_region(self) -> str:
        return self.region or names.region_of(self.zone)

    @property
    def home_region(self) -> str:
        """Where what outlives a rung lives (the compile-cache bucket, remote state): the
        region key, else the first rung's zone's, else the zone's. A rung in another region
        reads the cache across regions (config/ladder.py prices it); secrets are global."""
        if self.region:
            return self.region
        return self.capacity[0].region if self.capacity else names.region_of(self.zone)

    @property
    def rung_index(self) -> int | None:
        """The rung in use, from 0 (loading filled provisioning and zone from it); None
        without a ladder."""
        for i, rung in enumerate(self.capacity):
            if (rung.provisioning, rung.zone) == (self.provisioning, self.zone):
                return i
        return None

    @property
    def deadline_region(self) -> str:
        """Where the deadline job lives: [deadline] region, else the node's region."""
        return self.deadline.region or self.effective_region

    @property
    def service_account_id(self) -> str:
        return names.node_account_id(self.name)

    @property
    def deploy_account_id(self) -> str:
        """GitOps: the identity that applies this deployment, created by the bootstrap."""
        return names.deploy_account_id(self.name)

    @property
    def gitops_managed(self) -> bool:
        """A pipeline deployment (pipeline = true): the bootstrap creates its node service
        account, secrets, compile-cache bucket, router and NAT and its deploy identity, and
        enables the project's APIs (docs/gitops.md). state_bucket alone (remote state for local
        use) is not one: its stacks declare all of it, as with local state."""
        return self.pipeline

    @property
    def hf_token_secret_id(self) -> str:
        return f"{self.name}-hf-token"

    @property
    def api_key_secret_id(self) -> str:  # the first [access] client's: make smoke's and bench's
        return next(iter(self.client_key_secret_ids.values()))

    @property
    def client_key_secret_ids(self) -> dict[str, str]:  # each [access] client's, in order
        return self.access.client_secret_ids(self.name)

    @property
    def tls_secret_id(self) -> str:
        """The front door's certificate and key: one per deployment, whatever serves it."""
        return f"{self.name}-tls"

    @property
    def compile_cache_bucket_suffix(self) -> str:
        """The bucket is "<project>-<name>-xla": at most 30 + 1 + 24 + 4 = 59 of GCS's 63
        characters, so every valid project and name fits; no random suffix."""
        return f"{self.name}-xla"

    def compile_cache_bucket(self, project: str) -> str:
        return f"{project}-{self.compile_cache_bucket_suffix}"

    @property
    def node_id(self) -> str:
        return self.name

    @property
    def firewall_rule_names(self) -> dict[str, str]:
        """Every firewall rule the node stack may create, by construct id: a deny-all per IP
        version, the proxy's port per IP version (only with allowed_cidrs), IAP SSH."""
        return {
            rule: f"{self.name}-{rule}"
            for rule in ("deny-all", "deny-all-v6", "allow-api", "allow-api-v6", "allow-iap-ssh")
        }

    @property
    def declares_nat(self) -> bool:
        """A private node the node stack gives egress: a Cloud Router and NAT of its own."""
        return not self.network.enable_external_ip and self.network.nat

    @property
    def nat_subnetwork(self) -> str:
        """The subnetwork the NAT serves: the node's, else the auto-mode network's subnet of the
        region, which carries the network's name (the TPU API's default subnetwork)."""
        return self.network.subnetwork or self.network.network

    @property
    def router_name(self) -> str:
        return f"{self.name}-router"

    @property
    def nat_name(self) -> str:
        return f"{self.name}-nat"

    @property
    def network_tag(self) -> str:
        return f"{self.name}-vllm"

    @property
    def secrets_stack_name(self) -> str:
        return f"{self.name}-secrets"

    @property
    def node_stack_name(self) -> str:
        return f"{self.name}-node"

    @property
    def gke_stack_name(self) -> str:
        """platform = "gke": the cluster and its TPU pools."""
        return f"{self.name}-gke"

    @property
    def serving_stack_name(self) -> str:
        """platform = "gke": the Kubernetes objects on the cluster."""
        return f"{self.name}-serving"
