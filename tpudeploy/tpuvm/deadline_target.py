"""What the TPU VM's deadline job deletes: the node, through the TPU API (tpudeploy.deadline
holds the deadline's lifecycle, shared with GKE)."""

from __future__ import annotations

from tpudeploy import names

# The deadline job's identity (spot, on-demand): it calls the TPU API's nodes.delete, whose only
# required permission is tpu.nodes.delete (TPU REST reference, projects.locations.nodes.delete);
# Cloud Scheduler does not poll the operation the delete returns, so no get is needed either.
STOP_PERMISSIONS = ("tpu.nodes.delete",)
# In the stop account's and role's descriptions: what the job deletes, one and many.
STOP_NOUNS = ("TPU node", "TPU nodes")

# The node's TPU API (v2, GA) delete; the body must be empty.
TPU_API = names.TPU_API


def node_url(project: str, zone: str, node_id: str) -> str:
    return f"{TPU_API}/projects/{project}/locations/{zone}/nodes/{node_id}"
