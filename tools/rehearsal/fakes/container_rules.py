"""What the GKE API refuses, as Google documents it, kept as data with sources (the container
fake, tools/rehearsal/fakes/container.py, enforces each)."""

from __future__ import annotations

import re

from tpudeploy import facts

# Cluster.name: "can be up to 40 characters with the following restrictions: Lowercase letters,
# numbers, and hyphens only. Must start with a letter. Must end with a number or a letter."
# (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters)
CLUSTER_NAME = re.compile(r"[a-z](?:[a-z0-9-]{0,38}[a-z0-9])?")
CLUSTER_NAME_SOURCE = (
    "cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters"
)
# v5e single-host machine types exist only where the chip does (tpudeploy.facts, its source).
TPU_MACHINE_PREFIX = "ct5lp-"
TPU_ZONES = facts.GKE_V5E_ZONES
TPU_ZONES_SOURCE = facts.GKE_TPU_SOURCE
# Flex-start for TPUs: GKE 1.33.0-gke.1712000 or later, v5e in us-west4-a; a run lasts at most
# seven days (tpudeploy.facts, cloud.google.com/kubernetes-engine/docs/concepts/dws).
FLEX_ZONES = facts.GKE_FLEX_START_V5E_ZONES
FLEX_MIN_VERSION = facts.GKE_FLEX_START_TPU_MIN_VERSION
FLEX_MAX_RUN_S = facts.GKE_FLEX_START_MAX_RUN_S
FLEX_SOURCE = facts.GKE_FLEX_START_SOURCE
# NodeConfig.workloadMetadataConfig mode GKE_METADATA "exposes a metadata API to workloads that is
# compatible with the V1 Compute Metadata APIs exposed by the Compute Engine and App Engine
# Metadata Servers. This feature can only be enabled if Workload Identity is enabled at the
# cluster level." (REST reference, WorkloadMetadataConfig.Mode)
GKE_METADATA_NEEDS_WORKLOAD_POOL = True
WORKLOAD_METADATA_SOURCE = "cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig"
# The version a new cluster gets when min_master_version is below the channel's default (the
# fake's stand-in for the release channel's current default).
DEFAULT_VERSION = "1.33.5-gke.1080000"


def version_key(version: str) -> tuple[int, ...]:
    """1.33.0-gke.1712000 -> (1, 33, 0, 1712000)."""
    return tuple(int(n) for n in re.findall(r"\d+", version)[:4])
