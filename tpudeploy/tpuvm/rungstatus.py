"""`make status`'s capacity-ladder line: which rung runs, since when, and why the ones above it
were skipped, from the record `make deploy`'s walk wrote (tpudeploy/deploywalk.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tpudeploy.config import DeployConfig, config_path
from tpudeploy.config.ladder import RUNG_LABEL, record_path


def rung_lines(
    cfg: DeployConfig, *, config_file: Path | None = None, labels: dict[str, str] | None = None
) -> list[str]:
    """Nothing without a ladder; else the rung in use and what the walk recorded. `labels`: the
    node's, when the caller has them (the node says which rung it is)."""
    if cfg.rung_index is None:
        return []
    total, number = len(cfg.capacity), cfg.rung_index + 1
    rung = cfg.capacity[cfg.rung_index]
    line = f"capacity: rung {number} of {total} ({rung.label()})"
    path = record_path(config_file or config_path(), cfg.name)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    if isinstance(record, dict) and record.get("rung") == number:
        line += f", deployed {record.get('since', '?')}"
        skipped = record.get("skipped") or []
        if skipped:
            line += "; skipped " + "; ".join(
                f"rung {s.get('rung')} ({s.get('kind')})" for s in skipped if isinstance(s, dict)
            )
    else:
        line += (
            " (no record of a walk on this machine: the first rung, or TPUDEPLOY_RUNG; "
            "`make deploy` records the rung it reaches)"
        )
    lines = [line]
    said = (labels or {}).get(RUNG_LABEL)
    if said is not None and said != str(number):
        lines.append(
            f"capacity: the node's label says rung {said}, this machine's record rung {number}: "
            f"run `make deploy` (or set TPUDEPLOY_RUNG={said}) before acting on it"
        )
    return lines
