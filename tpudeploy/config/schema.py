"""The deployment config's schema: pydantic models only, every default the build log's value.

A leaf: it imports the facts (tpudeploy.facts), the naming rules (tpudeploy.names) and the
duration grammar, and no feature module (planner, bench, rendering, API clients, CLI). Loading
lives in tpudeploy.config.loading; the guard rails in tpudeploy.policy.
"""

from __future__ import annotations

import datetime
from types import MappingProxyType
from typing import Literal

from pydantic import Field, field_validator

from tpudeploy import facts, names
from tpudeploy.config import checks
from tpudeploy.config import prices as prices_config
from tpudeploy.config.access import AccessConfig
from tpudeploy.config.alerts_table import AlertsConfig
from tpudeploy.config.base import Strict
from tpudeploy.config.checks import NO_END
from tpudeploy.config.containers import check_container_name, check_image, check_shm_size
from tpudeploy.config.deadline_table import DeadlineConfig
from tpudeploy.config.gke import GkeConfig
from tpudeploy.config.model_geometry import ModelGeometry
from tpudeploy.config.network import MEDIA_URLS_DISABLED, NetworkConfig, check_media_domains
from tpudeploy.config.platforms import PlatformSection, section_of
from tpudeploy.config.proxy import ProxyConfig
from tpudeploy.config.routing_table import RoutingConfig
from tpudeploy.config.serveflags import check_extra_args, served_model_name
from tpudeploy.config.workload import BenchConfig, LoadConfig
from tpudeploy.durations import parse_duration

DEFAULT_NAME = "gemma4-v5e"
PROVISIONING_MODELS = ("flex-start", "spot", "on-demand")
# max_run_duration when unset. Flex-start: the build log's 4h runs. Spot and on-demand bill until
# deleted (build log: "no automatic stop"), so they get a deadline the cloud enforces (a Cloud
# Scheduler job deleting the node): one forgotten weekend on spot costs about $35. GKE's
# cluster takes one of these too (config/platforms.py: run_duration_as).
DEFAULT_RUN_DURATION = MappingProxyType({"flex-start": "4h", "spot": "8h", "on-demand": "8h"})


