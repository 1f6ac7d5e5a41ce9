"""The deployment's typed configuration: one TOML file, every default the seed's tuned value."""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tpudeploy import gitops, planner
from tpudeploy.bench.sweep import BenchConfigError, settings_from_table
from tpudeploy.durations import parse_duration
from tpudeploy.facts import FLEX_START_REFUSED_ZONES, FLEX_START_ZONES, flex_start_zones_text

DEFAULT_CONFIG_PATH = "deploy.toml"
CONFIG_ENV = "DEPLOY_CONFIG"

# Google's IAP TCP-forwarding range: the only source SSH is opened to.
IAP_SSH_RANGE = "35.235.240.0/20"

# Runtime images per TPU generation. The seed: v5e is spelled v5litepod to gcloud and runs
# v2-alpha-tpuv5-lite; a runtime of another generation does not boot on the chip.
RUNTIMES_BY_GENERATION: dict[str, tuple[str, ...]] = {
    "v5litepod": ("v2-alpha-tpuv5-lite",),
    "v6e": ("v2-alpha-tpuv6e",),
    "v5p": ("v2-alpha-tpuv5",),
}

_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{1,22}[a-z0-9]$")
_ACCEL_RE = re.compile(r"^(?P<gen>v\d+[a-z]*)-(?P<size>\d+)$")
_IMAGE_RE = re.compile(
    r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)
_PARSER_RE = re.compile(r"^[A-Za-z0-9_]+$")
_LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
_ZONE_RE = re.compile(r"^(?P<region>[a-z]+-[a-z]+\d+)-[a-z]$")
# GCE resource names (RFC 1035) and the project-qualified paths of a shared VPC.
_GCE_NAME_RE = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
_PROJECT_ID = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
_NETWORK_PATH_RE = re.compile(rf"projects/{_PROJECT_ID}/global/networks/{_GCE_NAME_RE.pattern}")
_SUBNETWORK_PATH_RE = re.compile(
    rf"projects/{_PROJECT_ID}/regions/[a-z]+-[a-z]+\d+/subnetworks/{_GCE_NAME_RE.pattern}"
)
# Labels the project sets itself on the node (and the provider on every resource); a user label
# with one of these keys would silently replace it, or (tpudeploy-spec, the flex-start spec's
# fingerprint) break the spec check.
RESERVED_LABEL_KEYS = ("deployment", "provisioning", "managed_by", "component", "tpudeploy-spec")


