"""The Kubernetes objects of a synthesized serving stack, as the API server would receive them.

The Kubernetes provider's resources spell an object in Terraform's shape: snake_case keys,
repeated blocks under singular names (`container`, `volume`, `port`), one-element lists for
nested blocks, numbers as strings where the schema says so. `manifests(stack)` turns each
typed resource back into the API's shape (camelCase, plural list names, plain objects) so that
kubernetes-validate can judge it for the cluster's version, and returns the custom resources of
`kubernetes_manifest` as they are. The mapping is the provider's documented one (its
`kubernetes_*_v1` docs name every block after the API field it sets), kept as data below.
"""

from __future__ import annotations

import re
from typing import Any

# Terraform resource type -> (apiVersion, kind).
KINDS: dict[str, tuple[str, str]] = {
    "kubernetes_namespace_v1": ("v1", "Namespace"),
    "kubernetes_service_account_v1": ("v1", "ServiceAccount"),
    "kubernetes_config_map_v1": ("v1", "ConfigMap"),
    "kubernetes_deployment_v1": ("apps/v1", "Deployment"),
    "kubernetes_service_v1": ("v1", "Service"),
    "kubernetes_pod_disruption_budget_v1": ("policy/v1", "PodDisruptionBudget"),
    "kubernetes_horizontal_pod_autoscaler_v2": ("autoscaling/v2", "HorizontalPodAutoscaler"),
    "kubernetes_role_v1": ("rbac.authorization.k8s.io/v1", "Role"),
    "kubernetes_role_binding_v1": ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    "kubernetes_cluster_role_v1": ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    "kubernetes_cluster_role_binding_v1": ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    "kubernetes_api_service_v1": ("apiregistration.k8s.io/v1", "APIService"),
    "kubernetes_network_policy_v1": ("networking.k8s.io/v1", "NetworkPolicy"),
}
# Blocks the provider names in the singular where the API's field is a list.
PLURAL = {
    "container": "containers",
    "init_container": "initContainers",
    "volume": "volumes",
    "volume_mount": "volumeMounts",
    "toleration": "tolerations",
    "metric": "metrics",
    "policy": "policies",
    "port": "ports",
    "env": "env",
    "rule": "rules",
    "subject": "subjects",
    # NetworkPolicy: the provider names these as the API does, lists even of one.
    "ingress": "ingress",
    "egress": "egress",
    "from": "from",
    "to": "to",
    "ports": "ports",
    # A projected volume (the wake pod's own token): its sources and a ConfigMap's items are
    # lists under the API's own names.
    "sources": "sources",
    "items": "items",
}
# Blocks that are lists in the provider and lists in the API (everything else nested is one).
LISTS = frozenset(PLURAL)
# Fields that are integers in the API and strings in the provider's schema. A NetworkPolicy
# port is IntOrString: the provider parses its string (intstr.Parse), so digits send a number.
INTEGERS = frozenset({"replicas", "port"})
# Fields only the provider knows (how it waits, what it ignores).
PROVIDER_ONLY = frozenset(
    {"wait_for_rollout", "wait_for_load_balancer", "timeouts", "lifecycle_ignore", "depends_on"}
)
# Top-level fields of an object beside metadata (ServiceAccount, ConfigMap) that are not `spec`.
TOP_LEVEL = frozenset(
    {
        "data",
        "automount_service_account_token",
        "binary_data",
        "immutable",
        "rule",
        "role_ref",
        "subject",
    }
)
_CAMEL = re.compile(r"_([a-z0-9])")
# The Kubernetes provider's `metric` block is a list at spec level, one object under `pods`.
_SINGLE_UNDER = {"pods": {"metric"}}


# API fields whose acronym the API spells in capitals (APIService, PolicyRule).
_ACRONYMS = {
    "insecure_skip_tls_verify": "insecureSkipTLSVerify",
    "non_resource_urls": "nonResourceURLs",
}


def camel(key: str) -> str:
    return _ACRONYMS.get(key) or _CAMEL.sub(lambda m: m[1].upper(), key)


def _convert(value: Any, key: str = "", parent: str = "") -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in PROVIDER_ONLY:
                continue
            block = isinstance(v, list) and all(isinstance(i, dict) for i in v)
            if k in LISTS and block and k not in _SINGLE_UNDER.get(key, set()):
                items = v
                out[PLURAL[k]] = [_convert(i, k, key) for i in items]
            elif k in ("labels", "annotations", "node_selector", "match_labels", "selector") and (
                isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
            ):
                # String maps keep their keys verbatim (label keys are not field names).
                out[camel(k)] = dict(v)
            elif k in ("data", "volume_attributes", "limits", "requests"):
                out[camel(k)] = dict(v)
            else:
                out[camel(k)] = _convert(v, k, key)
        return out
    if isinstance(value, list):
        # A one-element list of a nested block is that block.
        if len(value) == 1 and isinstance(value[0], dict):
            return _convert(value[0], key, parent)
        return [_convert(v, key, parent) for v in value]
    if key in INTEGERS and isinstance(value, str) and value.isdigit():
        return int(value)
    if key == "default_mode" and isinstance(value, str):
        return int(value, 8)
    return value


def manifest(resource_type: str, body: dict[str, Any]) -> dict[str, Any]:
    """One typed resource's API object."""
    api_version, kind = KINDS[resource_type]
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    for key, value in body.items():
        if key in PROVIDER_ONLY or key in ("provider", "lifecycle", "//"):
            continue
        if key in TOP_LEVEL and key in PLURAL and isinstance(value, list):
            # RBAC's rules and subjects: lists beside metadata, never a block of one.
            obj[PLURAL[key]] = [_convert(item, key) for item in value]
        elif key in TOP_LEVEL:
            obj[camel(key)] = value if key == "data" else _convert(value, key)
        else:
            obj[camel(key)] = _convert(value, key)
    return obj


def manifests(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every Kubernetes object of a synthesized stack, by Terraform address."""
    out: dict[str, dict[str, Any]] = {}
    for rtype, resources in stack.get("resource", {}).items():
        for name, body in resources.items():
            if rtype in KINDS:
                out[f"{rtype}.{name}"] = manifest(rtype, body)
            elif rtype == "kubernetes_manifest":
                out[f"{rtype}.{name}"] = body["manifest"]
    return out
