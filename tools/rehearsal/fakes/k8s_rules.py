"""What a GKE cluster's Kubernetes API refuses, kept as data with sources (the fake Kubernetes API,
tools/rehearsal/fakes/k8s.py, enforces each)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from tpudeploy import facts, names

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
}
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
