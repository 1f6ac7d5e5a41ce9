"""Loading a deployment config: TOML, the schema, the rules that span keys, and the messages.

Every problem names the key, the value, the reason and the fix; all are reported at once. The
build log's guard rails are not applied here (tpudeploy.policy runs them for the commands that
create or change billable resources only).
"""

from __future__ import annotations

import copy
import difflib
import math
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tpudeploy import facts, names
from tpudeploy.config import ladder, ladder_rules
from tpudeploy.config.gke import gke_problems, version_tuple
from tpudeploy.config.idle_rules import idle_problems
from tpudeploy.config.messages import format_errors, problem
from tpudeploy.config.network import PUBLIC_ADDRESS_LIMIT, public_addresses
from tpudeploy.config.schema import DeployConfig
from tpudeploy.durations import MIN_DEADLINE_SECONDS
from tpudeploy.errors import UserError

DEFAULT_CONFIG_PATH = "deploy.toml"
CONFIG_ENV = "DEPLOY_CONFIG"


class ConfigError(UserError):
    """A configuration that cannot be deployed; each problem names key, value, reason and fix."""

    exit_code = 2  # a usage error: nothing was attempted

    def __init__(
        self,
        source: str,
        problems: list[str],
        *,
        judged: DeployConfig | None = None,
        refused: frozenset[str] = frozenset(),
    ) -> None:
        self.source = source
        self.problems = problems
        # What the rest of the file still is: the config with each refused key at its default
        # (`refused`), so a layer above config can add what its own rules say of it
        # (tpudeploy.platform.with_later_refusals: the guard rails) in the same round.
        self.judged = judged
        self.refused = refused
        super().__init__(self.render())

    def with_later(self, later: list[str]) -> ConfigError:
        """This error with `later` problems of the judged rest appended, except those naming a
        refused key: they judge the default standing in for it, a value the user never wrote
        (runtime_version "does not run on" the default chip)."""
        kept = [
            p
            for p in later
            if not any(re.search(rf"\b{re.escape(key)}\b", p) for key in self.refused)
        ]
        return ConfigError(
            self.source, self.problems + kept, judged=self.judged, refused=self.refused
        )

    def line(self) -> str:
        return str(self)  # several lines, each problem with its fix: never flattened

    def render(self) -> str:
        lines = [f"{self.source}: {len(self.problems)} problem(s) in the deployment config:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def cross_check(cfg: DeployConfig) -> list[str]:
    """Rules that span several keys; each problem names the key to change."""
    problems = []
    region = names.region_of(cfg.zone)  # zone already validated
    if cfg.region and cfg.region != region and not cfg.capacity:  # a ladder: ladder_problems
        problems.append(
            problem(
                "region",
                cfg.region,
                f"zone {cfg.zone!r} is not in this region",
                f"set region = {region!r} or leave it out",
            )
        )
    # The accelerator type is already known to have chip data; its runtime is the only one
    # that boots on that chip.
    runtime = facts.lookup_accelerator(cfg.accelerator_type).chip.runtime_version
    if cfg.runtime_version != runtime:
        problems.append(
            problem(
                "runtime_version",
                cfg.runtime_version,
                f'does not run on accelerator_type "{cfg.accelerator_type}"',
                f'use runtime_version = "{runtime}"',
            )
        )
    problems += _bucket_problems(cfg)
    if cfg.pipeline and not cfg.state_bucket:
        problems.append(
            problem(
                "pipeline",
                True,
                "a pipeline deployment is applied by CI runners, whose disk is gone after each "
                "job: without remote state Terraform would forget what it created while it bills",
                'add state_bucket = "<the bucket gitops.toml names>", or remove pipeline = true '
                "for local use (your stacks then declare the node account, secrets and APIs)",
            )
        )
    if cfg.section.node_pools:
        # The TPU VM's provisioning model and run end do not apply: [gke] capacity and
        # max_run_duration say what a node draws on and when it ends.
        problems += gke_problems(
            zone=cfg.zone,
            accelerator_type=cfg.accelerator_type,
            gke=cfg.gke,
            allow_untested_flex_zone=cfg.allow_untested_flex_zone,
            routing_gateway=cfg.routing.gateway,
        )
    elif "gke" in cfg.model_fields_set and cfg.gke.model_dump(exclude_defaults=True):
        # A [gke] table that sets something: a dump of a whole config carries the defaults.
        problems.append(
            problem(
                "gke",
                cfg.gke.model_dump(exclude_defaults=True),
                '[gke] applies to platform = "gke" only: this deployment is one TPU VM',
                'set platform = "gke", or remove the [gke] table',
            )
        )
    if cfg.flex_start_node and cfg.deadline.region:
        # Nothing reads it there: a flex-start node has no deadline job (the TPU API ends its
        # queued resource at max_run_duration), so a set region would be silently ignored.
        problems.append(
            problem(
                "deadline.region",
                cfg.deadline.region,
                "[deadline] places the Cloud Scheduler job that ends a spot or on-demand node "
                "(or a GKE cluster); a flex-start node has none: the TPU API ends it at "
                "max_run_duration",
                'remove [deadline] region, or choose provisioning = "spot" or "on-demand"',
            )
        )
    if not cfg.section.node_pools and cfg.routing.gateway:
        problems.append(
            problem(
                "routing.gateway",
                True,
                "the Gateway and endpoint picker route between GKE replicas: one TPU VM has "
                "nothing to route between",
                'set platform = "gke", or remove [routing] gateway',
            )
        )
    if (
        cfg.section.node_pools
        and cfg.routing.gateway
        and version_tuple(cfg.gke.min_version) < version_tuple(facts.GKE_INFERENCE_CRDS_MIN_VERSION)
    ):
        problems.append(
            problem(
                "gke.min_version",
                cfg.gke.min_version,
                "[routing] gateway declares an InferencePool, a resource GKE installs itself from "
                f"{facts.GKE_INFERENCE_CRDS_MIN_VERSION} on ({facts.GKE_INFERENCE_CRDS_SOURCE}); "
                "on an older cluster its apply fails: no such kind",
                f'set min_version = "{facts.GKE_INFERENCE_CRDS_MIN_VERSION}" or later',
            )
        )
    # Each rung of a capacity ladder is judged as the deployment it would be, under its own key
    # (capacity[N].zone); without a ladder, the config itself.
    for key, each in ladder_rules.rungs(cfg):
        found = _zone_problems(each) + _flex_zone_problems(each)
        found += _run_end_problems(each) if each.section.one_node else _deadline_problems(each)
        # The idle stop applies on every rung, so each rung's provisioning is judged for it
        # (flex-start has no idle stop yet: config/idle_table.py).
        found += idle_problems(each)
        problems += ladder_rules.keyed(key, each, found)
    problems += ladder_rules.ladder_problems(cfg)
    public = public_addresses(cfg.network.allowed_cidrs)
    over = [v for v in (4, 6) if public[v] > PUBLIC_ADDRESS_LIMIT[v]]
    if over and not cfg.network.allow_public_endpoint:
        version = over[0]
        bits, limit = (32, "/16") if version == 4 else (128, "/48")
        # The size as a prefix length ("a /1's worth"), readable for IPv6 too.
        size = bits - round(math.log2(public[version]))
        problems.append(
            problem(
                "network.allowed_cidrs",
                list(cfg.network.allowed_cidrs),
                f"together they open the API port to a /{size}'s worth of public IPv{version} "
                f"addresses, more than a {limit}: that is the internet, not your network",
                "list your own ranges, or set [network] allow_public_endpoint = true "
                "if you really mean it",
            )
        )
    if not cfg.network.enable_external_ip and cfg.network.nat and "/" in cfg.network.network:
        problems.append(
            problem(
                "network.nat",
                True,
                "a private node on a shared VPC gets its egress from the host project's Cloud "
                "NAT, which the node stack cannot declare (the router lives in the host project)",
                "set up Cloud NAT for the subnetwork in the host project, then set [network] "
                "nat = false; or set enable_external_ip = true",
            )
        )
    if cfg.proxy.port == cfg.vllm.port:
        problems.append(
            problem(
                "proxy.port",
                cfg.proxy.port,
                "is also [vllm] port: vLLM listens on it on loopback, the proxy on every address",
                f"use another port, e.g. {8443 if cfg.vllm.port != 8443 else 9443}",
            )
        )
    return problems


def _flex_zone_problems(cfg: DeployConfig) -> list[str]:
    """Flex-start only where the build log or Google's documentation saw it accepted."""
    if not cfg.flex_start_node or cfg.allow_untested_flex_zone:
        return []
    known = facts.FLEX_START_ZONES.get(cfg.accelerator_type)
    if not known:
        # No zone to suggest: the accelerator type is what to change.
        verified = ", ".join(facts.FLEX_START_ZONES)
        return [
            problem(
                "accelerator_type",
                cfg.accelerator_type,
                f"no zone is known to accept flex-start {cfg.accelerator_type} (flex-start "
                f"was seen to work for {verified} only)",
                f'use accelerator_type = "{facts.ACCELERATOR_TYPE}", provisioning = "spot" '
                'or "on-demand", or set allow_untested_flex_zone = true to try anyway',
            )
        ]
    if cfg.zone in known:
        return []
    why = facts.FLEX_START_REFUSED_ZONES.get(cfg.zone, "not known to accept it")
    good = facts.flex_start_zones_text(cfg.accelerator_type)
    return [
        problem(
            "zone",
            cfg.zone,
            f"flex-start {cfg.accelerator_type} in this zone: {why}",
            f"use one of the known-good zones: {good}; or set "
            "allow_untested_flex_zone = true to try anyway",
        )
    ]


def _zone_problems(cfg: DeployConfig) -> list[str]:
    """A zone where Google lists no TPU of the accelerator's generation is refused here: the TPU
    API refuses it only at apply. Flex-start has its own, narrower list (below), whose override
    allow_untested_flex_zone already says "try a zone nobody vetted"."""
    # GKE's TPU pools have their own, narrower zone list (tpudeploy.config.gke).
    if cfg.allow_unlisted_zone or cfg.provisioning == "flex-start" or not cfg.section.one_node:
        return []
    generation = facts.lookup_accelerator(cfg.accelerator_type).chip.generation
    zones = facts.TPU_ZONES.get(generation, {})
    if cfg.zone in zones:
        return []
    near = difflib.get_close_matches(cfg.zone, list(zones), n=1, cutoff=0.8)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return [
        problem(
            "zone",
            cfg.zone,
            f"Google lists no TPU {generation} in this zone ({facts.TPU_ZONES_SOURCE})",
            f"{hint}use one of {', '.join(zones)}; or set allow_unlisted_zone = true if the "
            "page lists it now",
        )
    ]


def _bucket_problems(cfg: DeployConfig) -> list[str]:
    """The compile-cache bucket's name comes from the project and the name: one Cloud Storage
    would refuse (a reserved word) is refused here, naming the key it comes from."""
    suffix_problem = names.bucket_name_problem(f"x-{cfg.compile_cache_bucket_suffix}")
    if suffix_problem:
        return [
            problem(
                "name",
                cfg.name,
                f"the compile-cache bucket {cfg.compile_cache_bucket('PROJECT')!r} "
                f"{suffix_problem}",
                'choose a name without "google" (or "g00gle"), e.g. gemma4-v5e',
            )
        ]
    if cfg.project:
        bucket = cfg.compile_cache_bucket(cfg.project)
        reason = names.bucket_name_problem(bucket)
        if reason:
            return [
                problem(
                    "project",
                    cfg.project,
                    f"the compile-cache bucket {bucket!r} {reason}",
                    "deploy into a project whose id neither begins with goog nor contains google",
                )
            ]
    return []


def _run_end_problems(cfg: DeployConfig) -> list[str]:
    """What ends a node's billing, and what brings it back, must fit the provisioning model."""
    problems = []
    if cfg.provisioning == "flex-start" and cfg.max_run_duration_seconds is None:
        problems.append(
            problem(
                "max_run_duration",
                cfg.max_run_duration,
                "flex-start always ends: its queued resource takes a run duration of at most 7 "
                "days, and only spot and on-demand may run with no end",
                'write a duration such as "4h", or choose provisioning = "spot" or "on-demand"',
            )
        )
    problems += _deadline_problems(cfg)
    if cfg.auto_recover and cfg.provisioning == "flex-start":
        problems.append(
            problem(
                "auto_recover",
                True,
                "flex-start is never preempted: its run ends (SUSPENDED) when max_run_duration "
                "is over, and that end is the billing stop, which only a deliberate make deploy "
                "starts again",
                'remove auto_recover, or use provisioning = "spot"',
            )
        )
    return problems


def _deadline_problems(cfg: DeployConfig) -> list[str]:
    """A deadline job must exist before its deadline (TPU VM spot and on-demand, GKE)."""
    if cfg.deadline_seconds is None or cfg.deadline_seconds >= MIN_DEADLINE_SECONDS:
        return []
    what = cfg.section.deadline_noun or cfg.provisioning
    return [
        problem(
            "max_run_duration",
            cfg.max_run_duration,
            f"a {what} deadline under {MIN_DEADLINE_SECONDS // 60} minutes could pass before "
            "the deploy has created its job, which would then fire a year later",
            f'use at least "{MIN_DEADLINE_SECONDS // 60}m"',
        )
    ]


# Fix hints for keys whose kind-and-example answer alone does not say what to write.
_FIX_HINTS: dict[str, str] = {
    "provisioning": 'use "flex-start" (stops billing on its own), "spot" or "on-demand"',
    "vllm.dtype": 'use "bfloat16": the build log found bf16 the only format that runs here',
    "vllm.gpu_memory_utilization": "a fraction in (0, 1]; the build log's ceiling on v5e is 0.92",
}


def parse_config(
    data: dict[str, Any], *, source: str = DEFAULT_CONFIG_PATH, rung: int = 1
) -> DeployConfig:
    """Validate raw TOML data; GOOGLE_CLOUD_PROJECT fills an unset project. With a capacity
    ladder, rung number `rung` (from 1) gives provisioning and zone (config/ladder.py)."""
    data = dict(data)
    chosen = ladder.select(data, rung)
    if chosen:
        raise ConfigError(source, chosen)
    if not data.get("project"):
        data["project"] = os.environ.get("GOOGLE_CLOUD_PROJECT", "")
    try:
        cfg = DeployConfig.model_validate(data)
    except ValidationError as exc:
        problems = format_errors(exc, DeployConfig, hints=_FIX_HINTS)
        # All problems in one round: judge the rest of the file with the refused keys left at
        # their defaults, so a file with four mistakes reports four (issue 23), not two.
        locs = [tuple(err["loc"]) for err in exc.errors()]
        rest = _without(data, locs)
        try:
            partial = DeployConfig.model_validate(rest)
        except ValidationError:
            raise ConfigError(source, problems) from None
        refused = frozenset(".".join(str(part) for part in loc) for loc in locs if loc)
        failed = ConfigError(source, problems, judged=partial, refused=refused)
        raise failed.with_later(cross_check(partial)) from None
    # The build log's guard rails are not applied here, to a valid file or a failing one: this
    # package validates shape. tpudeploy.policy applies them for the commands that create or
    # change billable resources, and tpudeploy.platform.load_config adds them to a failure.
    problems = cross_check(cfg)
    if problems:
        raise ConfigError(source, problems, judged=cfg)
    return cfg


def _without(data: dict[str, Any], locs: list[tuple[Any, ...]]) -> dict[str, Any]:
    """`data` with the value at each error location removed (a copy; tables copied on write)."""
    out = copy.deepcopy(data)
    for loc in locs:
        node: Any = out
        for part in loc[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(loc[-1], None)
        elif loc and isinstance(out, dict):
            out.pop(loc[0], None)
    return out


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
    return parse_config(data, source=str(p), rung=ladder.rung_in_use(p, data))


def require_project(cfg: DeployConfig, *, source: str = DEFAULT_CONFIG_PATH) -> str:
    """Deploying needs a project; synthesizing does not (the stacks then take var.project)."""
    if not cfg.project:
        raise ConfigError(
            source,
            [
                problem(
                    "project",
                    "",
                    "no Google Cloud project to deploy into",
                    'set project = "my-project" in the config or export GOOGLE_CLOUD_PROJECT',
                )
            ],
        )
    return cfg.project
