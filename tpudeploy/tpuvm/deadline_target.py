"""What the TPU VM's deadline job deletes: the node, through the TPU API (tpudeploy.deadline
holds the deadline's lifecycle, shared with GKE)."""

from __future__ import annotations

from tpudeploy import names
from tpudeploy.config import DeployConfig

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


# A flex-start node's idle stop (issue 39, [idle] stop_after) deletes its queued resource, which
# takes its node with it: queuedResources.delete with force=true ("all running nodes belonging
# to this queued resource will be deleted first and then the queued resource will be deleted",
# tpu/docs/reference/rest/v2/projects.locations.queuedResources/delete, stored). Deleting the
# node alone would leave the queued resource: the permission its delete needs is the one the
# deploy role already holds for flex-start's destroy (tpudeploy/tpuvm/pipeline.py); the page's
# IAM section is not in the stored copy. No predefined role found in the stored pages lists it
# (Cloud TPU's roles page, as stored, shows roles/tpu.admin's tpu.* without queuedResources), so
# the deployment's own stop role carries it, as it carries tpu.nodes.delete.
QR_STOP_PERMISSIONS = ("tpu.queuedResources.delete",)


def qr_url(project: str, zone: str, qr_id: str) -> str:
    """The queued resource's delete, its node first (force=true): the TPU API v2, GA."""
    return f"{TPU_API}/projects/{project}/locations/{zone}/queuedResources/{qr_id}?force=true"


def stop_role_permissions(cfg: DeployConfig) -> tuple[str, ...]:
    """The deployment's stop role (stacks/secrets.py), for the provisioning models its rungs
    use: nodes.delete for the deadline job of a spot or on-demand rung (and its idle stop),
    queuedResources.delete for the idle stop of a flex-start rung. Every rung's, so the role,
    which lives in the long-lived secrets stack, holds what any rung the ladder moves to needs."""
    provisionings = {rung.provisioning for rung in cfg.capacity} or {cfg.provisioning}
    idle = cfg.idle.seconds is not None
    permissions: tuple[str, ...] = ()
    if provisionings - {"flex-start"}:
        permissions += STOP_PERMISSIONS
    if idle and "flex-start" in provisionings:
        permissions += QR_STOP_PERMISSIONS
    return permissions


def needs_stop_role(cfg: DeployConfig) -> bool:
    """Whether the running rung uses the stop role: a deadline job (spot, on-demand), or a
    flex-start node's idle stop (which has no deadline job: its run ends at max_run_duration)."""
    return cfg.deadline_seconds is not None or (
        cfg.flex_start_node and cfg.idle.seconds is not None
    )
