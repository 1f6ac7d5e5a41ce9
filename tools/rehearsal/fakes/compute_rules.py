"""What Compute Engine refuses of Cloud NAT gateways and subnets, as Google documents it, kept as
data with sources (the compute fake, tools/rehearsal/fakes/compute.py, enforces each)."""

from __future__ import annotations

import ipaddress

# RouterNat.sourceSubnetworkIpRangesToNat: "Note that if this field contains
# ALL_SUBNETWORKS_ALL_IP_RANGES or ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES, then there should not
# be any other Router.Nat section in any Router for this network in this region."
# (Compute Engine API reference, RouterNat; cloud.google.com/compute/docs/reference/rest/v1/
# routers, read through the client libraries' copy of the same text in the stored corpus.)
ALL_SUBNETWORKS = frozenset(
    {"ALL_SUBNETWORKS_ALL_IP_RANGES", "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES"}
)
NAT_ALL_SOURCE = "cloud.google.com/compute/docs/reference/rest/v1/routers (RouterNat)"
# Two gateways for the same subnetwork: a subnet's range is served by one NAT gateway ("You
# configure Cloud NAT by creating a Cloud NAT gateway in the region of the subnets that require
# NAT. The gateway then serves each subnet that" it is configured for, Cloud NAT overview). The
# sentence that forbids a second gateway for the same subnet range was not found in the stored
# corpus: the rule rests on the reading (Compute refuses a NAT listing a subnetwork
# another NAT of the network and region already lists).
NAT_SUBNET_SOURCE = "cloud.google.com/nat/docs/overview (the issue's reading; see above)"

# "Auto mode VPC networks [...] create a subnet for each region automatically across the
# 10.128.0.0/9 address range" (autoCreateSubnetworks, provider and API references), and the VPC
# page's "Subnet creation mode": in an auto mode network, subnets you add manually must use
# ranges outside 10.128.0.0/9 (cloud.google.com/vpc/docs/vpc#subnet-ranges, auto mode IP
# ranges; that page itself was not found in the stored corpus: the rule rests on the API
# reference's range and the reading).
AUTO_MODE_RANGE = ipaddress.IPv4Network("10.128.0.0/9")
AUTO_MODE_SOURCE = "cloud.google.com/vpc/docs/vpc#subnet-ranges (auto mode IP ranges: 10.128.0.0/9)"
# A subnet's primary range "must not overlap with other subnets' primary and secondary ranges
# in the same VPC network" (VPC, "Subnets": valid IPv4 ranges; the issue's reading, the page not
# in the stored corpus).
SUBNET_OVERLAP_SOURCE = "cloud.google.com/vpc/docs/subnets#valid-ranges"


def short(link: str) -> str:
    """`.../networks/default` or `default` -> `default`."""
    return str(link).rstrip("/").rsplit("/", 1)[-1]


def nat_refusal(nat: dict[str, object], others: list[dict[str, object]]) -> str:
    """Why Compute refuses `nat` beside the other NATs of its network and region, or ""."""
    mode = nat.get("sourceSubnetworkIpRangesToNat")
    name = nat.get("name")
    if mode in ALL_SUBNETWORKS and others:
        return (
            f"NAT {name}: {mode} serves every subnetwork, and the network already has NAT "
            f"{others[0].get('name')} in this region ({NAT_ALL_SOURCE})"
        )
    for other in others:
        if other.get("sourceSubnetworkIpRangesToNat") in ALL_SUBNETWORKS:
            return (
                f"NAT {name}: NAT {other.get('name')} already serves every subnetwork of this "
                f"network in this region ({NAT_ALL_SOURCE})"
            )
    mine = {short(str(s.get("name", ""))) for s in _subnets(nat)}
    for other in others:
        shared = mine & {short(str(s.get("name", ""))) for s in _subnets(other)}
        if shared:
            return (
                f"NAT {name}: subnetwork {sorted(shared)[0]} is already served by NAT "
                f"{other.get('name')} ({NAT_SUBNET_SOURCE})"
            )
    return ""


def _subnets(nat: dict[str, object]) -> list[dict[str, object]]:
    found = nat.get("subnetworks")
    return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []


def subnet_refusal(cidr: str, *, auto_mode: bool, taken: dict[str, str]) -> str:
    """Why subnetworks.insert refuses `cidr` on a network (auto mode or not) whose other subnets
    hold `taken` (name -> range), or ""."""
    try:
        net = ipaddress.IPv4Network(cidr, strict=True)
    except ValueError:
        return f"Invalid value for field 'resource.ipCidrRange': '{cidr}'."
    if auto_mode and net.overlaps(AUTO_MODE_RANGE):
        return (
            f"Invalid IPCidrRange: {cidr} conflicts with the auto mode network's subnets in "
            f"{AUTO_MODE_RANGE} ({AUTO_MODE_SOURCE})"
        )
    for name, other in taken.items():
        if net.overlaps(ipaddress.IPv4Network(other, strict=False)):
            return (
                f"Invalid IPCidrRange: {cidr} conflicts with existing subnetwork '{name}' "
                f"({other}) ({SUBNET_OVERLAP_SOURCE})"
            )
    return ""
