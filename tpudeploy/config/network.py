"""`[network]`, how much of the internet it opens, and which hosts vLLM may fetch media from."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator

from tpudeploy import names
from tpudeploy.config.base import Strict
from tpudeploy.config.checks import as_tuple


class NetworkConfig(Strict):
    network: str = "default"
    """VPC network: a name, or projects/HOST/global/networks/NAME for a shared VPC"""
    subnetwork: str = ""
    """subnetwork name or shared-VPC path; empty: the network's default"""
    # Nothing is reachable unless the user says so: the TLS proxy's port is opened only to these
    # ranges (a deny-all rule under them closes everything else, default-network rules included).
    allowed_cidrs: tuple[str, ...] = Field(default=(), examples=[["203.0.113.7/32"]])
    """who may reach the TLS proxy's port; nobody by default (use `make tunnel`)"""
    # More than a /16 of public addresses exposes the model to the internet; it needs this opt-in.
    allow_public_endpoint: bool = False
    """required when the ranges hold more than a /16 of public IPv4 (or a /48 of IPv6)"""
    enable_external_ip: bool = True
    """the build log reaches its node on a public IP"""
    # Without an external address the node reaches Google APIs only (Private Google Access):
    # `docker pull` from Docker Hub and the Hugging Face download need a Cloud NAT.
    nat: bool = True
    """private node: a Cloud Router and NAT for its subnetwork (false: you provide egress)"""
    # An auto mode network (every new project's "default") holds 10.128.0.0/9 for its own
    # subnets; a subnet added by hand must lie outside it (VPC docs, "Subnet creation mode").
    subnet_mode: Literal["", "auto", "custom"] = ""
    """the network's subnet creation mode; empty: "auto" for "default", "custom" otherwise"""

    @property
    def auto_mode(self) -> bool:
        """Whether the network reserves 10.128.0.0/9 for its automatic subnets."""
        return self.subnet_mode == "auto" or (not self.subnet_mode and self.network == "default")

    @field_validator("allowed_cidrs", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return as_tuple(v)

    @field_validator("network")
    @classmethod
    def _network(cls, v: str) -> str:
        return check_network(v)

    @field_validator("subnetwork")
    @classmethod
    def _subnetwork(cls, v: str) -> str:
        return check_subnetwork(v)

    @field_validator("allowed_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_cidrs(v)


def check_network(v: str) -> str:
    # These strings reach Terraform arguments: anything but GCE's grammar (a `${...}` say) would
    # be evaluated by Terraform, not passed to the API.
    if not (names.GCE_NAME_RE.fullmatch(v) or names.NETWORK_PATH_RE.fullmatch(v)):
        raise ValueError(
            "not a VPC network; write its name (1-63 lowercase letters, digits and '-', "
            'starting with a letter), e.g. "default", or for a shared VPC '
            '"projects/HOST_PROJECT/global/networks/NAME"'
        )
    return v


def check_subnetwork(v: str) -> str:
    if v and not (names.GCE_NAME_RE.fullmatch(v) or names.SUBNETWORK_PATH_RE.fullmatch(v)):
        raise ValueError(
            "not a subnetwork; write its name (lowercase letters, digits and '-', starting "
            'with a letter), "projects/HOST_PROJECT/regions/REGION/subnetworks/NAME" for a '
            "shared VPC, or leave it out for the network's default"
        )
    return v


def check_cidrs(v: tuple[str, ...]) -> tuple[str, ...]:
    for cidr in v:
        try:
            ipaddress.ip_network(cidr, strict=True)
        except ValueError as exc:
            raise ValueError(
                f"{cidr!r} is not a valid CIDR range ({exc}); write it like 203.0.113.0/24 "
                "with the host bits zero, or 203.0.113.7/32 for one address"
            ) from None
    return v


# Ranges that are not the internet: VPC-internal (RFC 1918, shared address space, ULA) and the
# host's own. Listing them opens the port to the VPC, not to the world.
_NON_PUBLIC_RANGES = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
    )
)
# How much public address space [network] allowed_cidrs may open without allow_public_endpoint:
# a /16 of IPv4 (an organisation's egress ranges fit) or a /48 of IPv6 (one site). Counted over
# the union of the ranges, so 0.0.0.0/1 + 128.0.0.0/1 is the whole IPv4 internet, like 0.0.0.0/0.
PUBLIC_ADDRESS_LIMIT = {4: 2**16, 6: 2**80}


