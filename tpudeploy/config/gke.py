"""`[gke]`: N replicas of the same server on GKE, and what GKE requires before any API call.

The model's field checks are plain functions; `gke_problems` holds the rules that span keys
(zone, accelerator, version, capacity), run by loading for `platform = "gke"` only. Google's
rules are data in tpudeploy.facts, each with its source.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator

from tpudeploy import facts
from tpudeploy.config.base import Strict
from tpudeploy.config.messages import problem
from tpudeploy.durations import DurationError, parse_duration

# Capacity a TPU pool draws on, in the ComputeClass's order: spot first (the build log's
# cheapest), flex-start when spot has none (3.8% more, and it ends on its own).
CAPACITY_CHOICES = ("spot", "flex-start", "spot,flex-start")
# GKE's release channels (google_container_cluster release_channel.channel, less UNSPECIFIED:
# a cluster off every channel never gets the versions the TPU features need).
RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "EXTENDED")
# "1.33.0-gke.1712000", or a prefix of it ("1.33", "1.33.0"): what min_master_version takes.
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+)(?:-gke\.(\d+))?)?")
# Compute Engine machine types: family-shape[-n] ("e2-standard-2", "n2d-highcpu-4").
_MACHINE_TYPE_RE = re.compile(r"[a-z][a-z0-9]*-[a-z]+(-[0-9]+)?")
# A private cluster's control plane: a /28 of RFC 1918 space (GKE, private clusters).
CONTROL_PLANE_PREFIX = 28
PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)
# A replica costs a compile to start (build log: warm 497 s, cold 857 s) and a chip-hour to
# keep; more than this many in one zone is a quota question the config cannot answer.
MAX_REPLICAS_LIMIT = 64
# An HPA may scale a Deployment to zero (minReplicas 0) only from GKE 1.37: "the GKE cluster
# control plane and nodes must run version 1.37 or later", and "You must configure at least one
# External or Object metric" (GKE's tutorial "Scale GKE workloads to and from zero using HPA",
# Considerations, its zh-cn stored copy, read 2026-12-03); upstream the HPAScaleToZero gate is
# "Beta and enabled by default" from Kubernetes v1.37 (kubernetes.io blog, 2026-09-02). No GKE
# patch build is named: the minor is the floor.
HPA_SCALE_TO_ZERO_SOURCE = (
    "docs.cloud.google.com/kubernetes-engine/docs/tutorials/scale-to-from-zero-hpa (Considerations)"
    " and kubernetes.io/blog/2026/09/02/kubernetes-v1-37-hpa-scale-to-zero-beta, read 2026-12-03"
)
HPA_SCALE_TO_ZERO_MIN_VERSION = "1.37"


def version_tuple(version: str) -> tuple[int, int, int, int]:
    """`1.33.0-gke.1712000` -> (1, 33, 0, 1712000); missing parts count as 0."""
    match = _VERSION_RE.fullmatch(version.strip())
    if match is None:
        raise ValueError(f"{version!r} is not a GKE version")
    major, minor, patch, gke = match.groups()
    return int(major), int(minor), int(patch or 0), int(gke or 0)


def check_version(v: str) -> str:
    if _VERSION_RE.fullmatch(v.strip()) is None:
        raise ValueError(
            "not a GKE version; write it as GKE does, e.g. "
            f'"{facts.GKE_FLEX_START_TPU_MIN_VERSION}" (or a prefix such as "1.33")'
        )
    return v.strip()


def check_control_plane_cidr(v: str) -> str:
    """A private cluster's control-plane range: an RFC 1918 IPv4 /28 (GKE's private clusters;
    the REST reference's PrivateClusterConfig.masterIpv4CidrBlock)."""
    if not v:
        return v
    try:
        net = ipaddress.IPv4Network(v.strip(), strict=True)
    except ValueError:
        raise ValueError(
            'not an IPv4 range in CIDR form; write a /28 such as "172.16.0.32/28", or leave it '
            "out for one derived from the deployment's name"
        ) from None
    if net.prefixlen != CONTROL_PLANE_PREFIX:
        example = (
            next(net.subnets(new_prefix=CONTROL_PLANE_PREFIX))
            if net.prefixlen < CONTROL_PLANE_PREFIX
            else net.supernet(new_prefix=CONTROL_PLANE_PREFIX)
        )
        raise ValueError(
            f"GKE gives a private cluster's control plane a /{CONTROL_PLANE_PREFIX} (16 "
            f'addresses); write e.g. "{example}"'
        )
    if not any(net.subnet_of(p) for p in PRIVATE_RANGES):
        raise ValueError(
            "a control plane's range is internal: use a /28 of 10.0.0.0/8, 172.16.0.0/12 or "
            '192.168.0.0/16, e.g. "172.16.0.32/28"'
        )
    return str(net)


