"""What the TPU API lets change on a running node, and what such a change does not do."""

from __future__ import annotations

import json
from typing import Any

# What nodes.patch may change (TPU v2 REST reference, projects.locations.nodes.patch, updateMask:
# "Supported fields: [description, tags, labels, metadata, networkConfig.enable_external_ips]");
# any other mask is refused.
PATCHABLE = frozenset(
    {"description", "tags", "labels", "metadata", "networkConfig.enable_external_ips"}
)
# A patch changes the stored node only. The guest agent runs the startup script at boot (Compute
# Engine, "About startup scripts": they run on every boot), so a new script reaches a running
# node at its next boot, never at the patch: the fake counts boots at create, never at a patch.
PATCH_REBOOTS = False


def apply_patch(node: dict[str, Any], update_mask: str, body: Any) -> str:
    """Apply a nodes.patch to the stored `node`; the refusal's message, or "" when applied."""
    mask = [f for f in update_mask.split(",") if f]
    refused = sorted(set(mask) - PATCHABLE) if mask else ["(empty)"]
    if refused or not isinstance(body, dict):
        return f"updateMask {refused} is not in {sorted(PATCHABLE)}"
    for field_name in mask:
        if field_name == "networkConfig.enable_external_ips":
            config = node.setdefault("networkConfig", {})
            config["enableExternalIps"] = bool(
                (body.get("networkConfig") or {}).get("enableExternalIps")
            )
        else:
            node[field_name] = json.loads(json.dumps(body.get(field_name)))
    return ""