def public_addresses(cidrs: tuple[str, ...]) -> dict[int, int]:
    """How many public (internet-routable) addresses the ranges cover, per IP version."""
    nets = [ipaddress.ip_network(c) for c in cidrs]
    v4 = ipaddress.collapse_addresses(n for n in nets if isinstance(n, ipaddress.IPv4Network))
    v6 = ipaddress.collapse_addresses(n for n in nets if isinstance(n, ipaddress.IPv6Network))
    return {4: _public_count(list(v4)), 6: _public_count(list(v6))}


def _public_count(union: list[ipaddress.IPv4Network] | list[ipaddress.IPv6Network]) -> int:
    total = sum(n.num_addresses for n in union)
    for net in union:
        for private in _NON_PUBLIC_RANGES:
            # Collapsed ranges never overlap each other, and two CIDR blocks either nest or are
            # disjoint: the overlap is the smaller block, or nothing.
            if net.version == private.version and net.overlaps(private):
                total -= min(net.num_addresses, private.num_addresses)
    return total


MEDIA_URLS_DISABLED = "media-urls-disabled.invalid"
_LOCAL_NAMES = frozenset({"metadata", "metadata.google.internal", "localhost"})
_LOCAL_SUFFIXES = (".internal", ".localhost", ".local")
_LABEL_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# A URL parser (WHATWG, and vLLM's fetchers after it) reads a host whose last label is a number
# as an IPv4 address: 2852039166, 0xa9fea9fe, 0251.0376.0251.0376 and 127.1 all name an address.
_NUMERIC_LABEL_RE = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_TLD_RE = re.compile(r"^([a-z]{2,63}|xn--[a-z0-9-]{1,59})$")


def media_domain_problem(host: str) -> str:
    """Why `host` must not be an allowed media domain (a reason without "; ": the caller adds the
    fix), or "" when it may be: a DNS name of at
    least two labels ending in a real top-level domain. Addresses in any spelling are refused:
    vLLM runs with --net=host, so an address can reach the node or the metadata server."""
    name = host.lower().removesuffix(".")
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        pass
    else:
        return (
            "is an IP address, and media hosts must be DNS names (with --net=host an address "
            "reaches whatever it names, the metadata server at 169.254.169.254 included)"
        )
    labels = name.split(".")
    if _NUMERIC_LABEL_RE.match(labels[-1]):
        return (
            "is a numeric or shorthand IP address (a URL parser reads 2852039166, 0xa9fea9fe and "
            "127.1 as IPv4), and media hosts must be DNS names"
        )
    if name in _LOCAL_NAMES or name.endswith(_LOCAL_SUFFIXES):
        return (
            "reaches the node itself or the metadata server, which hands out the node's credentials"
        )
    if len(name) > 253 or not all(_LABEL_RE.match(label) for label in labels):
        return "is not a host name (write the host only, e.g. upload.wikimedia.org, no scheme)"
    if len(labels) < 2 or not _TLD_RE.match(labels[-1]):
        return (
            "is not a fully qualified DNS name like upload.wikimedia.org (a single label resolves "
            "through the node's search domains, metadata.google.internal among them)"
        )
    return ""


def check_media_domains(v: tuple[str, ...]) -> tuple[str, ...]:
    """[vllm] allowed_media_domains: never empty (vLLM's "every host"), DNS names only."""
    if not v:
        raise ValueError(
            "an empty list lets vLLM fetch media from every host, including the metadata "
            f"server; list the hosts you trust, or keep [{MEDIA_URLS_DISABLED!r}] to allow "
            "inline data: URLs only"
        )
    for host in v:
        problem = media_domain_problem(host)
        if problem:
            raise ValueError(f"{host!r} {problem}; remove it (inline data: URLs need no domain)")
    return v
