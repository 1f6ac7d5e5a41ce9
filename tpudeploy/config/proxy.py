"""`[proxy]`: the TLS proxy in front of vLLM on the node."""

from __future__ import annotations

from pydantic import Field, field_validator

from tpudeploy.config.base import Strict
from tpudeploy.config.containers import check_container_name, check_image


class ProxyConfig(Strict):
    """The TLS proxy in front of vLLM: the node's only open port (templates/nginx.conf.j2)."""

    # nginx from its official image, pinned by tag. Pin by digest too by writing
    # "nginx:1.30.5@sha256:<index digest>" (docker pulls by the digest, the tag is then a label).
    image: str = "nginx:1.30.5"
    """official nginx image pinned by tag; append @sha256:<index digest> to pin the digest"""
    container_name: str = "tpudeploy-proxy"
    """docker container name on the node"""
    port: int = Field(default=8443, ge=1024, le=65535)
    """the TLS port: the only one the firewall may open (to [network] allowed_cidrs)"""

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        return check_image(v)

    @field_validator("container_name")
    @classmethod
    def _container(cls, v: str) -> str:
        return check_container_name(v)
