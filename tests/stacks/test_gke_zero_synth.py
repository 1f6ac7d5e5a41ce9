"""Two deployments at [gke] min_replicas = 0 in one project, synthesized (one synthesis each,
shared by this module): the HPA, the wake path's objects and what keeps the two apart, against
the rules Kubernetes and GKE enforce (tools/rehearsal/fakes/k8s_rules.py) and kubernetes-validate
at the documented minor, 1.37."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SECOND_GKE_NAME, Synthesizer, gke_local_raw
from tools.k8s_manifests import manifests
from tools.rehearsal.fakes import k8s_rules
from tpudeploy.config import parse_config
from tpudeploy.gke import identifiers, replicaplan, wake, zero
from tpudeploy.gke.manifests import labels

pytestmark = pytest.mark.slow
ZERO = {"min_replicas": 0, "min_version": "1.37"}
MINOR = "1.37.0"


def _raw(name: str | None = None) -> dict[str, Any]:
    raw = gke_local_raw()
    raw["gke"] = {**raw.get("gke", {}), **ZERO}
    if name:
        raw["name"] = name
    return raw


@pytest.fixture(scope="module")
def pair(synth: Synthesizer) -> list[tuple[Any, dict[str, dict[str, Any]]]]:
    out = []
    for raw in (_raw(), _raw(SECOND_GKE_NAME)):
        cfg = parse_config(raw)
        out.append((cfg, manifests(synth(raw)[cfg.serving_stack_name])))
    return out


def _one(objects: dict[str, dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects.values() if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_every_core_object_validates_and_the_cluster_would_store_it(pair: Any) -> None:
    import kubernetes_validate  # type: ignore[import-untyped]

    for _, objects in pair:
        for address, obj in objects.items():
            if address.startswith("kubernetes_manifest."):
                continue
            try:
                kubernetes_validate.validate(obj, MINOR, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{address}: {exc.message} at {list(exc.path)}")
            assert k8s_rules.validate(obj, MINOR, {}) == "", address


def test_the_hpa_goes_to_zero_on_its_own_wake_gauge_after_the_planners_window(pair: Any) -> None:
    for cfg, objects in pair:
        hpa = _one(objects, "HorizontalPodAutoscaler", cfg.name)["spec"]
        assert hpa["minReplicas"] == 0
        (external,) = [m for m in hpa["metrics"] if m["type"] == "External"]
        metric = external["external"]["metric"]
        assert metric["name"] == f"prometheus.googleapis.com|{wake.METRIC}|gauge"
        assert metric["selector"]["matchLabels"] == {
            "resource.labels.namespace": identifiers.namespace(cfg),
            "resource.labels.cluster": identifiers.cluster_name(cfg),
        }
        # Zero only after the planner's scale-down window, longer than a warm boot.
        window = hpa["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
        assert window == replicaplan.scale_down_window_s() > 497
        # The same HPA below 1.37 is what the fake refuses.
        assert "1.37" in k8s_rules.hpa_zero_problem({"spec": hpa}, "1.36.0")


def test_two_deployments_keep_their_wake_paths_apart(pair: Any) -> None:
    (a, first), (b, second) = pair
    for cfg, objects in pair:
        wake_pod = _one(objects, "Deployment", zero.wake_name(cfg))["spec"]["template"]
        service = _one(objects, "Service", cfg.name)["spec"]
        replica = _one(objects, "Deployment", cfg.name)["spec"]
        # The Service reaches both the replicas and the responder, by the one label they share.
        assert service["selector"] == zero.serves_labels(cfg)
        assert service["selector"].items() <= wake_pod["metadata"]["labels"].items()
        assert service["selector"].items() <= replica["template"]["metadata"]["labels"].items()
        # No controller's selector matches the other's pods.
        assert (
            not replica["selector"]["matchLabels"].items() <= wake_pod["metadata"]["labels"].items()
        )
        role = _one(objects, "Role", zero.wake_name(cfg))
        assert role["rules"] == [
            {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [cfg.name],
             "verbs": ["get"]}
        ]  # fmt: skip
    names = [
        {o["metadata"]["name"] for o in objs.values() if "wake" in o["metadata"]["name"]}
        for objs in (first, second)
    ]
    assert names[0].isdisjoint(names[1])
    assert identifiers.namespace(a) != identifiers.namespace(b)
    assert zero.serves_labels(a) != zero.serves_labels(b)


def test_the_wake_pod_holds_no_chip_no_model_token_and_only_its_own_api_token(pair: Any) -> None:
    cfg, objects = pair[0]
    spec = _one(objects, "Deployment", zero.wake_name(cfg))["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec and "tolerations" not in spec
    assert all("tpu" not in str(c.get("resources", {})) for c in spec["containers"])
    volumes = {v["name"] for v in spec["volumes"]}
    assert "vllm-secrets" not in volumes and "frontdoor-secrets" in volumes
    assert spec["automountServiceAccountToken"] is False
    with_token = [
        c["name"]
        for c in spec["containers"]
        if any(m["name"] == "wake-token" for m in c.get("volumeMounts", []))
    ]
    assert with_token == ["wake"]
    (responder,) = [c for c in spec["containers"] if c["name"] == "wake"]
    assert responder["command"][-5:-1] == [
        identifiers.namespace(cfg),
        cfg.name,
        str(zero.first_request_s()),
        str(zero.MIN_RETRY_AFTER_S),
    ]
    assert labels(cfg).items() != zero.wake_labels(cfg).items()
