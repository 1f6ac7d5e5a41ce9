"""GKE's front-door access log for `make usage`: each replica's `frontdoor` container log through
the cluster's API (GET .../pods/POD/log?container=frontdoor&sinceSeconds=N, the pods/log
subresource, which `roles/container.viewer` reads: container.pods.getLogs), and when that
container started. A replica that ended inside the window took its log with it: its requests
and its chip-hours are both missing (the report's chip-hours are a lower bound on GKE)."""

from __future__ import annotations

import datetime
from typing import Any

from tpudeploy.config import DeployConfig
from tpudeploy.facts import lookup_accelerator
from tpudeploy.gke.identifiers import namespace
from tpudeploy.gke.kube import KubeApi
from tpudeploy.gke.ops import selector
from tpudeploy.usage import ReplicaLog

FRONTDOOR_CONTAINER = "frontdoor"


def started_at(pod: dict[str, Any]) -> datetime.datetime | None:
    """When the pod's front door started running (its container status), None if it is not."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == FRONTDOOR_CONTAINER:
            running = (status.get("state") or {}).get("running") or {}
            raw = running.get("startedAt")
            if raw:
                return datetime.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    return None


def access_logs(
    cfg: DeployConfig, project: str, since_s: int, *, api: KubeApi | None = None
) -> list[ReplicaLog]:
    api = api or KubeApi.for_deployment(cfg, project)
    ns = namespace(cfg)
    chips = lookup_accelerator(cfg.accelerator_type).chips
    out = []
    for pod in api.items(f"/api/v1/namespaces/{ns}/pods", selector(cfg)):
        started = started_at(pod)
        if started is None:
            continue
        name = pod["metadata"]["name"]
        text = api.text(
            f"/api/v1/namespaces/{ns}/pods/{name}/log",
            params={"container": FRONTDOOR_CONTAINER, "sinceSeconds": str(int(since_s))},
        )
        out.append(ReplicaLog(name, started, (text or "").splitlines(), chips))
    return out