def check_machine_type(v: str) -> str:
    if _MACHINE_TYPE_RE.fullmatch(v) is None:
        raise ValueError('not a Compute Engine machine type; write e.g. "e2-standard-2"')
    return v


def check_capacity(v: str) -> str:
    cleaned = ",".join(part.strip() for part in v.lower().split(","))
    if cleaned not in CAPACITY_CHOICES:
        raise ValueError(
            "not a TPU capacity GKE pools draw on here (on-demand v5e costs 2.08x spot, build "
            'log); use "spot", "flex-start" or "spot,flex-start" (spot first, flex-start when '
            "spot has no capacity)"
        )
    return cleaned


def check_node_run_duration(v: object) -> object:
    """A flex-start node's run: a duration of at most 7 days (GKE's flex-start limit)."""
    try:
        parse_duration(v)  # type: ignore[arg-type]
    except DurationError as exc:
        raise ValueError(f"{exc.reason}; {exc.fix}") from None
    return v


def check_min_replicas(v: int) -> int:
    """Zero or more replicas. Whether zero is possible depends on keys beside this one (the
    cluster's version floor, the routing): `min_replicas_problems` says, with the rest."""
    if v < 0:
        # The message on a line of its own (the trailing comma keeps it there), as prose is, so
        # that make mutants leaves its wording alone (pyproject's do_not_mutate_patterns).
        raise ValueError(
            "is a count of replicas; set min_replicas = 0 or more",
        )
    return v


def min_replicas_problems(gke: GkeConfig, *, routing_gateway: bool) -> list[str]:
    """Why `min_replicas = 0` cannot be deployed here, each naming the requirement: the cluster's
    version floor (GKE 1.37 for an HPA at zero) and the routing. The wake path a request needs
    at zero (GKE's Services buffer nothing while no pod is ready: kubernetes.io blog,
    2026-09-02) is the serving stack's: tpudeploy.gke.zero, stacks/gke/wake_objects.py."""
    if gke.min_replicas != 0:
        return []
    found = []
    floor = HPA_SCALE_TO_ZERO_MIN_VERSION
    if version_tuple(gke.min_version) < version_tuple(floor):
        found.append(
            problem(
                "gke.min_version",
                gke.min_version,
                f"min_replicas = 0 needs an HPA that scales to zero, which GKE supports from "
                f"{floor} (control plane and nodes; {HPA_SCALE_TO_ZERO_SOURCE}); this "
                "floor lets the cluster run older versions",
                f'set min_version = "{floor}" (the plan then stops while the release channel\'s '
                "default is older), or set min_replicas = 1",
            )
        )
    if routing_gateway:
        found.append(
            problem(
                "gke.min_replicas",
                0,
                "with [routing] gateway the load balancer calls the endpoint picker as a callout "
                "whose per-message timeout is at most 10,000 ms (Network Services API, "
                "ExtensionChain.Extension.timeout): it cannot hold a request through a node's "
                f"provisioning and a warm boot ({facts.WARM_BOOT_S:.0f} s, build log), and an "
                "InferencePool with no ready endpoint has no fallback backend here",
                "set min_replicas = 1, or [routing] gateway = false",
            )
        )
    return found


