"""Which failed deploys the capacity ladder answers with the next rung: the TPU API's documented
capacity (stockout) and quota errors, as data with their sources; every other error stops.

The text judged is what `cdktf deploy` printed: Terraform's error lines carry the TPU API's
message as the provider relays it ("Error waiting for Creating Vm: Error code 8, message: There
is no more capacity in the zone ..."), and a flex-start rung's queued-resource wait prints its own
last line (tpudeploy/tpuvm/queued_resource/client.py). Only a match of one of these rules moves
the walk on: an auth, permission, config or unknown error is the user's to fix, and trying the
next rung would only fail again elsewhere (or, worse, succeed somewhere the user did not choose
for a reason the ladder cannot see).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CapacityRule:
    kind: str  # "stockout" or "quota": what the walk tells the user
    pattern: re.Pattern[str]
    why: str  # what it means, in the walk's message
    source: str


RULES: tuple[CapacityRule, ...] = (
    # google.rpc.Code 8 (RESOURCE_EXHAUSTED) with the TPU API's stockout text. Google's own
    # diagnostic tool matches the same words on tpu CreateNode failures (GoogleCloudPlatform/
    # gcpdiag, lint rule "Cloud TPU resource availability": MATCH_STR = 'There is no more
    # capacity in the zone', MATCH_STR2 = 'you can try in another zone where Cloud TPU Nodes',
    # "Resource errors occur when you try to request new resources in a zone that cannot
    # accommodate your request due to the current unavailability of a Cloud TPU resource"), and
    # the provider relays it as "Error waiting for Creating Vm: Error code 8, message: There is no
    # more capacity in the zone \"us-central1-c\"; you can try in another zone where Cloud TPU
    # Nodes are offered" (hashicorp/terraform-provider-google#21243, google_tpu_v2_vm).
    CapacityRule(
        kind="stockout",
        pattern=re.compile(r"There is no more capacity in the zone(?: \\?\"?([a-z0-9-]+))?"),
        why="the zone has no free TPU of this type now (a stockout: Google's message, code 8 "
        "RESOURCE_EXHAUSTED); more quota does not help, another zone may",
        source="github.com/GoogleCloudPlatform/gcpdiag (lint: Cloud TPU resource availability); "
        "github.com/hashicorp/terraform-provider-google/issues/21243",
    ),
    # A quota the project has used up, as the TPU API words it ("RESOURCE_EXHAUSTED: Quota limit
    # 'TPUV2sPodPerProjectPerRegionForTPUAPI,...' has been exceeded. Limit: 0,0 in region
    # us-central1,zone us-central1-a", gcloud compute tpus create), and as Google's quota pages
    # name it: "If you exceed a quota for Compute Engine, Google Cloud typically returns an HTTP
    # 403 QUOTA_EXCEEDED" (cloud.google.com/docs/quotas/troubleshoot). A TPU quota is per region
    # and per provisioning model (cloud.google.com/tpu/docs/quota: on-demand, preemptible
    # (spot)), so the next rung's region or model may still have some.
    CapacityRule(
        kind="quota",
        pattern=re.compile(r"Quota limit '[^']+' has been exceeded|QUOTA_EXCEEDED"),
        why="the project's TPU quota for this region and provisioning model is used up",
        source="cloud.google.com/docs/quotas/troubleshoot; cloud.google.com/tpu/docs/quota",
    ),
    # GKE's TPU troubleshooting page words a quota shortfall "Insufficient quota to satisfy the
    # request" (cloud.google.com/kubernetes-engine/docs/troubleshooting/tpus); the TPU API's
    # queued resources carry the same words in a FAILED state's reason.
    CapacityRule(
        kind="quota",
        pattern=re.compile(r"Insufficient quota to satisfy the request"),
        why="the project's TPU quota for this region and provisioning model is too small",
        source="cloud.google.com/kubernetes-engine/docs/troubleshooting/tpus",
    ),
    # A flex-start rung's queued resource stays WAITING_FOR_RESOURCES "until there are
    # sufficient free resources" (cloud.google.com/tpu/docs/queued-resources); the deploy's wait
    # gives up after flex_start_timeout with this line (queued_resource/client.py).
    CapacityRule(
        kind="stockout",
        pattern=re.compile(r"waiting for \S+ to become ACTIVE; last state \S+\. No capacity"),
        why="flex-start found no capacity within flex_start_timeout (the queued resource "
        "stayed WAITING_FOR_RESOURCES)",
        source="cloud.google.com/tpu/docs/queued-resources (WAITING_FOR_RESOURCES)",
    ),
)


@dataclass(frozen=True)
class CapacityError:
    kind: str
    why: str
    line: str  # the line of the output that matched, for the walk's message
    source: str


def classify(output: str) -> CapacityError | None:
    """The documented capacity or quota error in a failed deploy's output; None for any other
    failure (the walk stops there, as a deploy without a ladder does)."""
    for line in output.splitlines():
        for rule in RULES:
            if rule.pattern.search(line):
                return CapacityError(rule.kind, rule.why, line.strip()[:300], rule.source)
    return None
