"""The log contract's GKE container names are the pod's own (tpudeploy/logsources.py reads what
tpudeploy/gke/pod.py and the access-log reader name)."""

from __future__ import annotations

from tpudeploy import logsources
from tpudeploy.gke.accesslog import FRONTDOOR_CONTAINER
from tpudeploy.gke.pod import VLLM_CONTAINER


def test_the_contract_names_the_pods_containers() -> None:
    assert logsources.GKE_CONTAINERS == {"vllm": VLLM_CONTAINER, "frontdoor": FRONTDOOR_CONTAINER}
