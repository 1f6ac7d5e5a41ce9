"""The discovery-document checker the fakes share: a message's fields, types, enums and durations
as an API's vendored discovery document (schemas/discovery/) states them, and the Rule record
every fake's rules module keeps its sources in. Monitoring adds the rules its documents state in
prose (fakes/monitoring_rules.py); Logging and Cloud Scheduler use it as it is."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_DURATION = re.compile(r"-?\d+(\.\d{1,9})?s")


@dataclass(frozen=True, slots=True)
class Rule:
    what: str
    source: str
    quote: str


Extra = Callable[[str, Any, str], list[str]]


def _none(name: str, value: Any, at: str) -> list[str]:
    return []


def walk(
    schemas: dict[str, Any], schema: dict[str, Any], value: Any, at: str, extra: Extra = _none
) -> list[str]:
    """What `schema` (of a discovery document's `schemas`) refuses in `value`, at path `at`;
    `extra(name, value, at)`: the rules an API states in prose for the message `name`."""
    if "$ref" in schema:
        name = schema["$ref"]
        return walk(schemas, schemas[name], value, at, extra) + extra(name, value, at)
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{at}: an object expected, got {value!r}"]
        out = []
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                out += walk(schemas, props[key], item, f"{at}.{key}", extra)
            elif additional is not None:
                out += walk(schemas, additional, item, f"{at}.{key}", extra)
            else:
                out.append(f'{at}: Unknown name "{key}": Cannot find field')
        return out
    if kind == "array":
        if not isinstance(value, list):
            return [f"{at}: a list expected, got {value!r}"]
        out = []
        for i, item in enumerate(value):
            out += walk(schemas, schema["items"], item, f"{at}[{i}]", extra)
        return out
    if kind == "string":
        if not isinstance(value, str):
            # int64 and uint64 travel as strings in proto3 JSON, and are accepted as numbers too.
            if schema.get("format") in ("int64", "uint64") and isinstance(value, int):
                return []
            return [f"{at}: a string expected, got {value!r}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{at}: {value!r} is not one of {schema['enum']}"]
        if schema.get("format") == "google-duration" and not _DURATION.fullmatch(value):
            return [f"{at}: {value!r} is not a duration (e.g. 300s)"]
        return []
    if kind == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{at}: an integer expected, got {value!r}"]
    if kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{at}: a number expected, got {value!r}"]
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{at}: true or false expected, got {value!r}"]
    if kind == "any":
        return []
    return [f"{at}: the schema has type {kind!r}, which this checker does not know"]


def check(schemas: dict[str, Any], root: str, document: Any) -> list[str]:
    """What a discovery document's `schemas` refuse in `document`, a `root` as JSON."""
    return walk(schemas, {"$ref": root}, document, root)
