"""`[routing]`: the GKE Gateway and the endpoint picker in front of the replicas (issue 26)."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import field_validator

from tpudeploy import names
from tpudeploy.config.base import Strict
from tpudeploy.config.containers import check_image

# The endpoint picker of kubernetes-sigs/gateway-api-inference-extension v1.5.0. The digest is
# read from a third-party repository's pin of that release (not checked against
# registry.k8s.io from here: no registry but the package ones is reachable); a wrong digest
# fails the pull, it cannot run another image.
PICKER_IMAGE = (
    "registry.k8s.io/gateway-api-inference-extension/epp:v1.5.0"
    "@sha256:86c679b057298e68c6e65ff5603e92066d432e77b11f1f81f0a06399694810bc"
)
# A proxy-only subnet needs at least 64 addresses: a /26 or a shorter prefix
# (cloud.google.com/load-balancing/docs/proxy-only-subnets, "Plan the size of your proxy-only
# subnet"); Google's examples use a /23.
PROXY_SUBNET_MAX_PREFIX = 26
# The range the messages suggest: outside 10.128.0.0/9, which an auto mode network (the
# "default" of every project) keeps for its own subnets, and outside the /16 the control planes'
# ranges are derived from (tpudeploy.gke.vpc).
PROXY_SUBNET_EXAMPLE = "10.126.0.0/23"
# Certificate Manager certificate ids: lowercase letters, digits, hyphens, at most 63.
_CERT_RE = re.compile(names.GCE_NAME)


class RoutingConfig(Strict):
    """Inference-aware routing on GKE: a Gateway, an InferencePool and its endpoint picker."""

    gateway: bool = False
    """route through a GKE Gateway and the endpoint picker (platform = "gke"); off: the Service"""
    certificate: str = ""
    """the Gateway's TLS: a regional Certificate Manager certificate in the deployment's region"""
    proxy_subnet_cidr: str = ""
    """a free IPv4 range (/26 or larger) for the region's proxy-only subnet, which this declares"""
    proxy_subnet_exists: bool = False
    """the VPC already has the region's active proxy-only subnet (one is allowed per region)"""
    picker_image: str = PICKER_IMAGE
    """the endpoint picker's image, pinned by digest (a tag alone is refused at deploy)"""
    scoring: Literal["inference-aware", "random"] = "inference-aware"
    """how the picker chooses a replica: on queue, KV use and prefix affinity, or at random (the
    plain-balancing baseline that `make bench ROUTE=gateway` compares it with)"""

    @field_validator("certificate")
    @classmethod
    def _certificate(cls, v: str) -> str:
        if v and not _CERT_RE.fullmatch(v):
            raise ValueError(
                "not a Certificate Manager certificate id; write its short name, e.g. "
                '"gemma4-gateway" (lowercase letters, digits and hyphens)'
            )
        return v

    @field_validator("proxy_subnet_cidr")
    @classmethod
    def _proxy_subnet(cls, v: str) -> str:
        if not v:
            return v
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError:
            raise ValueError(
                f'not an IPv4 network in CIDR form; write e.g. "{PROXY_SUBNET_EXAMPLE}" (a '
                "range no other subnet of the VPC uses, outside 10.128.0.0/9 on an auto mode "
                "network)"
            ) from None
        if net.prefixlen > PROXY_SUBNET_MAX_PREFIX:
            raise ValueError(
                f"a proxy-only subnet needs at least 64 addresses (a /{PROXY_SUBNET_MAX_PREFIX} or "
                f'larger); write e.g. "{net.supernet(new_prefix=23)}"'
            )
        return v

    @field_validator("picker_image")
    @classmethod
    def _picker_image(cls, v: str) -> str:
        return check_image(v)
