"""Write config data back as TOML (tomllib only reads): the arm files `make tune` deploys.

Covers what a deployment config holds: strings, whole numbers, floats, booleans, dates, lists of
those, and tables (nested tables as `[a.b]` headers, lists of tables are not used by the schema).
tests/tune/test_tune.py checks that tomllib reads every output back to the same data.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping
from typing import Any


def _key(key: str) -> str:
    bare = key and all(c.isalnum() or c in "-_" for c in key) and key.isascii()
    return key if bare else json.dumps(key)


def _value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return ("-" if value < 0 else "") + ("nan" if math.isnan(value) else "inf")
        return repr(value)
    if isinstance(value, str):
        # JSON's escapes are TOML basic-string escapes for everything json.dumps emits.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v, where)}" for k, v in value.items()) + "}"
    raise TypeError(f"{where}: {type(value).__name__} has no TOML form")


def dumps(data: Mapping[str, Any], *, header: str = "") -> str:
    """TOML text for `data`; `header` (comment lines without '#') goes first."""
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    tables: list[tuple[str, Mapping[str, Any]]] = []

    def emit(prefix: str, table: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
        nested = {k: v for k, v in table.items() if isinstance(v, Mapping)}
        if prefix and (scalars or not nested):
            out.append("")
            out.append(f"[{prefix}]")
        for k, v in scalars.items():
            out.append(f"{_key(k)} = {_value(v, f'{prefix}.{k}' if prefix else k)}")
        for k, v in nested.items():
            tables.append((f"{prefix}.{_key(k)}" if prefix else _key(k), v))

    emit("", data)
    while tables:
        prefix, table = tables.pop(0)
        emit(prefix, table)
    return "\n".join(out).lstrip("\n") + "\n"
