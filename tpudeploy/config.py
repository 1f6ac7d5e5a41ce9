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
    # Extra `vllm serve` arguments passed verbatim (each one shell-quoted), for flags not modelled.
    extra_args: tuple[str, ...] = ()

    # tpu-inference environment variables (seed table); defaults are the engine's own.
    attn_bucketized_num_reqs: bool = False
    slice_rope_cache: bool = False
    num_precompile_workers: int = Field(default=1, ge=1)
    vllm_tpu_bucket_padding_gap: int = Field(default=0, ge=0)
    vllm_xla_check_recompilation: bool = False

    @field_validator("extra_args", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return tuple(v) if isinstance(v, list) else v

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


class DeployConfig(_Strict):
    """One deployment. An empty file gives the seed's deployment."""

    project: str = ""
    region: str = ""
    zone: str = "us-west4-a"
    name: str = "gemma4-v5e"
    provisioning: Literal["flex-start", "spot", "on-demand"] = "spot"
    accelerator_type: str = "v5litepod-1"
    runtime_version: str = "v2-alpha-tpuv5-lite"
    labels: dict[str, str] = Field(default_factory=dict)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    vllm: VllmConfig = Field(default_factory=VllmConfig)

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if v and not re.fullmatch(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", v):
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
            if not _LABEL_KEY_RE.match(key) or not _LABEL_VALUE_RE.match(value):
                raise ValueError(
                    f"label {key}={value!r} is not a valid Google Cloud label (lowercase letters, "
                    "digits, '_' and '-', keys start with a letter, at most 63 characters)"
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
    def hf_token_secret_id(self) -> str:
        return f"{self.name}-hf-token"

    @property
    def node_id(self) -> str:
        return self.name

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
    "provisioning": 'use "spot" or "on-demand"',
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
    if data.get("provisioning") == "flex-start":
        raise ConfigError(
            source,
            [
                _problem(
                    "provisioning",
                    "flex-start",
                    "flex-start needs the queued-resource client, which is not built yet",
                    'use "spot" or "on-demand" for now',
                )
            ],
        )
    try:
        cfg = DeployConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, _format_errors(exc)) from None
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
