"""What a GKE cluster's Kubernetes API refuses, kept as data with sources (the fake Kubernetes API,
tools/rehearsal/fakes/k8s.py, enforces each)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from tpudeploy import facts, names
from tpudeploy.config.gke import HPA_SCALE_TO_ZERO_MIN_VERSION, HPA_SCALE_TO_ZERO_SOURCE

REPO_ROOT = Path(__file__).resolve().parents[3]
# Schemas of GKE's custom resources (no package ships them), vendored with their sources and
# licences (schemas/README.md), read as the tests read them (tests/stacks/test_gke_synth.py).
CRD_SCHEMAS = REPO_ROOT / "schemas" / "crds"

# Object names (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/): most
# kinds need a DNS subdomain name (at most 253 characters, lowercase alphanumerics, '-' or '.',
# starting and ending alphanumeric); Namespace and Service need an RFC 1123 label (at most 63,
# no '.'); a Service's must also start with a letter (RFC 1035 label).
DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?")
# An RFC 1035 label is Compute Engine's name rule (tpudeploy.names); RFC 1123 lets it start
# with a digit too.
RFC1035_LABEL = re.compile(names.GCE_NAME)
DNS_LABEL = re.compile("[a-z0-9]" + names.GCE_NAME.removeprefix("[a-z]"))
LABEL_KINDS = {"Namespace": DNS_LABEL, "Service": RFC1035_LABEL}
# RBAC objects take any path segment name: not "." or "..", no "/" or "%" (Kubernetes'
# ValidateRBACName is path.IsValidPathSegmentName, pkg/apis/rbac/validation); Google's own
# adapter manifest names a binding custom-metrics:system:auth-delegator.
PATH_SEGMENT = re.compile(r"(?!\.{1,2}$)[^/%]+")
PATH_SEGMENT_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})
# Every cluster starts with these (kubernetes.io/docs/concepts/overview/working-with-objects/
# namespaces/#initial-namespaces): a RoleBinding in kube-system needs no namespace of its own.
INITIAL_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")

# The custom resource definitions a GKE Standard cluster holds, and what installs each: the
# Secret Manager add-on's CSI driver (SecretProviderClass; cloud.google.com/secret-manager/docs/
# secret-manager-managed-csi-component), Managed Service for Prometheus (PodMonitoring;
# cloud.google.com/stackdriver/docs/managed-prometheus/setup-managed), custom ComputeClasses from
# GKE 1.30.3-gke.1451000 (tpudeploy.facts.GKE_COMPUTE_CLASS_SOURCE). The value is the schema file
# under CRD_SCHEMAS, or None where none is published there.
CRDS: dict[tuple[str, str], tuple[str, str | None]] = {
    ("secrets-store.csi.x-k8s.io/v1", "SecretProviderClass"): ("secret_manager", None),
    ("monitoring.googleapis.com/v1", "PodMonitoring"): (
        "managed_prometheus",
        "monitoring.googleapis.com/podmonitoring_v1.json",
    ),
    ("cloud.google.com/v1", "ComputeClass"): (
        "compute_class",
        "cloud.google.com/computeclass_v1.json",
    ),
    # From GKE 1.34.0-gke.1626000 (tpudeploy.facts.GKE_INFERENCE_CRDS_SOURCE); its fields are
    # checked by INFERENCE_POOL_GA_SPEC below, the release GKE installs being unnamed.
    ("inference.networking.k8s.io/v1", "InferencePool"): ("inference_pool", None),
}
# The InferencePool's spec as the oldest GA release of the inference extension has it (v1.0.0,
# api/v1/inferencepool_types.go at ffea26329a16, 2025-09-08). GKE "automatically installs all GA
# CRDs for Gateway API and Gateway API Inference Extension on GKE versions 1.34.0-gke.1626000 or
# later" (tpudeploy.facts.GKE_INFERENCE_CRDS_SOURCE) and names no release: searched in GKE's
# Inference Gateway pages (deploy-gke-inference-gateway, customize-gke-inference-gateway-
# configurations, migrate-gke-inference-gateway; read 2026-12-02), none says which CRD version
# it installs. So only the fields every GA release has may be sent: spec.appProtocol first
# appears in v1.4.0 (the same file at 6e787dd396f0, 2026-03-19), and a structural schema without
# it drops or, with fieldValidation=Strict, refuses it. Values are the fields below each field;
# None is a leaf (matchLabels is a map of labels, any key).
INFERENCE_POOL = ("inference.networking.k8s.io/v1", "InferencePool")
INFERENCE_POOL_GA_SOURCE = (
    "github.com/kubernetes-sigs/gateway-api-inference-extension v1.0.0 "
    "api/v1/inferencepool_types.go (ffea26329a16); GKE names no CRD release"
)
INFERENCE_POOL_GA_SPEC: dict[str, Any] = {
    "selector": {"matchLabels": None},
    "targetPorts": [{"number": None}],
    "endpointPickerRef": {
        "group": None,
        "kind": None,
        "name": None,
        "port": {"number": None},
        "failureMode": None,
    },
}


def fields_beyond(value: Any, tree: Any, where: str) -> list[str]:
    """Every field of `value` that `tree` (a field tree as INFERENCE_POOL_GA_SPEC) lacks."""
    if tree is None:
        return []
    if isinstance(tree, list):
        items = value if isinstance(value, list) else []
        return [p for i, v in enumerate(items) for p in fields_beyond(v, tree[0], f"{where}[{i}]")]
    if not isinstance(value, dict):
        return []
    out = []
    for key, sub in value.items():
        if key not in tree:
            out.append(f"{where}.{key}")
        else:
            out += fields_beyond(sub, tree[key], f"{where}.{key}")
    return out


def inference_pool_problem(obj: dict[str, Any]) -> str:
    """Why a cluster whose CRD is an older GA release would not keep this pool as sent."""
    beyond = fields_beyond(obj.get("spec") or {}, INFERENCE_POOL_GA_SPEC, "spec")
    if not beyond:
        return ""
    return (
        f"{', '.join(beyond)}: not in every GA InferencePool CRD GKE may install "
        f"({INFERENCE_POOL_GA_SOURCE})"
    )


# An HPA at minReplicas 0. The API: "minReplicas is allowed to be 0 if the alpha feature gate
# HPAScaleToZero is enabled and at least one Object or External metric is configured"
# (autoscaling/v2 HorizontalPodAutoscalerSpec.minReplicas, API reference); the gate is "Beta and
# enabled by default" from Kubernetes v1.37 (kubernetes.io/blog/2026/09/02/
# kubernetes-v1-37-hpa-scale-to-zero-beta). GKE: "the GKE cluster control plane and nodes must
# run version 1.37 or later" and "You must configure at least one External or Object metric"
# (tpudeploy.config.gke.HPA_SCALE_TO_ZERO_SOURCE, the tutorial's zh-cn stored copy). The API
# server's exact message was not in the stored corpus; the fake's words are its own.
HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")
HPA_ZERO_METRIC_TYPES = frozenset({"Object", "External"})


def hpa_zero_problem(obj: dict[str, Any], version: str) -> str:
    """Why this cluster would refuse an HPA's minReplicas of 0 ("" when it would not)."""
    spec = obj.get("spec") or {}
    if spec.get("minReplicas", 1) != 0:
        return ""
    floor = HPA_SCALE_TO_ZERO_MIN_VERSION
    if _version(version)[:2] < _version(floor)[:2]:
        return (
            f"spec.minReplicas: Invalid value: 0: must be greater than or equal to 1 (scaling "
            f"to zero needs GKE {floor} or later; {HPA_SCALE_TO_ZERO_SOURCE})"
        )
    types = {str(m.get("type")) for m in spec.get("metrics") or []}
    if not types & HPA_ZERO_METRIC_TYPES:
        return (
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1 unless at "
            "least one Object or External metric is configured"
        )
    return ""


