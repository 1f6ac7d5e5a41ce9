"""What a GKE deployment takes of its VPC: the control plane's private /28, and the checks that
keep it, and the proxy-only subnet, clear of the ranges the network already uses.

Two deployments of one VPC must not share a control-plane range: GKE's PrivateClusterConfig
.masterIpv4CidrBlock "must not overlap with any other ranges in use within the cluster's
network" (REST reference). Each deployment gets a /28 of 172.16.0.0/16 derived from its name
unless [gke] control_plane_cidr names one.
"""

from __future__ import annotations

import hashlib
import ipaddress

from tpudeploy.config import DeployConfig
from tpudeploy.config.routing_table import PROXY_SUBNET_EXAMPLE
from tpudeploy.planner import Finding

# An auto mode network's own subnets (VPC, "Auto mode IP ranges"): every region's lies here.
AUTO_MODE_RANGE = ipaddress.IPv4Network("10.128.0.0/9")
# Where derived control-plane ranges come from: RFC 1918, outside the auto mode range, and not
# 172.17.0.0/16 (the Docker bridge's default, which GKE's private-cluster page says the control
# plane cannot use: remembered, that page is not in the stored corpus; make check only warns).
# 4,096 /28s: two names collide with odds of 1 in 4,096.
DERIVED_FROM = ipaddress.IPv4Network("172.16.0.0/16")
PREFIX = 28
_RESERVED = (ipaddress.IPv4Network("172.17.0.0/16"),)


def derived_control_plane_cidr(name: str) -> str:
    """A /28 of DERIVED_FROM chosen by the deployment's name: the same name, the same range."""
    count = 2 ** (PREFIX - DERIVED_FROM.prefixlen)
    index = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % count
    address = DERIVED_FROM.network_address + index * 2 ** (32 - PREFIX)
    return str(ipaddress.IPv4Network(f"{address}/{PREFIX}"))


def control_plane_cidr(cfg: DeployConfig) -> str:
    """[gke] control_plane_cidr, or the range derived from the deployment's name."""
    return cfg.gke.control_plane_cidr or derived_control_plane_cidr(cfg.name)


def findings(cfg: DeployConfig) -> list[Finding]:
    """The control plane's range against the network's other ranges the config knows: the auto
    mode subnets, Docker's bridge, the proxy-only subnet this deployment declares."""
    out: list[Finding] = []
    key = "gke.control_plane_cidr"
    cidr = ipaddress.IPv4Network(control_plane_cidr(cfg))
    shown = cfg.gke.control_plane_cidr or f"{cidr} (derived from the name)"
    fix = f'set [gke] control_plane_cidr to a free /28, e.g. "{_free_example(cfg)}"'
    if cfg.network.auto_mode and cidr.overlaps(AUTO_MODE_RANGE):
        why = (
            f"overlaps {AUTO_MODE_RANGE}, which the auto mode network {cfg.network.network} "
            "keeps for its subnets (GKE refuses a control-plane range in use in the network); "
        )
        out.append(Finding("error", key, shown, why + fix))
    for reserved in _RESERVED:
        if cidr.overlaps(reserved):
            # A warning, not a refusal: the rule is remembered from GKE's private-cluster page,
            # which the stored corpus does not hold.
            why = (
                f"overlaps {reserved}, Docker's default bridge, which GKE's private-cluster page "
                "(as remembered, not re-read) says the control plane cannot use; "
            )
            out.append(Finding("warning", key, shown, why + fix))
    proxy = cfg.routing.proxy_subnet_cidr
    if proxy and cidr.overlaps(ipaddress.IPv4Network(proxy)):
        why = f"overlaps [routing] proxy_subnet_cidr = {proxy}: ranges of one network may not; "
        out.append(Finding("error", key, shown, why + fix))
    if proxy and cfg.network.auto_mode and ipaddress.IPv4Network(proxy).overlaps(AUTO_MODE_RANGE):
        why = (
            f"overlaps {AUTO_MODE_RANGE}: on the auto mode network {cfg.network.network} a "
            'subnet added by hand must lie outside it (VPC, "Subnet creation mode"), and '
            f'Compute refuses the insert; use e.g. "{PROXY_SUBNET_EXAMPLE}", or set [network] '
            'subnet_mode = "custom" if the network is a custom mode one'
        )
        out.append(Finding("error", "routing.proxy_subnet_cidr", proxy, why))
    if cfg.network.nat and "/" in cfg.network.network:
        why = (
            "a shared VPC's routers and NATs belong to its host project, which this stack does "
            "not manage; set [network] nat = false and have the host project's NAT serve the "
            "cluster's subnetwork"
        )
        out.append(Finding("error", "network.nat", True, why))
    if not cfg.network.nat:
        why = (
            f"the cluster's nodes are private: they pull the image and the weights only through "
            f"a Cloud NAT you provide for subnetwork {cfg.nat_subnetwork} in "
            f"{cfg.effective_region} (one NAT per subnetwork: another deployment's on the same "
            "subnetwork serves this one too, and destroying that deployment cuts this one's egress)"
        )
        out.append(Finding("note", "network.nat", False, why))
    return out


def _free_example(cfg: DeployConfig) -> str:
    """A /28 of DERIVED_FROM clear of the proxy-only subnet and the reserved ranges: the name's
    own derived range when it is."""
    taken = [ipaddress.IPv4Network(p) for p in (cfg.routing.proxy_subnet_cidr,) if p]
    derived = ipaddress.IPv4Network(derived_control_plane_cidr(cfg.name))
    if not any(derived.overlaps(t) for t in [*taken, *_RESERVED]):
        return str(derived)  # what leaving the key out gives
    for candidate in DERIVED_FROM.subnets(new_prefix=PREFIX):
        if candidate.network_address.packed[-1] == 0:
            continue  # the /16's .0 blocks are the first anyone picks by hand
        if not any(candidate.overlaps(t) for t in [*taken, *_RESERVED]):
            return str(candidate)
    return derived_control_plane_cidr(cfg.name)