class ConfigError(Exception):
    """A configuration that cannot be deployed; each problem names key, value, reason and fix."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"{self.source}: {len(self.problems)} problem(s) in the deployment config:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def _problem(key: str, value: object, reason: str, fix: str) -> str:
    return f"{key} = {value!r}: {reason}. Fix: {fix}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class NetworkConfig(_Strict):
    network: str = "default"
    subnetwork: str = ""
    # Nothing is public unless the user says so: the vLLM port is opened only to these ranges.
    allowed_cidrs: tuple[str, ...] = ()
    # 0.0.0.0/0 (or ::/0) exposes the model to the internet; it needs this explicit opt-in.
    allow_public_endpoint: bool = False
    enable_external_ip: bool = True

    @field_validator("allowed_cidrs", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return tuple(v) if isinstance(v, list) else v

    @field_validator("network")
    @classmethod
    def _network(cls, v: str) -> str:
        # These strings reach Terraform arguments: anything but GCE's grammar (a `${...}` say)
        # would be evaluated by Terraform, not passed to the API.
        if not (_GCE_NAME_RE.fullmatch(v) or _NETWORK_PATH_RE.fullmatch(v)):
            raise ValueError(
                "not a VPC network; write its name (1-63 lowercase letters, digits and '-', "
                'starting with a letter), e.g. "default", or for a shared VPC '
                '"projects/HOST_PROJECT/global/networks/NAME"'
            )
        return v

    @field_validator("subnetwork")
    @classmethod
    def _subnetwork(cls, v: str) -> str:
        if v and not (_GCE_NAME_RE.fullmatch(v) or _SUBNETWORK_PATH_RE.fullmatch(v)):
            raise ValueError(
                "not a subnetwork; write its name (lowercase letters, digits and '-', starting "
                'with a letter), "projects/HOST_PROJECT/regions/REGION/subnetworks/NAME" for a '
                "shared VPC, or leave it out for the network's default"
            )
        return v

    @field_validator("allowed_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for cidr in v:
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:
                raise ValueError(
                    f"{cidr!r} is not a valid CIDR range ({exc}); write it like 203.0.113.0/24 "
                    "with the host bits zero, or 203.0.113.7/32 for one address"
                ) from None
        return v


MEDIA_URLS_DISABLED = "media-urls-disabled.invalid"
_METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "localhost"})
_HOST_RE = re.compile(
    r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
)


def media_domain_problem(host: str) -> str:
    """Why `host` must not be an allowed media domain, or "" when it may be."""
    name = host.rstrip(".").lower()
    try:
        ip = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        ip = None
    if ip is not None:
        if not ip.is_global:
            return (
                "is a link-local, loopback or private address: with --net=host vLLM would "
                "fetch from the node itself or the metadata server (169.254.169.254)"
            )
        return ""
    if name in _METADATA_HOSTS or name.endswith(".internal"):
        return (
            "reaches the node itself or the metadata server, which hands out the node's credentials"
        )
    if not _HOST_RE.match(name):
        return "is not a host name (write the host only, e.g. upload.wikimedia.org, no scheme)"
    return ""


class VllmConfig(_Strict):
    """`vllm serve` flags in snake_case plus the tpu-inference environment; seed values."""

    image: str = "vllm/vllm-tpu:nightly"
    container_name: str = "vllm-gemma4"
    port: int = Field(default=8000, ge=1024, le=65535)
    shm_size: str = "10gb"
    model: str = "google/gemma-4-E2B-it"
    dtype: Literal["auto", "bfloat16", "float16", "half", "float", "float32"] = "bfloat16"
    kv_cache_dtype: str = "auto"
    max_model_len: int = Field(default=32768, gt=0)
    max_num_batched_tokens: int = Field(default=4096, gt=0)
    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)
    enable_prefix_caching: bool = True
    disable_chunked_mm_input: bool = True
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"image": 4, "audio": 1})
    enable_auto_tool_choice: bool = True
    tool_call_parser: str = "gemma4"
    reasoning_parser: str = "gemma4"
    # Left unset: the backend scales block_size with max_model_len to keep 512 blocks per request
    # (seed), which is what keeps long context free. Setting it is warned.
    block_size: int | None = Field(default=None, gt=0)
    # Pins the KV pool in bytes instead of a fraction (seed: measured-good 5923602432).
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0)
    # Overrides for the guard rails, for users who know better than the seed's measurements.
    force_gpu_memory_utilization: bool = False
    force_kv_cache_dtype: bool = False
    force_tensor_parallel_size: bool = False
    # Extra `vllm serve` arguments passed verbatim (each one shell-quoted), for flags not modelled.
    extra_args: tuple[str, ...] = ()
    # Hosts vLLM may fetch image/audio URLs from. With --net=host a URL on the metadata server
    # would hand the node's credentials to whoever sends the request, and vLLM treats an empty
    # list as "every domain" (DESIGN). The default names a reserved .invalid host (RFC 2606) that
    # never resolves: URL fetching is off, inline data: URLs keep working. Widen it deliberately.
    allowed_media_domains: tuple[str, ...] = (MEDIA_URLS_DISABLED,)

    # tpu-inference environment variables (seed table); defaults are the engine's own.
    attn_bucketized_num_reqs: bool = False
    slice_rope_cache: bool = False
    num_precompile_workers: int = Field(default=1, ge=1)
    vllm_tpu_bucket_padding_gap: int = Field(default=0, ge=0)
    vllm_xla_check_recompilation: bool = False

    @field_validator("extra_args", "allowed_media_domains", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return tuple(v) if isinstance(v, list) else v

    @field_validator("allowed_media_domains")
    @classmethod
    def _media_domains(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError(
                "an empty list lets vLLM fetch media from every host, including the metadata "
                f"server; list the hosts you trust, or keep [{MEDIA_URLS_DISABLED!r}] to allow "
                "inline data: URLs only"
            )
        for host in v:
            problem = media_domain_problem(host)
            if problem:
                raise ValueError(
                    f"{host!r} {problem}; remove it (inline data: URLs need no domain)"
                )
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        if not _IMAGE_RE.match(v):
            raise ValueError(
                "not a container image reference; write repository[:tag][@sha256:digest], "
                "e.g. vllm/vllm-tpu:nightly"
            )
        return v

    @field_validator("container_name")
    @classmethod
    def _container(cls, v: str) -> str:
        if not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}", v):
            raise ValueError("not a docker container name; use letters, digits, '_', '.' and '-'")
        return v

    @field_validator("shm_size")
    @classmethod
    def _shm(cls, v: str) -> str:
        if not re.fullmatch(r"\d+[bkmg]b?", v):
            raise ValueError("not a docker size; write e.g. 10gb (the seed's value) or 512m")
        return v

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?", v):
            raise ValueError("not a Hugging Face model id; write e.g. google/gemma-4-E2B-it")
        return v

    @field_validator("tool_call_parser", "reasoning_parser", "kv_cache_dtype")
    @classmethod
    def _word(cls, v: str) -> str:
        if not _PARSER_RE.match(v):
            raise ValueError("not a vLLM choice name; write one word of letters, digits and '_'")
        return v

    @field_validator("limit_mm_per_prompt")
    @classmethod
    def _mm(cls, v: dict[str, int]) -> dict[str, int]:
        for modality, count in v.items():
            if modality not in ("image", "audio", "video"):
                raise ValueError(f"unknown modality {modality!r}; use image, audio or video")
            if count < 0:
                raise ValueError(f"{modality} limit {count} is negative; use 0 to disable")
        return v

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


class LoadConfig(_Strict):
    """The load you expect; the planner warns when it does not fit the KV pool."""

    expected_clients: int | None = Field(default=None, gt=0)
    expected_context: int | None = Field(default=None, gt=0)


def _geometry_default(field_name: str) -> Any:
    return getattr(planner.GEMMA_4_E2B, field_name)


class ModelGeometryConfig(_Strict):
    """The served model's geometry for the capacity arithmetic; Gemma 4 E2B from the seed."""

    num_hidden_layers: int = Field(default=_geometry_default("num_hidden_layers"), gt=0)
    full_attention_every: int = Field(default=_geometry_default("full_attention_every"), gt=0)
    full_attention_offset: int = Field(default=_geometry_default("full_attention_offset"), ge=0)
    num_kv_shared_layers: int = Field(default=_geometry_default("num_kv_shared_layers"), ge=0)
    num_attention_heads: int = Field(default=_geometry_default("num_attention_heads"), gt=0)
    num_key_value_heads: int = Field(default=_geometry_default("num_key_value_heads"), gt=0)
    head_dim: int = Field(default=_geometry_default("head_dim"), gt=0)
    global_head_dim: int = Field(default=_geometry_default("global_head_dim"), gt=0)
    hidden_size: int = Field(default=_geometry_default("hidden_size"), gt=0)
    intermediate_size: int = Field(default=_geometry_default("intermediate_size"), gt=0)
    vocab_size: int = Field(default=_geometry_default("vocab_size"), gt=0)
    hidden_size_per_layer_input: int = Field(
        default=_geometry_default("hidden_size_per_layer_input"), ge=0
    )
    sliding_window: int = Field(default=_geometry_default("sliding_window"), gt=0)
    param_bytes: int = Field(default=_geometry_default("param_bytes"), gt=0)
    kv_dtype_bytes: int = Field(default=_geometry_default("kv_dtype_bytes"), gt=0)
    resident_weight_bytes: int = Field(default=_geometry_default("resident_weight_bytes"), gt=0)
    mm_max_tokens_per_item: dict[str, int] = Field(
        default_factory=lambda: dict(planner.GEMMA_4_E2B.mm_max_tokens_per_item)
    )

    def to_planner(self, model_id: str) -> planner.ModelGeometry:
        return planner.ModelGeometry(name=model_id, **self.model_dump())


