"""The log contract of issue 38 between the node, which writes, and `make logs`, which reads.

- TPU VM: three logs with the IDs of TPUVM_LOG_IDS (vLLM's container output; the front door's
  JSON access log lines, tpudeploy/frontdoor_log.py's ACCESS_LOG_FIELDS, as jsonPayload; the boot
  phases, one structured entry per phase with `phase`, `event` (start|end|fail), `elapsed_s`, and
  the boot-log check's verdict as phase="bootcheck" with `ok` and the disagreeing items), each
  entry labelled DEPLOYMENT_LABEL=<deployment name>, so that two deployments in one project are
  told apart by the filter deployment_filter(name).
- GKE: container logs as GKE ships them (resource.type="k8s_container", its cluster_name,
  namespace_name and container_name labels); the front door's stdout lines are JSON objects.
"""

from __future__ import annotations

import json
from typing import Final

# TPU VM: the node's log IDs (the last part of logName, projects/P/logs/<id>).
TPUVM_LOG_IDS: Final = {
    "vllm": "tpudeploy-vllm",
    "frontdoor": "tpudeploy-frontdoor",
    "boot": "tpudeploy-boot",
}
# The label every node entry carries, its value the deployment's name.
DEPLOYMENT_LABEL: Final = "tpudeploy_deployment"
# GKE: the pod's containers whose logs are read (tpudeploy/gke/pod.py names them in the pod).
GKE_CONTAINERS: Final = {"vllm": "vllm", "frontdoor": "frontdoor"}


def deployment_filter(name: str) -> str:
    """The Logging query that keeps one deployment's node entries (a JSON string literal is a
    valid Logging query language string)."""
    return f"labels.{DEPLOYMENT_LABEL}={json.dumps(name)}"
