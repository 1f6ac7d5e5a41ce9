"""The TPU VM's guest attributes: what the node's startup script publishes in the tpudeploy/
namespace (boot phase, build record, boot check, certificate), read through the TPU API."""

from __future__ import annotations

from tpudeploy.config import DeployConfig
from tpudeploy.nodebuild import build_lines, check_lines
from tpudeploy.terminal import printable
from tpudeploy.tpuvm.queued_resource import ApiError, TpuApi

NAMESPACE = "tpudeploy"


def node_name(cfg: DeployConfig, project: str) -> str:
    return f"projects/{project}/locations/{cfg.zone}/nodes/{cfg.node_id}"


def read_attributes(api: TpuApi, name: str) -> dict[str, str] | None:
    """The node's guest attributes in the tpudeploy/ namespace; None before the first one."""
    response = api.get_guest_attributes(name, f"{NAMESPACE}/")
    if response is None:
        return None
    values: dict[str, str] = {}
    for attributes in response.get("guestAttributes") or []:
        for item in (attributes.get("queryValue") or {}).get("items") or []:
            if item.get("namespace") == NAMESPACE and "key" in item:
                # The node writes these (and so can whoever holds its account): every reader
                # prints them, so no escape sequence or control character gets through.
                values[printable(item["key"])] = printable(item.get("value", ""))
    return values


def node_attributes(cfg: DeployConfig, project: str, api: TpuApi) -> dict[str, str]:
    """The node's tpudeploy/ guest attributes; {} before the first one."""
    return read_attributes(api, node_name(cfg, project)) or {}


def status_lines(cfg: DeployConfig, project: str, *, api: TpuApi | None = None) -> list[str]:
    """`make status`: the build the node serves and its boot check, every finding."""
    try:
        values = node_attributes(cfg, project, api or TpuApi(log=None))
    except ApiError as exc:
        return [f"build: could not read the node's guest attributes: {exc.api_message}"]
    return build_lines(values) + check_lines(values)
