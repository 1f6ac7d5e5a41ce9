"""`[proxy]`: the TLS proxy in front of vLLM on the node."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from tpudeploy import facts
from tpudeploy.config.base import Strict
from tpudeploy.config.containers import check_container_name, check_image


class ProxyConfig(Strict):
    """The TLS proxy in front of vLLM: the node's only open port (templates/nginx.conf.j2)."""

    # nginx from its official image, pinned by a version tag (tpudeploy.facts.PROXY_IMAGE). Pin
    # by digest too by appending "@sha256:<index digest>" (docker pulls by the digest). The boot
    # checks that the running nginx is the tag's version.
    image: str = facts.PROXY_IMAGE
    """official nginx image pinned by a version tag; append @sha256:<index digest> for the digest"""
    container_name: str = "tpudeploy-proxy"
    """docker container name on the node"""
    port: int = Field(default=8443, ge=1024, le=65535)
    """the TLS port: the only one the firewall may open (to [network] allowed_cidrs)"""

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        check_image(v)
        if not nginx_version(v):
            raise ValueError(
                "the proxy image must carry an nginx version tag (the node checks that the "
                f"running nginx is that version); write e.g. {facts.PROXY_IMAGE!r}, optionally "
                "with @sha256:<index digest>"
            )
        return v

    @property
    def nginx_version(self) -> str:
        """The version the image's tag pins: what `nginx -v` must say on the node."""
        return nginx_version(self.image)

    @field_validator("container_name")
    @classmethod
    def _container(cls, v: str) -> str:
        return check_container_name(v)


# A version tag of the official image: "1.30.4", "1.30.4-alpine", "1.30.4-perl".
_VERSION_TAG = re.compile(r":(?P<version>\d+\.\d+\.\d+)(?:-[a-z0-9-]+)?(?:@sha256:[0-9a-f]{64})?$")


def nginx_version(image: str) -> str:
    match = _VERSION_TAG.search(image)
    return match["version"] if match else ""
