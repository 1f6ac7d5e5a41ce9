"""`[routing]`: the GKE Gateway and the endpoint picker in front of the replicas (issue 26)."""

from __future__ import annotations

import re

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
# Certificate Manager certificate ids: lowercase letters, digits, hyphens, at most 63.
_CERT_RE = re.compile(names.GCE_NAME)


class RoutingConfig(Strict):
    """Inference-aware routing on GKE: a Gateway, an InferencePool and its endpoint picker."""

    gateway: bool = False
    """route through a GKE Gateway and the endpoint picker (platform = "gke"); off: the Service"""
    certificate: str = ""
    """the Gateway's TLS: a regional Certificate Manager certificate in the deployment's region"""
    picker_image: str = PICKER_IMAGE
    """the endpoint picker's image, pinned by digest (a tag alone is refused at deploy)"""

    @field_validator("certificate")
    @classmethod
    def _certificate(cls, v: str) -> str:
        if v and not _CERT_RE.fullmatch(v):
            raise ValueError(
                "not a Certificate Manager certificate id; write its short name, e.g. "
                '"gemma4-gateway" (lowercase letters, digits and hyphens)'
            )
        return v

    @field_validator("picker_image")
    @classmethod
    def _picker_image(cls, v: str) -> str:
        return check_image(v)