NO_KIND = "no such kind"
UNCHECKED = "unchecked"


def minor(version: str) -> str:
    """1.33.5-gke.1080000 -> 1.33.0, the schema set kubernetes-validate has for that minor."""
    parts = re.findall(r"\d+", version)
    return f"{parts[0]}.{parts[1]}.0" if len(parts) >= 2 else ""


def installed_crds(cluster: dict[str, Any]) -> dict[tuple[str, str], str | None]:
    """The custom resource kinds this cluster serves, by what its configuration turned on."""
    on = {
        "secret_manager": bool((cluster.get("secretManagerConfig") or {}).get("enabled")),
        "managed_prometheus": bool(
            ((cluster.get("monitoringConfig") or {}).get("managedPrometheusConfig") or {}).get(
                "enabled"
            )
        ),
        "compute_class": _version(str(cluster.get("currentMasterVersion", "")))
        >= _version(facts.GKE_COMPUTE_CLASS_MIN_VERSION),
        "inference_pool": _version(str(cluster.get("currentMasterVersion", "")))
        >= _version(facts.GKE_INFERENCE_CRDS_MIN_VERSION),
    }
    return {kind: path for kind, (feature, path) in CRDS.items() if on[feature]}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text)[:4])


def plural(kind: str) -> str:
    """The resource name the API serves a kind under (Deployment -> deployments, Policy ->
    policies, Ingress -> ingresses), as the API's discovery names them."""
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def name_problem(kind: str, name: str) -> str:
    if kind in PATH_SEGMENT_KINDS:
        ok = PATH_SEGMENT.fullmatch(name)
        return "" if ok else f"metadata.name: Invalid value: {name!r}: not a path segment name"
    pattern = LABEL_KINDS.get(kind, DNS_SUBDOMAIN)
    if pattern.fullmatch(name):
        return ""
    what = "an RFC 1123 label" if pattern is not DNS_SUBDOMAIN else "a DNS subdomain"
    return f"metadata.name: Invalid value: {name!r}: must be {what} (kubernetes.io names)"


@cache
def _crd_schema(path: str) -> dict[str, Any]:
    # Vendored with the project: a named file that is absent is a broken checkout, never a kind
    # left unchecked in silence.
    file = CRD_SCHEMAS / path
    loaded: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
    return loaded


def validate(obj: dict[str, Any], version: str, crds: dict[tuple[str, str], str | None]) -> str:
    """ "" when the API server would store `obj`; else why not, NO_KIND for a kind the cluster
    does not serve, UNCHECKED for a custom resource with no schema at hand."""
    import jsonschema  # type: ignore[import-untyped]
    import kubernetes_validate  # type: ignore[import-untyped]

    key = (str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if key == INFERENCE_POOL and (problem := inference_pool_problem(obj)):
        return problem
    if key == HPA and (problem := hpa_zero_problem(obj, version)):
        return problem
    if key in CRDS:
        if key not in crds:
            return NO_KIND
        path = crds[key]
        if path is None:
            return UNCHECKED
        schema = _crd_schema(path)
        try:
            jsonschema.validate(obj, schema)
        except jsonschema.ValidationError as exc:
            return f"{exc.message} at {list(exc.path)}"
        return ""
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return NO_KIND
    except kubernetes_validate.ValidationError as exc:
        return f"{exc.message} at {list(exc.path)}"
    return ""
