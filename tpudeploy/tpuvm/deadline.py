"""What the TPU VM's deadline job deletes: the node, through the TPU API (tpudeploy.deadline
holds the deadline's lifecycle, shared with GKE)."""

from __future__ import annotations

# The node's TPU API (v2, GA) delete; the body must be empty.
TPU_API = "https://tpu.googleapis.com/v2"


def node_url(project: str, zone: str, node_id: str) -> str:
    return f"{TPU_API}/projects/{project}/locations/{zone}/nodes/{node_id}"
