"""The log contract of issue 38: where the node's and the pods' logs are in Cloud Logging, and the
filter that reads one deployment's, as data.

The node writes (templates/, the "node" side), `make logs` reads (tpudeploy/logscli.py); both
take the names from here, so the writer and the reader cannot drift apart.

- TPU VM: three logs with the IDs of TPUVM_LOG_IDS (vLLM's container output; the front door's
  JSON access log lines, tpudeploy/frontdoor_log.py's ACCESS_LOG_FIELDS, as jsonPayload; the boot
  phases, one structured entry per phase with `phase`, `event` (start|end|fail), `elapsed_s`, and
  the boot-log check's verdict as phase="bootcheck" with `ok` and the disagreeing items), each
  entry labelled DEPLOYMENT_LABEL=<deployment name>. The idle stop's watcher writes one entry
  there too when the stop is near: phase IDLE_PHASE, event STOPS_SOON_EVENT, `elapsed_s` (the
  idle seconds), `stop_after_s` and STOPS_AT_FIELD (when it stops, RFC 3339 UTC). The reader
  narrows by log name and that label only: the monitored resource type the agent gives a TPU
  VM host is not part of the contract.
- GKE: container logs as GKE ships them (resource.type="k8s_container" with cluster_name,
  namespace_name and container_name labels), the front door's stdout lines JSON so that GKE
  parses them into jsonPayload; the boot is the vLLM container's lines plus the pod's events.

Filters are written in the Logging query language
(cloud.google.com/logging/docs/view/logging-query-language). Its precedence is unusual: OR binds
tighter than AND ("a OR NOT b AND NOT c OR d" is "(a OR (NOT b)) AND ((NOT c) OR d)"), so every
disjunction here is parenthesised and nothing rests on precedence.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Final

# The three kinds of log `make logs WHAT=` names, in the order it prints them by default.
WHATS: Final = ("vllm", "frontdoor", "boot")

# TPU VM: the node's log IDs (the last part of logName, projects/P/logs/<id>).
TPUVM_LOG_IDS: Final = {
    "vllm": "tpudeploy-vllm",
    "frontdoor": "tpudeploy-frontdoor",
    "boot": "tpudeploy-boot",
}
# The label every node entry carries, its value the deployment's name: two deployments in one
# project are told apart by it.
DEPLOYMENT_LABEL: Final = "tpudeploy_deployment"

# The idle watcher's "stops soon" entry in the boot log (tpudeploy/node/idlewatch.py writes
# it, standard library only, with the same names: tests/tpuvm/test_stopsoon.py ties them).
IDLE_PHASE: Final = "idle"
STOPS_SOON_EVENT: Final = "stops-soon"
STOPS_AT_FIELD: Final = "stops_at"

# GKE: the pod's containers whose logs `make logs` reads (tpudeploy/gke/pod.py names them in
# the pod; tests/gke/test_gke_logsources.py ties the two).
GKE_CONTAINERS: Final = {"vllm": "vllm", "frontdoor": "frontdoor"}
# GKE's container logs on resource k8s_container (cluster_name, namespace_name, container_name),
# a single-line JSON stdout line parsed into jsonPayload, and the pods' Kubernetes events in the
# log `events` on resource k8s_pod: these rest on the reading; no Google page on GKE's
# log resources or its JSON parsing was found in the stored corpus (searched 2026-12-03).
GKE_CONTAINER_RESOURCE: Final = "k8s_container"
GKE_POD_RESOURCE: Final = "k8s_pod"
GKE_EVENTS_LOG_ID: Final = "events"


# A node preemption, as a log-based metric reads it (tpudeploy/logmetrics.py, "preemptions"):
# not one of WHATS (`make logs` prints no such log), a kind of its own whose filter each
# platform writes whole (Platform.log_metric_filter).
PREEMPTION: Final = "preemption"
# TPU VM: no Google page in the stored corpus says what a TPU VM's spot preemption writes to
# Cloud Logging (the Cloud TPU pages name only the node's state: "If a TPU has been preempted,
# the status changes from READY to PREEMPTED", cloud.google.com/tpu/docs/preemptible, read
# 2026-12-03). So the node says it itself: its shutdown script, which a preemption runs, asks
# the metadata server (Compute Engine: "check the metadata server for the preempted value in
# your instance's default instance metadata ... instance/preempted ... TRUE", the Spot and
# preemptible VM pages, cloud.google.com/compute/docs/instances/create-use-spot; their TPU VM
# form rests on the reading) and writes one boot-log entry with this phase.
PREEMPTED_PHASE: Final = "preempted"
# GKE: Compute Engine records a spot node's preemption as a system-event audit entry, method
# compute.instances.preempted, on the node's VM (resource.type gce_instance, resourceName
# projects/P/zones/Z/instances/NAME). The entry's fields are as Google writes them in a
# third-party exporter's fixture (github.com/thought-machine/spot-interruption-exporter: "The
# audit log for instance preemption does not contain information about the Kubernetes cluster");
# Google's own Spot page (create-use-spot, "How to detect ... preemption") was in the corpus only
# as an abstract. GKE names a pool's VMs gke-<cluster>-<pool>-<hash>-<suffix>: the observed
# form, on the reading (no page on it was found in the stored corpus; GKE shortens
# long names, so a cluster name long enough to be shortened would escape the filter).
AUDIT_SYSTEM_EVENT_LOG_ID: Final = "cloudaudit.googleapis.com/system_event"
PREEMPTED_METHOD: Final = "compute.instances.preempted"


def quoted(value: str) -> str:
    """A Logging query language string literal: double quotes, with backslash escapes (the
    language's strings are C-style; JSON's escaping is a subset of it)."""
    return json.dumps(value)


def since_clause(now: datetime.datetime, since_s: int) -> str:
    """timestamp >= the window's start, in RFC 3339 UTC (the form the query language compares
    timestamps in)."""
    start = (now - datetime.timedelta(seconds=since_s)).astimezone(datetime.UTC)
    return f"timestamp>={quoted(start.strftime('%Y-%m-%dT%H:%M:%SZ'))}"


def log_name(project: str, log_id: str) -> str:
    return f"projects/{project}/logs/{log_id}"


def deployment_filter(name: str) -> str:
    """The clause that keeps one deployment's node entries: the label the node's agent sets
    (tpudeploy/opsagent.py), read by tpuvm_filter and the log-based metrics alike."""
    return f"labels.{DEPLOYMENT_LABEL}={quoted(name)}"


def tpuvm_filter(
    *, project: str, deployment: str, whats: tuple[str, ...], now: datetime.datetime, since_s: int
) -> str:
    """One deployment's node logs of the kinds `whats`, in the window."""
    names = " OR ".join(f"logName={quoted(log_name(project, TPUVM_LOG_IDS[w]))}" for w in whats)
    return f"({names}) AND {deployment_filter(deployment)} AND {since_clause(now, since_s)}"


