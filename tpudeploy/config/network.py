"""`[network]`, and which hosts vLLM may fetch media from."""

from __future__ import annotations

import ipaddress
import re

from pydantic import field_validator

from tpudeploy import names
from tpudeploy.config.base import Strict


class NetworkConfig(Strict):
    network: str = "default"
    """VPC network: a name, or projects/HOST/global/networks/NAME for a shared VPC"""
    subnetwork: str = ""
    """subnetwork name or shared-VPC path; empty: the network's default"""
    # Nothing is public unless the user says so: the vLLM port is opened only to these ranges.
    allowed_cidrs: tuple[str, ...] = ()
    """who may reach the vLLM port; nothing is open by default"""
    # 0.0.0.0/0 (or ::/0) exposes the model to the internet; it needs this explicit opt-in.
    allow_public_endpoint: bool = False
    """required to open the port to the whole internet"""
    enable_external_ip: bool = True
    """the build log reaches its node on a public IP"""

    @field_validator("allowed_cidrs", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return tuple(v) if isinstance(v, list) else v

    @field_validator("network")
    @classmethod
    def _network(cls, v: str) -> str:
        # These strings reach Terraform arguments: anything but GCE's grammar (a `${...}` say)
        # would be evaluated by Terraform, not passed to the API.
        if not (names.GCE_NAME_RE.fullmatch(v) or names.NETWORK_PATH_RE.fullmatch(v)):
            raise ValueError(
                "not a VPC network; write its name (1-63 lowercase letters, digits and '-', "
                'starting with a letter), e.g. "default", or for a shared VPC '
                '"projects/HOST_PROJECT/global/networks/NAME"'
            )
        return v

    @field_validator("subnetwork")
    @classmethod
    def _subnetwork(cls, v: str) -> str:
        if v and not (names.GCE_NAME_RE.fullmatch(v) or names.SUBNETWORK_PATH_RE.fullmatch(v)):
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
