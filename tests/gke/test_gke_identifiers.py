"""The replicas' namespace: one per deployment, and always a name Kubernetes accepts.

Kubernetes' rule for a namespace name, an RFC 1123 DNS label: "contain at most 63 characters,
contain only lowercase alphanumeric characters or '-', start with an alphanumeric character, end
with an alphanumeric character" (kubernetes.io/docs/concepts/overview/working-with-objects/names,
"DNS Label Names"). Written here from that page, not read from the code under test.
"""

from __future__ import annotations

import re

import pytest

from tpudeploy import names
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import identifiers, metrics_adapter

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# What a cluster has before any deployment (kube-system & co.) and what GKE's add-ons and the
# metrics adapter run in: a deployment named after one must not land in it.
TAKEN = (
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "gmp-system",
    "gke-managed-system",
)


def _cfg(name: str) -> DeployConfig:
    return parse_config({"platform": "gke", "name": name, "zone": "us-west4-a"})


@pytest.mark.parametrize(
    "name", ["abc", "a" + "b" * 22 + "c", "kube-system", "default", "custom-metrics"]
)
def test_every_deployment_name_gives_a_namespace_kubernetes_accepts(name: str) -> None:
    assert names.DEPLOYMENT_NAME_RE.fullmatch(name)
    ns = identifiers.namespace(_cfg(name))
    assert len(ns) <= 63 and DNS_LABEL.fullmatch(ns), ns
    assert ns not in (*TAKEN, metrics_adapter.NAMESPACE)


def test_two_deployments_are_two_principals() -> None:
    a, b = _cfg("gemma4-gke"), _cfg("gemma4-gke-b")
    principals = {
        identifiers.serving_principal(cfg, project="p", project_number="1") for cfg in (a, b)
    }
    assert len(principals) == 2
    assert all("/subject/ns/tpudeploy-gemma4-gke" in p for p in principals)