class GkeConfig(Strict):
    """`platform = "gke"`: replicas of the TPU VM's server on a zonal GKE Standard cluster."""

    min_replicas: int = Field(default=1, le=MAX_REPLICAS_LIMIT)
    """replicas kept serving; 0 (GKE 1.37 or later, no [routing] gateway) scales to zero"""
    max_replicas: int = Field(default=4, ge=1, le=MAX_REPLICAS_LIMIT)
    """the most replicas (one v5e chip each) the autoscaler may run"""
    capacity: str = "spot,flex-start"
    """TPU capacity in order: "spot", "flex-start" or "spot,flex-start" (spot first)"""
    # One day: each recycled node costs a warm boot (497 s), and a node nobody uses still ends.
    max_run_duration: str | int = "1d"
    """how long a flex-start TPU node runs before GKE recycles it, at most 7d"""
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = "REGULAR"
    """the cluster's GKE release channel"""
    # Flex-start TPU nodes need this version (facts.GKE_FLEX_START_TPU_MIN_VERSION).
    min_version: str = facts.GKE_FLEX_START_TPU_MIN_VERSION
    """the lowest GKE version the cluster may run: checked against the channel's default"""
    system_machine_type: str = "e2-standard-2"
    """the small always-on pool for GKE's own system pods"""
    # An internal passthrough load balancer answers clients of its own region only unless its
    # forwarding rule allows global access (tpudeploy.gke.reach, with the source).
    global_access: bool = False
    """let clients in every region of the VPC reach the Service, not only its own region"""
    # Empty: a /28 derived from the deployment's name (tpudeploy.gke.vpc), so two deployments
    # of a VPC get two ranges; set it to keep a cluster's range (changing it replaces the cluster).
    control_plane_cidr: str = Field(default="", examples=["172.16.0.32/28"])
    """the control plane's private /28 (empty: derived from the name, distinct per deployment)"""

    @field_validator("min_replicas")
    @classmethod
    def _min_replicas(cls, v: int) -> int:
        return check_min_replicas(v)

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, v: str) -> str:
        return check_capacity(v)

    @field_validator("max_run_duration", mode="before")
    @classmethod
    def _run(cls, v: object) -> object:
        return check_node_run_duration(v)

    @field_validator("min_version")
    @classmethod
    def _version(cls, v: str) -> str:
        return check_version(v)

    @field_validator("control_plane_cidr")
    @classmethod
    def _control_plane(cls, v: str) -> str:
        return check_control_plane_cidr(v)

    @field_validator("system_machine_type")
    @classmethod
    def _machine(cls, v: str) -> str:
        return check_machine_type(v)

    @property
    def capacity_order(self) -> tuple[str, ...]:
        """("spot", "flex-start"): the pools, in the order the ComputeClass tries them."""
        return tuple(self.capacity.split(","))

    @property
    def max_run_duration_seconds(self) -> int:
        return parse_duration(self.max_run_duration, name="gke.max_run_duration")


def gke_problems(
    *,
    zone: str,
    accelerator_type: str,
    gke: GkeConfig,
    allow_untested_flex_zone: bool,
    routing_gateway: bool,
) -> list[str]:
    """What GKE refuses, checked before any API call; each problem names key, value, reason, fix."""
    problems = []
    if gke.min_replicas > gke.max_replicas:
        problems.append(
            problem(
                "gke.min_replicas",
                gke.min_replicas,
                f"is above [gke] max_replicas = {gke.max_replicas}: the autoscaler could never "
                "satisfy both",
                f"raise max_replicas to at least {gke.min_replicas}, or lower min_replicas",
            )
        )
    problems += min_replicas_problems(gke, routing_gateway=routing_gateway)
    if accelerator_type != facts.ACCELERATOR_TYPE:
        problems.append(
            problem(
                "accelerator_type",
                accelerator_type,
                f"a GKE replica is one pod on one {facts.V5E.machine_type} node (one chip, "
                f"topology {facts.GKE_TPU_TOPOLOGY}); more chips per replica multiply KV memory "
                "for this one-KV-head model (build log)",
                f'use accelerator_type = "{facts.ACCELERATOR_TYPE}" and raise [gke] max_replicas',
            )
        )
    if zone not in facts.GKE_V5E_ZONES:
        problems.append(
            problem(
                "zone",
                zone,
                f"GKE has no v5e single-host TPU pools here ({facts.GKE_TPU_SOURCE})",
                "use one of " + ", ".join(facts.GKE_V5E_ZONES),
            )
        )
    order = gke.capacity_order
    if (
        "flex-start" in order
        and zone in facts.GKE_V5E_ZONES
        and zone not in facts.GKE_FLEX_START_V5E_ZONES
        and not allow_untested_flex_zone
    ):
        problems.append(
            problem(
                "gke.capacity",
                gke.capacity,
                "GKE flex-start for v5e is documented for "
                f"{', '.join(facts.GKE_FLEX_START_V5E_ZONES)} only, not {zone} "
                f"({facts.GKE_FLEX_START_SOURCE})",
                f'use capacity = "spot" in {zone}, or zone = '
                f'"{facts.GKE_FLEX_START_V5E_ZONES[0]}", or set allow_untested_flex_zone = true',
            )
        )
    version = version_tuple(gke.min_version)
    needs = [(facts.GKE_COMPUTE_CLASS_MIN_VERSION, "the ComputeClass that orders the pools")]
    if "flex-start" in order:
        needs.append((facts.GKE_FLEX_START_TPU_MIN_VERSION, "a flex-start TPU pool"))
    for minimum, what in needs:
        if version < version_tuple(minimum):
            problems.append(
                problem(
                    "gke.min_version",
                    gke.min_version,
                    f"{what} requires GKE {minimum} or later",
                    f'set min_version = "{minimum}" or later',
                )
            )
    return problems
