"""Write a proposed pin into the deployment file (standard library only: the pull-request job
runs it without `make install`, holding a token that writes to the repository).

    python3 -m tpudeploy.upstream.pinfile watch-out deployments/staging.toml
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

PIN_JSON = "pin.json"
# tpudeploy.upstream.registry.IMAGE_RE's pinned form: repository[:tag]@sha256:<64 hex>.
PINNED_IMAGE = re.compile(
    r"^[a-z0-9]+(?:[._-][a-z0-9]+)*/[a-z0-9]+(?:[._-][a-z0-9]+)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?@sha256:[0-9a-f]{64}$"
)


class PinError(ValueError):
    """The pin cannot be written; the message says why."""


def apply_pin(artifact: Path, deployment: Path) -> str:
    """Rewrite the deployment file's pinned image to the proposed one: exactly one occurrence of
    the old reference, in quotes, or nothing changes."""
    pin = json.loads((artifact / PIN_JSON).read_text(encoding="utf-8"))
    for key in ("old", "new"):
        if not isinstance(pin.get(key), str) or not PINNED_IMAGE.fullmatch(pin[key]):
            raise PinError(f"{artifact / PIN_JSON}: {key} is not a pinned Docker Hub image")
    old, new = f'"{pin["old"]}"', f'"{pin["new"]}"'
    text = deployment.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise PinError(
            f"{deployment}: the pinned image {old} occurs {text.count(old)} times, not once; "
            "the pin moved since the watch ran: let the next run judge the new one"
        )
    deployment.write_text(text.replace(old, new), encoding="utf-8")
    return str(pin["new"])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(
            "usage: python3 -m tpudeploy.upstream.pinfile ARTIFACT_DIR DEPLOYMENT", file=sys.stderr
        )
        return 2
    try:
        new = apply_pin(Path(args[0]), Path(args[1]))
    except (PinError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args[1]}: image pinned to {new}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