def gke_filter(
    *,
    project: str,
    cluster: str,
    namespace: str,
    whats: tuple[str, ...],
    now: datetime.datetime,
    since_s: int,
) -> str:
    """One deployment's containers (its cluster and namespace) of the kinds `whats`, and for
    "boot" the pods' events too, in the window."""
    containers = sorted({GKE_CONTAINERS["vllm" if w == "boot" else w] for w in whats})
    parts = [
        f"(resource.type={quoted(GKE_CONTAINER_RESOURCE)} AND "
        f"resource.labels.cluster_name={quoted(cluster)} AND "
        f"resource.labels.namespace_name={quoted(namespace)} AND "
        f"({' OR '.join(f'resource.labels.container_name={quoted(c)}' for c in containers)}))"
    ]
    if "boot" in whats:
        parts.append(
            f"(logName={quoted(log_name(project, GKE_EVENTS_LOG_ID))} AND "
            f"resource.type={quoted(GKE_POD_RESOURCE)} AND "
            f"resource.labels.cluster_name={quoted(cluster)} AND "
            f"resource.labels.namespace_name={quoted(namespace)})"
        )
    return f"({' OR '.join(parts)}) AND {since_clause(now, since_s)}"


def tpuvm_metric_filter(*, deployment: str, what: str) -> str:
    """A log-based metric's filter over one deployment's node log `what`: by log ID (the
    query language's log_id function, so the stack needs no project id in it) and label."""
    return f"log_id({quoted(TPUVM_LOG_IDS[what])}) AND {deployment_filter(deployment)}"


def gke_metric_filter(*, cluster: str, namespace: str, what: str) -> str | None:
    """A log-based metric's filter over one deployment's container `what`; None for "boot",
    which GKE writes as unstructured container lines and events, nothing a metric can read."""
    if what not in GKE_CONTAINERS:
        return None
    return (
        f"resource.type={quoted(GKE_CONTAINER_RESOURCE)} AND "
        f"resource.labels.cluster_name={quoted(cluster)} AND "
        f"resource.labels.namespace_name={quoted(namespace)} AND "
        f"resource.labels.container_name={quoted(GKE_CONTAINERS[what])}"
    )


def tpuvm_preemption_filter(*, deployment: str) -> str:
    """The deployment's node saying, from its shutdown script, that it is being preempted."""
    return (
        f"{tpuvm_metric_filter(deployment=deployment, what='boot')} AND "
        f"jsonPayload.phase={quoted(PREEMPTED_PHASE)}"
    )


def gke_preemption_filter(*, cluster: str, pool: str) -> str:
    """Compute Engine's preemption entries of the deployment's spot pool's VMs: the name anchored
    at both ends, so that another cluster whose name starts with this one's (or ends in the
    pool's) never matches. Cluster and pool names are DNS labels ([a-z0-9-]): nothing in them is
    special to the regular expression."""
    if not re.fullmatch(r"[a-z0-9-]+", cluster + pool):
        raise ValueError(f"not a DNS label: {cluster!r} / {pool!r}")
    return (
        f"log_id({quoted(AUDIT_SYSTEM_EVENT_LOG_ID)}) AND "
        f"resource.type={quoted('gce_instance')} AND "
        f"protoPayload.methodName={quoted(PREEMPTED_METHOD)} AND "
        f"protoPayload.resourceName=~{quoted(f'/instances/gke-{cluster}-{pool}-[0-9a-z]+-[0-9a-z]+$')}"
    )


def what_of(entry: dict[str, object]) -> str:
    """Which of WHATS an entry read by either filter is (for printing)."""
    name = str(entry.get("logName", ""))
    log_id = name.rsplit("/", 1)[-1]
    for what, known in TPUVM_LOG_IDS.items():
        if log_id == known:
            return what
    if log_id == GKE_EVENTS_LOG_ID:
        return "boot"
    resource = entry.get("resource")
    labels = resource.get("labels", {}) if isinstance(resource, dict) else {}
    container = labels.get("container_name") if isinstance(labels, dict) else None
    for what, known in GKE_CONTAINERS.items():
        if container == known:
            return what
    return "?"