class VllmConfig(Strict):
    """`vllm serve` flags in snake_case plus the tpu-inference environment; build-log values."""

    image: str = facts.IMAGE
    """the serving image (the build log ran the nightly tag)"""
    container_name: str = "vllm-gemma4"
    """docker container name on the node"""
    port: int = Field(default=8000, ge=1024, le=65535)
    """vLLM's port on the node's loopback, never opened (the proxy's is [proxy] port)"""
    shm_size: str = "10gb"
    """docker --shm-size"""
    model: str = facts.MODEL
    """Hugging Face model id"""
    dtype: Literal["auto", "bfloat16", "float16", "half", "float", "float32"] = "bfloat16"
    """bf16 is the only format that runs on this stack"""
    kv_cache_dtype: str = "auto"
    """auto (bf16); fp8 is warned (1.000x capacity), int8 refused"""
    max_model_len: int = Field(default=facts.MAX_MODEL_LEN, gt=0)
    """costs no KV capacity: the block size scales with it"""
    max_num_batched_tokens: int = Field(default=facts.MAX_NUM_BATCHED_TOKENS, gt=0)
    """the compile bucket at the 2,496-token multimodal floor"""
    tensor_parallel_size: int = Field(default=1, ge=1)
    """one KV head cannot be sharded: >1 multiplies KV memory"""
    gpu_memory_utilization: float = Field(default=facts.GPU_MEMORY_UTILIZATION_CEILING, gt=0, le=1)
    """the ceiling on v5e (0.95 died after 691 s), not a margin"""
    enable_prefix_caching: bool = True
    """false emits --no-enable-prefix-caching"""
    disable_chunked_mm_input: bool = True
    """with limit_mm_per_prompt, sets the 2,496-token floor"""
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"image": 4, "audio": 1})
    """multimodal items per prompt"""
    enable_auto_tool_choice: bool = True
    """OpenAI-compatible tool calling"""
    tool_call_parser: str = "gemma4"
    """tool-call parser"""
    reasoning_parser: str = "gemma4"
    """reasoning parser"""
    # Left unset: the backend scales block_size with max_model_len to keep 512 blocks per request
    # (seed), which is what keeps long context free. Setting it is warned.
    block_size: int | None = Field(default=None, gt=0, examples=[64])
    """leave unset: the backend scales it (setting it is warned)"""
    # Pins the KV pool in bytes instead of a fraction (seed: measured-good 5923602432).
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0, examples=[5923602432])
    """pins the KV pool in bytes (measured-good 5923602432)"""
    # Overrides for the guard rails, for users who know better than the seed's measurements.
    force_gpu_memory_utilization: bool = False
    """override the memory ceiling guard rail"""
    force_kv_cache_dtype: bool = False
    """override the KV dtype guard rail"""
    force_tensor_parallel_size: bool = False
    """override the tensor-parallel guard rail"""
    # Extra `vllm serve` arguments passed verbatim (each one shell-quoted), for flags not modelled.
    # n-gram speculative decoding (build log, untested ideas: "needs no draft checkpoint and is
    # marked fully passing on TPU"); rendered as --speculative-config JSON. Off by default.
    speculative_config: dict[str, str | int] | None = Field(
        default=None,
        examples=[{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}],
    )
    """n-gram speculative decoding (method = "ngram"); unset: off"""
    extra_args: tuple[str, ...] = Field(default=(), examples=[["--max-num-seqs", "128"]])
    """more `vllm serve` flags: allow-listed ones only, checked against vLLM 0.33.0's CLI"""
    # Hosts vLLM may fetch image/audio URLs from. With --net=host a URL on the metadata server
    # would hand the node's credentials to whoever sends the request, and vLLM treats an empty
    # list as "every domain" (DESIGN). The default names a reserved .invalid host (RFC 2606) that
    # never resolves: URL fetching is off, inline data: URLs keep working. Widen it deliberately.
    allowed_media_domains: tuple[str, ...] = (MEDIA_URLS_DISABLED,)
    """DNS names vLLM may fetch media from (no addresses); the default fetches nothing"""

    # tpu-inference environment variables (seed table); defaults are the engine's own.
    attn_bucketized_num_reqs: bool = False
    """tpu-inference: power-of-two request buckets"""
    slice_rope_cache: bool = False
    """tpu-inference: slice the rotary cache to max_model_len"""
    num_precompile_workers: int = Field(default=1, ge=1)
    """tpu-inference: parallel XLA precompilation"""
    vllm_tpu_bucket_padding_gap: int = Field(default=0, ge=0)
    """tpu-inference: linear buckets (e.g. 128)"""
    vllm_xla_check_recompilation: bool = False
    """written as 1 (vLLM parses bool(int(...)))"""

    # The checks are plain functions (tpudeploy.config.checks and the modules it names).
    @property
    def served_model_name(self) -> str:
        """The "model" clients send: the first --served-model-name in extra_args, else model."""
        return served_model_name(self.model, self.extra_args)

    @field_validator("extra_args", "allowed_media_domains", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return checks.as_tuple(v)

    @field_validator("allowed_media_domains")
    @classmethod
    def _media_domains(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_media_domains(v)

    @field_validator("extra_args")
    @classmethod
    def _extra_args(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_extra_args(v)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        return check_image(v)

    @field_validator("container_name")
    @classmethod
    def _container(cls, v: str) -> str:
        return check_container_name(v)

    @field_validator("shm_size")
    @classmethod
    def _shm(cls, v: str) -> str:
        return check_shm_size(v)

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        return checks.check_model_id(v)

    @field_validator("tool_call_parser", "reasoning_parser", "kv_cache_dtype")
    @classmethod
    def _word(cls, v: str) -> str:
        return checks.check_choice_name(v)

    @field_validator("speculative_config")
    @classmethod
    def _speculative(cls, v: dict[str, str | int] | None) -> dict[str, str | int] | None:
        return checks.check_speculative_config(v)

    @field_validator("limit_mm_per_prompt")
    @classmethod
    def _mm(cls, v: dict[str, int]) -> dict[str, int]:
        return checks.check_mm_limits(v)

    def tpu_inference_env(self) -> dict[str, str]:
        """Environment for the container: only values that differ from the engine's defaults."""
        env: dict[str, str] = {}
        if self.attn_bucketized_num_reqs:
            env["ATTN_BUCKETIZED_NUM_REQS"] = "1"
        if self.slice_rope_cache:
            env["SLICE_ROPE_CACHE"] = "1"
        if self.num_precompile_workers != 1:
            env["NUM_PRECOMPILE_WORKERS"] = str(self.num_precompile_workers)
        if self.vllm_tpu_bucket_padding_gap:
            env["VLLM_TPU_BUCKET_PADDING_GAP"] = str(self.vllm_tpu_bucket_padding_gap)
        if self.vllm_xla_check_recompilation:
            # DESIGN: vLLM parses it with bool(int(...)): "true" would crash the engine.
            env["VLLM_XLA_CHECK_RECOMPILATION"] = "1"
        return env

    def container_env(self) -> dict[str, str]:
        """All non-secret environment for the container: tpu-inference's plus vLLM's own."""
        # vLLM follows redirects by default (DESIGN), which would let an allowed host bounce a
        # media fetch to the metadata server; 0 keeps the allow-list meaningful.
        return {**self.tpu_inference_env(), "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0"}


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
    load: LoadConfig = Field(default_factory=LoadConfig)
    """[load] table"""
    gke: GkeConfig = Field(default_factory=GkeConfig)
    """[gke] table: replicas, capacity and cluster (platform = "gke" only)"""
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    """[routing] table: the Gateway and endpoint picker (platform = "gke" only)"""
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

    # Before type checks: a value of neither type (true, 1.5) gets one message with the fix,
    # not one per member of the union.
    @field_validator("max_run_duration", mode="before")
    @classmethod
    def _run_duration(cls, v: object) -> object:
        return checks.check_run_duration(v)

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