class DeployConfig(_Strict):
    """One deployment. An empty file gives the seed's deployment."""

    project: str = ""
    region: str = ""
    zone: str = "us-west4-a"
    name: str = "gemma4-v5e"
    # Flex-start is the default: the only model that stops billing on its own, for 3.8% more
    # than spot (seed). Spot and on-demand bill until `make destroy`.
    provisioning: Literal["flex-start", "spot", "on-demand"] = "flex-start"
    max_run_duration: str | int = "4h"
    # How long `deploy` waits for flex-start capacity before giving up (not an error until then).
    flex_start_timeout: str | int = "1h"
    # Flex-start in a zone not known to accept it is refused unless the user says otherwise.
    allow_untested_flex_zone: bool = False
    # With a bucket, every stack keeps its Terraform state in GCS (GitOps); without, locally.
    state_bucket: str = ""
    accelerator_type: str = "v5litepod-1"
    runtime_version: str = "v2-alpha-tpuv5-lite"
    labels: dict[str, str] = Field(default_factory=dict)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    vllm: VllmConfig = Field(default_factory=VllmConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    # $/chip-hour overrides by provisioning model (the seed's us-west4 rates are the default).
    prices: dict[str, float] = Field(default_factory=dict)
    model_geometry: ModelGeometryConfig = Field(default_factory=ModelGeometryConfig)
    # `make bench`: the seed's 12-cell sweep by default; validated by tpudeploy.bench.sweep.
    bench: dict[str, Any] = Field(default_factory=dict)

    @field_validator("max_run_duration", "flex_start_timeout")
    @classmethod
    def _duration(cls, v: str | int) -> str | int:
        try:
            parse_duration(v)
        except ValueError as exc:
            reason, _, fix = str(exc).partition("; ")
            raise ValueError(f"{reason.split(': ', 1)[-1]}; {fix}") from None
        return v

    @field_validator("bench")
    @classmethod
    def _bench(cls, v: dict[str, Any]) -> dict[str, Any]:
        try:
            settings_from_table(v)
        except BenchConfigError as exc:
            reason, _, fix = str(exc).partition("; ")
            raise ValueError(f"{reason}; {fix or 'see the [bench] section of README.md'}") from None
        return v

    @field_validator("state_bucket")
    @classmethod
    def _bucket(cls, v: str) -> str:
        if v and not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]", v):
            raise ValueError("not a Cloud Storage bucket name; write the bare name, no gs://")
        return v

    @field_validator("prices")
    @classmethod
    def _prices(cls, v: dict[str, float]) -> dict[str, float]:
        known = planner.SEED_PRICES.per_chip_hour
        try:
            for key in v:
                if planner.cost.normalize_model(key) not in known:
                    raise ValueError(f"no provisioning model called {key!r}")
            planner.SEED_PRICES.with_overrides(v)
        except ValueError as exc:
            raise ValueError(f"{exc}; use keys among {', '.join(known)}") from None
        return v

    @property
    def max_run_duration_seconds(self) -> int:
        return parse_duration(self.max_run_duration, name="max_run_duration")

    @property
    def flex_start_timeout_seconds(self) -> int:
        return parse_duration(self.flex_start_timeout, name="flex_start_timeout")

    @property
    def queued_resource_id(self) -> str:
        return f"{self.name}-qr"

    def geometry(self) -> planner.ModelGeometry:
        return self.model_geometry.to_planner(self.vllm.model)

    def price_table(self) -> planner.PriceTable:
        return planner.SEED_PRICES.with_overrides(self.prices)

    def serve_settings(self) -> planner.ServeSettings:
        v = self.vllm
        return planner.ServeSettings(
            accelerator_type=self.accelerator_type,
            gpu_memory_utilization=v.gpu_memory_utilization,
            force_gpu_memory_utilization=v.force_gpu_memory_utilization,
            kv_cache_dtype=v.kv_cache_dtype,
            force_kv_cache_dtype=v.force_kv_cache_dtype,
            tensor_parallel_size=v.tensor_parallel_size,
            force_tensor_parallel_size=v.force_tensor_parallel_size,
            max_model_len=v.max_model_len,
            max_num_batched_tokens=v.max_num_batched_tokens,
            limit_mm_per_prompt=dict(v.limit_mm_per_prompt),
            disable_chunked_mm_input=v.disable_chunked_mm_input,
            block_size=v.block_size,
            kv_cache_memory_bytes=v.kv_cache_memory_bytes,
            expected_clients=self.load.expected_clients,
            expected_context=self.load.expected_context,
        )

    def findings(self) -> list[planner.Finding]:
        """The seed's guard rails on this config: errors first, then warnings and notes."""
        return planner.check_settings(self.serve_settings(), model=self.geometry())

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if v and not re.fullmatch(_PROJECT_ID, v):
            raise ValueError(
                "not a Google Cloud project id; use the id (6-30 lowercase letters, digits, "
                "hyphens), not the display name or number"
            )
        return v

    @field_validator("zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        if not _ZONE_RE.match(v):
            raise ValueError("not a zone name; write e.g. us-west4-a (the seed's zone)")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(
                "not a usable deployment name (it prefixes the node, the service account and "
                "the secrets); use 3-24 lowercase letters, digits and hyphens, starting with a "
                "letter, e.g. gemma4-v5e"
            )
        return v

    @field_validator("accelerator_type")
    @classmethod
    def _accel(cls, v: str) -> str:
        if v.startswith("v5e"):
            raise ValueError(
                "gcloud and the TPU API spell v5e as 'v5litepod' (seed: 'v5e-1' is fine in prose "
                f"and never valid as an argument); write {v.replace('v5e', 'v5litepod', 1)!r}"
            )
        m = _ACCEL_RE.match(v)
        if not m or m["gen"] not in RUNTIMES_BY_GENERATION:
            raise ValueError(
                "unknown accelerator type; known generations: "
                + ", ".join(sorted(RUNTIMES_BY_GENERATION))
                + " (e.g. v5litepod-1 for one v5e chip)"
            )
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if key in RESERVED_LABEL_KEYS:
                raise ValueError(
                    f"label key {key!r} is set by tpudeploy itself; rename it (reserved: "
                    + ", ".join(RESERVED_LABEL_KEYS)
                    + ")"
                )
            if not _LABEL_KEY_RE.match(key) or not _LABEL_VALUE_RE.match(value):
                raise ValueError(
                    f"label {key}={value!r} is not a valid Google Cloud label; use lowercase "
                    "letters, digits, '_' and '-', keys starting with a letter, at most 63 "
                    "characters"
                )
        return v

    # Derived names: deterministic, from the deployment name (no random suffixes).
    @property
    def effective_region(self) -> str:
        m = _ZONE_RE.match(self.zone)
        assert m is not None
        return self.region or m["region"]

    @property
    def service_account_id(self) -> str:
        return f"{self.name}-node"

    @property
    def deploy_account_id(self) -> str:
        """GitOps: the identity that applies this deployment, created by the bootstrap."""
        return gitops.deploy_account_id(self.name)

    @property
    def gitops_managed(self) -> bool:
        """A pipeline deployment (remote state): the bootstrap creates its node service account
        and its deploy identity, and enables the project's APIs (README, GitOps)."""
        return bool(self.state_bucket)

    @property
    def hf_token_secret_id(self) -> str:
        return f"{self.name}-hf-token"

    @property
    def api_key_secret_id(self) -> str:
        return f"{self.name}-api-key"

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
    def vllm_firewall_name(self) -> str:
        return f"{self.name}-allow-vllm"

    @property
    def ssh_firewall_name(self) -> str:
        return f"{self.name}-allow-iap-ssh"

    @property
    def network_tag(self) -> str:
        return f"{self.name}-vllm"

    @property
    def secrets_stack_name(self) -> str:
        return f"{self.name}-secrets"

    @property
    def node_stack_name(self) -> str:
        return f"{self.name}-node"


def cross_check(cfg: DeployConfig) -> list[str]:
    """Rules that span several keys; each problem names the key to change."""
    problems = []
    zone = _ZONE_RE.match(cfg.zone)
    assert zone is not None  # zone already validated
    if cfg.region and cfg.region != zone["region"]:
        problems.append(
            _problem(
                "region",
                cfg.region,
                f"zone {cfg.zone!r} is not in this region",
                f"set region = {zone['region']!r} or leave it out",
            )
        )
    runtimes = RUNTIMES_BY_GENERATION.get(cfg.accelerator_type.rsplit("-", 1)[0], ())
    if runtimes and cfg.runtime_version not in runtimes:
        problems.append(
            _problem(
                "runtime_version",
                cfg.runtime_version,
                f"does not run on accelerator_type {cfg.accelerator_type!r}",
                "use " + " or ".join(repr(r) for r in runtimes),
            )
        )
    if cfg.provisioning == "flex-start" and not cfg.allow_untested_flex_zone:
        known = FLEX_START_ZONES.get(cfg.accelerator_type, {})
        if cfg.zone not in known:
            why = FLEX_START_REFUSED_ZONES.get(cfg.zone, "not known to accept it")
            good = flex_start_zones_text(cfg.accelerator_type) or "none recorded"
            problems.append(
                _problem(
                    "zone",
                    cfg.zone,
                    f"flex-start {cfg.accelerator_type} in this zone: {why}",
                    f"use one of the known-good zones: {good}; or set "
                    "allow_untested_flex_zone = true to try anyway",
                )
            )
    public = [c for c in cfg.network.allowed_cidrs if ipaddress.ip_network(c).prefixlen == 0]
    if public and not cfg.network.allow_public_endpoint:
        problems.append(
            _problem(
                "network.allowed_cidrs",
                list(cfg.network.allowed_cidrs),
                f"{public[0]} opens the vLLM port to the whole internet",
                "list your own ranges, or set [network] allow_public_endpoint = true "
                "if you really mean it",
            )
        )
    return problems


# Fix hints for keys whose pydantic message alone does not say what to write.
_FIX_HINTS: dict[str, str] = {
    "provisioning": 'use "flex-start" (stops billing on its own), "spot" or "on-demand"',
    "vllm.dtype": 'the seed runs "bfloat16" (the only format that runs on this stack)',
    "vllm.gpu_memory_utilization": "a fraction in (0, 1]; the seed's ceiling on v5e is 0.92",
}


def _known_keys(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel]:
    model: type[BaseModel] = DeployConfig
    for part in loc:
        field = model.model_fields.get(str(part))
        ann = field.annotation if field else None
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            break
    return model


def _format_errors(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = ".".join(str(p) for p in loc) or "(top level)"
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            known = _known_keys(_model_at(loc[:-1]))
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(known)
            problems.append(
                _problem(key, value, "unknown key", f"remove it or fix the spelling; {hint}")
            )
            continue
        if err["type"] == "value_error":
            # Our own validators: the message already says what to write.
            reason, _, fix = str(err["msg"]).removeprefix("Value error, ").partition("; ")
            problems.append(_problem(key, value, reason, fix or _FIX_HINTS.get(key, "")))
            continue
        fix = _FIX_HINTS.get(key) or _default_hint(loc)
        problems.append(_problem(key, value, str(err["msg"]), fix))
    return problems


def _default_hint(loc: tuple[int | str, ...]) -> str:
    model = _model_at(loc[:-1])
    field = model.model_fields.get(str(loc[-1]))
    if field is None:
        return "see the configuration reference in README.md"
    ann = field.annotation
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return f"write [{'.'.join(map(str, loc))}] as a table"
    default = field.get_default(call_default_factory=True)
    return f"write a value of the same kind as the default, {default!r}"


def parse_config(data: dict[str, Any], *, source: str = DEFAULT_CONFIG_PATH) -> DeployConfig:
    """Validate raw TOML data; GOOGLE_CLOUD_PROJECT fills an unset project."""
    data = dict(data)
    if not data.get("project"):
        data["project"] = os.environ.get("GOOGLE_CLOUD_PROJECT", "")
    try:
        cfg = DeployConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, _format_errors(exc)) from None
    # The build log's guard rails are not applied here: tpudeploy.policy runs them for the
    # commands that create or change billable resources only.
    problems = cross_check(cfg)
    if problems:
        raise ConfigError(source, problems)
    return cfg


def config_path() -> Path:
    return Path(os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH)


def load_config(path: str | Path | None = None) -> DeployConfig:
    """Read and validate the deployment config (DEPLOY_CONFIG, else deploy.toml)."""
    p = Path(path) if path is not None else config_path()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            str(p), [f"file not found; create it or point {CONFIG_ENV} at an existing TOML file"]
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), [f"not valid TOML ({exc}); fix the syntax"]) from None
    return parse_config(data, source=str(p))


def require_project(cfg: DeployConfig, *, source: str = DEFAULT_CONFIG_PATH) -> str:
    """Deploying needs a project; synthesizing does not (the stacks then take var.project)."""
    if not cfg.project:
        raise ConfigError(
            source,
            [
                _problem(
                    "project",
                    "",
                    "no Google Cloud project to deploy into",
                    'set project = "my-project" in the config or export GOOGLE_CLOUD_PROJECT',
                )
            ],
        )
    return cfg.project
