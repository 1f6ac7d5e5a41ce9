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


def version_key(version: str) -> tuple[int, ...]:
    """1.33.0-gke.1712000 -> (1, 33, 0, 1712000)."""
    return tuple(int(n) for n in re.findall(r"\d+", version)[:4])


# ---- versions: what clusters.create takes as initialClusterVersion (issue 36, item 1)

# Cluster.initialClusterVersion: "Valid versions are those found in validMasterVersions returned
# by getServerConfig. [...] Users may specify either explicit versions offered by Kubernetes
# Engine or version aliases, which have the following behavior: - "latest": picks the highest
# valid Kubernetes version - "1.X": picks the highest valid patch+gke.N patch in the 1.X version
# - "1.X.Y": picks the highest valid gke.N patch in the 1.X.Y version - "1.X.Y-gke.N": picks an
# explicit Kubernetes version - "","-": picks the default Kubernetes version"
# (cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster,
# read through its generated reference, the stored corpus's copy). A build GKE no longer offers
# is refused at create: "Master version ... is unsupported" (400; the wording of the
# error, not found verbatim in the stored corpus).
VERSION_SOURCE = (
    "cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters "
    "(Cluster.initialClusterVersion)"
)
VERSION_ALIAS = re.compile(r"latest|-|1\.\d+(\.\d+)?")
# The fake's serverConfig for every zone (projects.locations.getServerConfig: validMasterVersions,
# and per release channel its defaultVersion and validVersions). Builds of late 2026, made up
# in GKE's format; 1.33.0-gke.1712000, the documented flex-start minimum, is long retired, as an
# exact early build is within months (GKE's versioning page: patches roll out and the older
# ones leave the channels).
# Two builds of 1.37 are Google's own: the GKE 1.37 changelog lists "1.37.1-gke.1552000 [...]
# compared with the previous patch version, 1.37.0-gke.3503000"
# (docs.cloud.google.com/kubernetes-engine/docs/changelogs/1.37). That 1.37 builds are in the
# Rapid channel rests on third-party readings of GKE's release notes in the stored corpus (2026-R37
# and R38: 1.37.0-gke.2941000 and 1.37.0-gke.3165000 added to Rapid; a cluster verified on
# 1.37.0-gke.3503000 "as the latest non-preview Rapid version available" on 2026-10-02): Google's
# own Rapid feed in the corpus ends at 2026-R40 (2026-09-23) with 1.36.4-gke.1391000 the default
# and its version list cut off. No stored page makes a 1.37 build a channel's default, so the
# fake's defaults stay below it (the scale-to-zero rehearsal waits on that: tests/rehearsal/
# test_rehearsal_vpc_rules.py, the xfail).
GKE_137 = ("1.37.1-gke.1552000", "1.37.0-gke.3503000")
VALID_MASTER_VERSIONS = (
    *GKE_137,
    "1.35.1-gke.1200000",
    "1.35.0-gke.1800000",
    "1.34.3-gke.1300000",
    "1.34.2-gke.1100000",
    "1.33.7-gke.1500000",
)
CHANNELS = {
    "RAPID": ("1.35.1-gke.1200000", (*GKE_137, "1.35.1-gke.1200000", "1.35.0-gke.1800000")),
    "REGULAR": ("1.34.3-gke.1300000", ("1.35.0-gke.1800000", "1.34.3-gke.1300000",
                                       "1.34.2-gke.1100000")),
    "STABLE": ("1.33.7-gke.1500000", ("1.34.2-gke.1100000", "1.33.7-gke.1500000")),
    "EXTENDED": ("1.33.7-gke.1500000", ("1.34.2-gke.1100000", "1.33.7-gke.1500000")),
}  # fmt: skip
DEFAULT_VERSION = CHANNELS["REGULAR"][0]


def server_config() -> dict[str, object]:
    """The getServerConfig answer (its REST shape: ServerConfig)."""
    return {
        "defaultClusterVersion": DEFAULT_VERSION,
        "validMasterVersions": list(VALID_MASTER_VERSIONS),
        "validNodeVersions": list(VALID_MASTER_VERSIONS),
        "channels": [
            {"channel": name, "defaultVersion": default, "validVersions": list(valid)}
            for name, (default, valid) in CHANNELS.items()
        ],
    }


def resolve_version(asked: str, channel: str) -> str | None:
    """The version a create gets for `asked` (an alias or an exact build), or None when GKE
    would refuse it: an exact build it does not offer, an alias nothing offered matches."""
    default, in_channel = CHANNELS.get(channel, (DEFAULT_VERSION, VALID_MASTER_VERSIONS))
    offered = sorted(set(VALID_MASTER_VERSIONS) | set(in_channel), key=version_key)
    if asked in ("", "-"):
        return default
    if asked == "latest":
        return offered[-1]
    if VERSION_ALIAS.fullmatch(asked):
        matching = [v for v in offered if v.startswith(asked + ".") or v.startswith(asked + "-")]
        return matching[-1] if matching else None
    return asked if asked in offered else None


# ---- the control plane's range of a private cluster (issue 36, item 5)

# PrivateClusterConfig.masterIpv4CidrBlock: "The IP range in CIDR notation to use for the hosted
# master network. This range will be used for assigning internal IP addresses to the master or
# set of masters, as well as the ILB VIP. This range must not overlap with any other ranges in
# use within the cluster's network." (REST reference, PrivateClusterConfig; the same sentence in
# Cloud Composer's PrivateClusterConfig, which the stored corpus holds). A second cluster of the
# network whose /28 overlaps the first's is such a range in use; and on an auto-mode network the
# subnets' 10.128.0.0/9 is in use. GKE's own error text was not found in the corpus: the fake's
# message is its own.
MASTER_CIDR_SOURCE = (
    "cloud.google.com/kubernetes-engine/docs/reference/rest/v1beta1/"
    "projects.locations.clusters#PrivateClusterConfig"
)
MASTER_CIDR_PREFIX = 28


# MasterAuth's credentials (REST reference, MasterAuth: username / password for basic auth,
# clientCertificate / clientKey "used by clients to authenticate to the cluster endpoint"),
# shown only to a caller with container.clusters.getCredentials (kubernetes-engine/docs/
# reference/api-permissions: clusters.get "and container.clusters.getCredentials to see the
# cluster's credentials"). clusterCaCertificate is the endpoint's public CA, not a credential.
CREDENTIALS = frozenset({"username", "password", "clientCertificate", "clientKey"})
