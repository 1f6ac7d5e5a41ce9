"""`make usage` on GKE (tpudeploy/gke/accesslog.py): each replica's frontdoor container log
through the fake API server's pods/log (tools/rehearsal/fakes/k8s_ops.py RULES["pods/log"])."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.rehearsal.fakes import k8s_ops
from tpudeploy.gcp.container import ClusterAccess, KubeError
from tpudeploy.gke import accesslog
from tpudeploy.gke.kube import KubeApi
from tpudeploy.gke.manifests import labels
from tpudeploy.platform import parse_config

CFG = parse_config({"platform": "gke", "project": "usage-proj-1"}, source="test")
NS = f"tpudeploy-{CFG.name}"


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[k8s_ops.FakeKubernetes]:
    with k8s_ops.FakeKubernetes(tmp_path / "kube") as api:
        yield api


def _api(kube: k8s_ops.FakeKubernetes) -> KubeApi:
    return KubeApi(ClusterAccess(f"https://{kube.host}", kube.ca_pem, "t"))


def _pod(name: str, started: str, *, running: bool = True) -> dict[str, object]:
    return k8s_ops.pod(
        name,
        NS,
        labels=labels(CFG),
        phase="Running" if running else "Pending",
        node="gke-tpu-1" if running else "",
        started_at=started,
        containers={"vllm": {"ready": True}, "frontdoor": {"ready": running}} if running else None,
    )


def test_each_running_replicas_frontdoor_log_since_the_window(
    kube: k8s_ops.FakeKubernetes,
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    kube.put(_pod("r-a", "2026-12-03T05:00:00Z"))
    kube.put(_pod("r-b", "2026-12-03T06:00:00Z"))
    kube.put(_pod("r-c", "2026-12-03T06:00:00Z", running=False))
    kube.log(NS, "r-a", "frontdoor", "old", now - datetime.timedelta(hours=2))
    kube.log(NS, "r-a", "frontdoor", "new-a", now - datetime.timedelta(minutes=5))
    kube.log(NS, "r-a", "vllm", "engine line", now)
    kube.log(NS, "r-b", "frontdoor", "new-b", now)
    found = {r.name: r for r in accesslog.access_logs(CFG, "p", 3600, api=_api(kube))}
    assert set(found) == {"r-a", "r-b"}  # r-c's front door is not running
    assert list(found["r-a"].lines) == ["new-a"] and list(found["r-b"].lines) == ["new-b"]
    assert found["r-a"].started == datetime.datetime(2026, 12, 3, 5, tzinfo=datetime.UTC)


def test_the_fake_refuses_what_the_api_server_refuses(kube: k8s_ops.FakeKubernetes) -> None:
    kube.put(_pod("r-a", "2026-12-03T05:00:00Z"))
    api = _api(kube)
    path = f"/api/v1/namespaces/{NS}/pods/r-a/log"
    with pytest.raises(KubeError, match="a container name must be specified"):
        api.text(path)
    with pytest.raises(KubeError, match="must be greater than 0"):
        api.text(path, params={"container": "frontdoor", "sinceSeconds": "0"})
    assert api.text(f"/api/v1/namespaces/{NS}/pods/gone/log") is None
