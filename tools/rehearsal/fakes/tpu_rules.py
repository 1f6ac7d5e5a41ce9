"""What the TPU API lets change on a running node, what such a change does not do, and how a
create is refused when the zone has no capacity or the quota is spent."""

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


# ---- deleting a queued resource (flex-start's destroy, and its idle stop: issue 39)

# queuedResources.delete, `force`: "If set to true, all running nodes belonging to this queued
# resource will be deleted first and then the queued resource will be deleted. Otherwise (i.e.
# force=false), the queued resource will only be deleted if its nodes have already been deleted
# or the queued resource is in the ACCEPTED, FAILED, or SUSPENDED state."
# (https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.queuedResources/delete,
# and the same words on v2alpha1's page, both stored.) WAITING_FOR_RESOURCES "replaced the
# ACCEPTED state" (tpu/docs/queued-resources, stored), so it counts as ACCEPTED. The status of
# the refusal is not on the page: the fake answers 400.
QR_DELETABLE_WITHOUT_FORCE = frozenset({"ACCEPTED", "WAITING_FOR_RESOURCES", "FAILED", "SUSPENDED"})
QR_DELETE_SOURCE = "tpu/docs/reference/rest/v2/projects.locations.queuedResources/delete, force"


def qr_delete_refusal(state: str, force: bool) -> str:
    """Why a queued resource in `state` may not be deleted without force; "" when it may."""
    if force or state in QR_DELETABLE_WITHOUT_FORCE:
        return ""
    return (
        f"queued resource is {state} and its node still runs: delete it with force=true, or "
        f"delete its node first ({QR_DELETE_SOURCE})"
    )


# ---- capacity: what a create is answered when the zone has no TPU free, or the quota is spent

# A stockout finishes the create's long-running operation with google.rpc.Code 8
# (RESOURCE_EXHAUSTED) and this text, the zone named: the provider relays it as "Error waiting for
# Creating Vm: Error code 8, message: There is no more capacity in the zone "us-central1-c"; you
# can try in another zone where Cloud TPU Nodes are offered (see
# https://cloud.google.com/tpu/docs/regions) [EID: 0x9171da80a38afc2]"
# (github.com/hashicorp/terraform-provider-google/issues/21243, google_tpu_v2_vm); Google's own
# diagnostic tool matches the same two phrases on tpu CreateNode failures (github.com/
# GoogleCloudPlatform/gcpdiag, lint rule "Cloud TPU resource availability").
STOCKOUT_CODE = 8
STOCKOUT_MESSAGE = (
    'There is no more capacity in the zone "{zone}"; you can try in another zone where Cloud TPU '
    "Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0x{eid:x}]"
)
# A spent quota is refused at the create call itself, HTTP 429 RESOURCE_EXHAUSTED ("If you
# exceeded a quota value with an HTTP/REST request, Google Cloud returns an HTTP 429 TOO MANY
# REQUESTS status code", cloud.google.com/docs/quotas/troubleshoot), worded as gcloud shows the
# TPU API's answer: "RESOURCE_EXHAUSTED: Quota limit '...' has been exceeded. Limit: 0,0 in
# region us-central1,zone us-central1-a". The quota's name per model is the TPU quota page's for
# v5e serving (cloud.google.com/tpu/docs/quota): on-demand and preemptible (spot) apart.
QUOTA_STATUS = 429
QUOTA_MESSAGE = "Quota limit '{quota}' has been exceeded. Limit: 0 in region {region}."
QUOTA_NAMES = {
    "on-demand": "tpu-v5s-litepod-serving",
    "spot": "tpu-v5s-litepod-serving-preemptible",
}


def provisioning_of(node: dict[str, Any]) -> str:
    """The provisioning model a node create asks for (TPU v2 Node.schedulingConfig: spot,
    preemptible; neither is on-demand)."""
    scheduling = node.get("schedulingConfig") or {}
    if scheduling.get("spot") or scheduling.get("preemptible"):
        return "spot"
    return "on-demand"


def capacity_refusal(
    node: dict[str, Any],
    zone: str,
    *,
    stockouts: set[tuple[str, str, str]],
    spent_quotas: set[tuple[str, str]],
    eid: int,
) -> tuple[str, int, str] | None:
    """How a node create in `zone` is refused, by rule: ("quota", http status, message) at the
    call, ("stockout", rpc code, message) in its operation, or None. `stockouts` holds (zone,
    accelerator type, provisioning) out of capacity; `spent_quotas` (region, provisioning)."""
    model = provisioning_of(node)
    region = zone.rsplit("-", 1)[0]
    if (region, model) in spent_quotas:
        quota = QUOTA_NAMES.get(model, model)
        return ("quota", QUOTA_STATUS, QUOTA_MESSAGE.format(quota=quota, region=region))
    if (zone, str(node.get("acceleratorType", "")), model) in stockouts:
        return ("stockout", STOCKOUT_CODE, STOCKOUT_MESSAGE.format(zone=zone, eid=eid))
    return None
