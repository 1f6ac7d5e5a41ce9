"""What the TPU API's queued-resource states mean, and how to read them out of its answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A QR in these states is on its way (or there): create leaves it alone and waits.
WAITING_STATES = frozenset(
    {"STATE_UNSPECIFIED", "CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING"}
)
# Flex-start run duration over, or capacity lost: the QR holds quota until deleted.
DEAD_STATES = frozenset({"SUSPENDED", "SUSPENDING", "FAILED"})

# One line of meaning per state, printed beside it while waiting.
STATE_NOTES = {
    "WAITING_FOR_RESOURCES": "queued, waiting for capacity (not an error)",
    "ACCEPTED": "accepted into the queue",
    "CREATING": "request received",
    "PROVISIONING": "capacity found, creating the TPU VM (billing starts; cannot be deleted now)",
    "ACTIVE": "TPU VM is up",
    "DELETING": "being deleted",
    "SUSPENDING": "run duration over or capacity lost; VM being deleted",
    "SUSPENDED": "run duration over or capacity lost; VM deleted, quota still held",
    "FAILED": "failed",
}


def state_of(qr: Mapping[str, Any]) -> str:
    """The state name of a QueuedResource as the API returns it."""
    state = qr.get("state") or {}
    value = state.get("state") if isinstance(state, Mapping) else None
    return str(value or "STATE_UNSPECIFIED")


def failure_reason(qr: Mapping[str, Any]) -> str:
    """Why a QueuedResource failed or was suspended, as far as the API says ("" if silent)."""
    state = qr.get("state") or {}
    if not isinstance(state, Mapping):
        return ""
    parts = []
    error = (state.get("failedData") or {}).get("error") or {}
    if error.get("message"):
        parts.append(str(error["message"]))
    if state.get("stateInitiator"):
        parts.append(f"initiated by {state['stateInitiator']}")
    return "; ".join(parts)


def node_ips(node: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(internal, external) IP of a TPU node's first endpoint."""
    endpoints = node.get("networkEndpoints") or []
    if not endpoints:
        return None, None
    first = endpoints[0]
    return first.get("ipAddress"), (first.get("accessConfig") or {}).get("externalIp")
