"""A kubernetes provider resource's Terraform values -> the API object it sends, driven by the
API's own OpenAPI schemas (kubernetes-validate's, for the cluster's minor), so that any typed
resource type works without a table of its fields.

The provider spells objects in Terraform's shape (its kubernetes_*_v1 docs name every block
after the API field it sets): snake_case names, a repeated field under its singular name
(`container` for containers), a nested object as a one-element block list, numbers in strings
where the schema says string. Each name is matched to the API field that exists in the schema
at that point; a name that matches none is kept (camelCase) so that validation refuses it.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

# Arguments of the provider itself (its docs: how it waits, its timeouts); never sent.
PROVIDER_ONLY = frozenset(
    {
        "id",
        "timeouts",
        "wait_for_rollout",
        "wait_for_load_balancer",
        "wait_for_default_service_account",
        "wait_for_completion",
        "wait_for_rollout_status",
    }
)
Json = dict[str, Any]


@cache
def definitions(minor: str) -> Json:
    import kubernetes_validate  # type: ignore[import-untyped]

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = root / f"v{minor}-local-strict" / "_definitions.json"
    loaded: Json = json.loads(path.read_text())["$defs"]
    return loaded


def kind_for(type_name: str, minor: str) -> tuple[str, str, str] | None:
    """kubernetes_horizontal_pod_autoscaler_v2 -> ("autoscaling/v2", "HorizontalPodAutoscaler",
    its definition); None for a type that is no API kind (kubernetes_manifest, _labels ...)."""
    stem = type_name.removeprefix("kubernetes_")
    m = re.fullmatch(r"(.+?)_(v\d+(?:(?:alpha|beta)\d+)?)", stem)
    name, version = (m[1], m[2]) if m else (stem, "v1")
    wanted = name.replace("_", "")
    for def_name, schema in definitions(minor).items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            if gvk["kind"].lower() == wanted and gvk["version"] == version:
                group = gvk["group"]
                return (f"{group}/{version}" if group else version), gvk["kind"], def_name
    return None


def _resolve(node: Json, defs: Json) -> Json:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    return node


def _field(name: str, properties: Json) -> str:
    head, *rest = name.split("_")
    camel = head + "".join(w.title() for w in rest)
    # Case aside: the provider writes insecure_skip_tls_verify for insecureSkipTLSVerify.
    by_lower = {key.lower(): key for key in properties}
    for candidate in (camel, camel + "s", camel + "es", camel[:-1] + "ies"):
        if candidate.lower() in by_lower:
            return by_lower[candidate.lower()]
    return camel


def to_api(value: Any, node: Json, defs: Json) -> Any:
    node = _resolve(node, defs)
    types = node.get("type") or []
    types = [types] if isinstance(types, str) else types
    if isinstance(value, list) and "array" not in types:
        # A block list where the API has one object (or a scalar): its one element.
        if not value:
            return None
        value = value[0]
    if isinstance(value, dict):
        properties = node.get("properties")
        if properties is None:  # a map (labels, data, limits): keys verbatim
            return {k: v for k, v in value.items() if v is not None}
        out: Json = {}
        for name, item in value.items():
            if name in PROVIDER_ONLY or item is None or item == []:
                continue
            field = _field(name, properties)
            converted = to_api(item, properties.get(field, {}), defs)
            if converted is not None:
                out[field] = converted
        return out
    if isinstance(value, list):
        return [to_api(item, node.get("items", {}), defs) for item in value]
    if isinstance(value, str) and value.isdigit() and ("integer" in types or _int_or_string(node)):
        # int-or-string and integer fields arrive as strings; an octal mode keeps its base.
        return int(value, 8) if value.startswith("0") and len(value) > 1 else int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _int_or_string(node: Json) -> bool:
    return bool(node.get("format") == "int-or-string" or node.get("oneOf"))


def manifest(type_name: str, values: Json, minor: str) -> Json | None:
    """The API object of one typed resource, or None for a type that is no API kind."""
    found = kind_for(type_name, minor)
    if found is None:
        return None
    api_version, kind, def_name = found
    defs = definitions(minor)
    body = to_api(values, defs[def_name], defs)
    return {"apiVersion": api_version, "kind": kind, **body}
