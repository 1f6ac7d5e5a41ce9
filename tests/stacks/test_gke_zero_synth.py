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
from tpudeploy import pins
from tpudeploy.config import parse_config
from tpudeploy.gke import identifiers, pod, replicaplan, wake, zero
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


def _wake_spec(cfg: Any, objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = _one(objects, "Deployment", zero.wake_name(cfg))["spec"]["template"][
        "spec"
    ]
    return spec


def test_the_wake_pod_pulls_no_serving_image_only_small_pinned_ones(pair: Any) -> None:
    """The wake pod is always on, on the one system node: it never pulls the multi-GB vLLM
    image (not streamable from Docker Hub) to run python3, so a rescheduled wake pod (a node
    upgrade's surge node) starts in seconds. Its python3 containers run the pinned slim image;
    the front door keeps [proxy] image, the replicas' own nginx."""
    for cfg, objects in pair:
        spec = _wake_spec(cfg, objects)
        images = {c["name"]: c["image"] for c in [*spec["initContainers"], *spec["containers"]]}
        assert cfg.vllm.image not in images.values(), images
        assert images.pop("frontdoor") == cfg.proxy.image
        assert set(images) == {"wake", "frontdoor-prep", pod.KEYS_CONTAINER}
        for name, image in images.items():
            assert image == pins.WAKE_IMAGE and pins.pinned_digest(image), name
        # The replicas keep the vLLM image for the same two front-door steps (already pulled).
        replica = _one(objects, "Deployment", cfg.name)["spec"]["template"]["spec"]
        prep = [c for c in replica["initContainers"] if c["name"] == "frontdoor-prep"]
        assert prep[0]["image"] == cfg.vllm.image


def test_the_wake_pod_fits_the_system_node_and_no_budget_pins_it_there(pair: Any) -> None:
    for cfg, objects in pair:
        spec = _wake_spec(cfg, objects)

        def total(containers: list[dict[str, Any]], kind: str) -> int:
            return sum(_quantity(c["resources"]["requests"][kind]) for c in containers)

        # What the scheduler reserves: the containers' sum, or the largest init container.
        cpu = max(total(spec["containers"], "cpu"), total(spec["initContainers"], "cpu"))
        memory = max(total(spec["containers"], "memory"), total(spec["initContainers"], "memory"))
        alloc_cpu, alloc_memory = zero.system_allocatable(cfg.gke.system_machine_type)
        # At most a fifth of what the node offers pods: GKE's own add-ons share the rest.
        assert cpu * 5 <= alloc_cpu and memory * 5 <= alloc_memory, (cpu, memory)
        # No PodDisruptionBudget selects the wake pod (a budget of minAvailable 1 over its one
        # pod would stall every system node drain: tpudeploy/gke/zero.py), and the
        # replicas' budget does not count it as a replica.
        wake_labels = _one(objects, "Deployment", zero.wake_name(cfg))["spec"]["template"][
            "metadata"
        ]["labels"]
        for budget in (o for o in objects.values() if o["kind"] == "PodDisruptionBudget"):
            selector = budget["spec"]["selector"]["matchLabels"]
            assert not selector.items() <= wake_labels.items(), budget["metadata"]["name"]


def _quantity(text: str) -> int:
    """A Kubernetes quantity in millicores ("250m", "1") or MiB ("64Mi", "1Gi")."""
    if text.endswith("m"):
        return int(text[:-1])
    if text.endswith("Mi"):
        return int(text[:-2])
    if text.endswith("Gi"):
        return int(text[:-2]) * 1024
    return int(text) * 1000
