"""The watch workflow's first step (standard library only: it runs before `make install`): is the
watch on for this deployment file, and what the later jobs need (names, limits), as outputs.

    python3 -m tpudeploy.upstream.gate deployments/staging.toml >> "$GITHUB_OUTPUT"

Off unless the repository variable names a deployment file AND its `[watch] enabled = true`; the
full validation (budget, schedule, names) is `make check`'s, in the next job.
"""

from __future__ import annotations

import math
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

from tpudeploy.durations import DurationError, parse_duration

# tpudeploy.config.watch_table's defaults, repeated because this step cannot import pydantic;
# tests/upstream/test_gate.py holds the two equal.
DEFAULT_TIME_LIMIT = "3h"
# The destroy after a cancelled run is the next run's: the job's own destroy gets this margin.
DESTROY_MARGIN_MINUTES = 20


def gate(path: str, *, root: Path = Path(".")) -> dict[str, str]:
    """The outputs for `path` (a deployments/*.toml file, relative to root), `enabled=false`
    with the reason when the watch is off."""
    if not path:
        return {
            "enabled": "false",
            "reason": "the repository variable UPSTREAM_WATCH_CONFIG is unset",
        }
    file = (root / path).resolve()
    deployments = (root / "deployments").resolve()
    if file.parent != deployments or file.suffix != ".toml" or not file.is_file():
        return {
            "enabled": "false",
            "reason": f"UPSTREAM_WATCH_CONFIG = {path!r} is not a deployments/*.toml file",
        }
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        return {"enabled": "false", "reason": f"{path}: not valid TOML ({exc})"}
    watch = data.get("watch", {})
    if not isinstance(watch, dict) or watch.get("enabled") is not True:
        return {"enabled": "false", "reason": f"{path}: [watch] enabled is not true"}
    name = str(data.get("name", ""))
    try:
        limit = parse_duration(watch.get("time_limit", DEFAULT_TIME_LIMIT), name="time_limit")
    except DurationError as exc:
        return {"enabled": "false", "reason": f"{path}: watch.{exc}"}
    return {
        "enabled": "true",
        "reason": "",
        "config": f"deployments/{file.name}",
        "name": name,
        "environment": f"{name}-watch",
        "deploy_account": f"{name}-watch-apply",
        "timeout_minutes": str(math.ceil(limit / 60) + DESTROY_MARGIN_MINUTES),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    outputs = gate(args[0] if args else "")
    for key, value in outputs.items():
        # One line per output (GITHUB_OUTPUT's key=value form): never a newline in a value.
        print(f"{key}={value.replace(chr(10), ' ')}")
    if outputs["enabled"] != "true":
        print(f"upstream watch off: {outputs['reason']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
