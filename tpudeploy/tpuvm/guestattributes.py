"""The TPU VM's guest attributes: what the node's startup script publishes in the tpudeploy/
namespace (boot phase, build record, boot check, certificate), read through the TPU API."""

from __future__ import annotations

from tpudeploy.config import DeployConfig
from tpudeploy.config.idle_table import INTERVAL_S
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
    return build_lines(values) + check_lines(values) + idle_lines(cfg, values)


def idle_lines(cfg: DeployConfig, values: dict[str, str], now: float | None = None) -> list[str]:
    """What the idle stop's watcher last published (tpudeploy/node/idlewatch.py), as
    "idle for 12 min, stops at 30"; nothing when [idle] is off."""
    import json
    import time

    limit = cfg.idle.seconds
    if limit is None:
        return []
    text = values.get("idle")
    if not text:
        return [
            f"idle stop: after {limit // 60} min with no request; not watching yet (it starts "
            "when the node is ready)"
        ]
    try:
        seen = json.loads(text)
        state, idle_s, at = str(seen["state"]), int(seen["idle_s"]), float(seen["at"])
    except (ValueError, KeyError, TypeError):
        return [f"idle stop: the node's tpudeploy/idle attribute is not the watcher's: {text}"]
    age = (now if now is not None else time.time()) - at
    # The watcher publishes every interval; an older value means it stopped publishing.
    late = age > 5 * INTERVAL_S
    stale = f" (as of {age / 60:.0f} min ago: the watcher stopped reporting)" if late else ""
    stops = f"stops at {limit // 60}"
    if state in ("idle", "stop"):
        line = f"idle for {idle_s // 60} min, {stops}"
    elif state == "stopping":
        gone = "its queued resource" if cfg.flex_start_node else "itself"
        line = f"idle for {idle_s // 60} min: the node deleted {gone} (idle stop)"
    elif state == "busy":
        line = f"serving: a request ran since the last reading; idle stop after {limit // 60} min"
    else:
        line = (
            "idle stop: vLLM's counters were unreadable at the last reading, and an unread "
            f"counter never counts as idle: it stops after {limit // 60} min of idleness it read"
        )
    return [line + stale]
