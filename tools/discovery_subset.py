"""Writes the part of a Google API discovery document that one resource's JSON needs: the schema
named and every schema it reaches through $ref, with the document's id and revision.

    python -m tools.discovery_subset DOC.json Dashboard \
        > schemas/discovery/monitoring.v1.Dashboard.json

DOC is a discovery document as google-api-python-client ships it
(googleapiclient/discovery_cache/documents/). tools/rehearsal/fakes/monitoring_rules.py
validates against these files.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def reached(schemas: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    """The schemas `roots` name and every schema they reach through $ref."""
    out: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out[name] = schemas[name]

        def walk(node: object) -> None:
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str):
                    todo.append(ref)
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)

        walk(schemas[name])
    return dict(sorted(out.items()))


def subset(document: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    return {
        "id": document["id"],
        "revision": document["revision"],
        "roots": roots,
        "schemas": reached(document["schemas"], roots),
    }


def main(argv: list[str]) -> int:
    path, *roots = argv
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    json.dump(subset(document, roots), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
