"""`make status`'s capacity line: the rung that runs, from the walk's record and the node."""

from __future__ import annotations

import json
from pathlib import Path

from tpudeploy.config import parse_config
from tpudeploy.config.ladder import record_path
from tpudeploy.tpuvm.rungstatus import rung_lines

LADDER = [
    {"provisioning": "spot", "zone": "us-west4-a"},
    {"provisioning": "spot", "zone": "us-central1-a"},
]


def test_no_ladder_no_line(tmp_path: Path) -> None:
    assert rung_lines(parse_config({}), config_file=tmp_path / "deploy.toml") == []


def test_the_recorded_rung_and_what_was_skipped(tmp_path: Path) -> None:
    cfg = parse_config({"capacity": LADDER}, rung=2)
    record = {
        "rung": 2,
        "since": "2026-12-03T09:00:00+00:00",
        "skipped": [
            {"rung": 1, "kind": "stockout", "error": "There is no more capacity in the zone"}
        ],
    }
    record_path(tmp_path / "deploy.toml", cfg.name).write_text(json.dumps(record))
    (line,) = rung_lines(cfg, config_file=tmp_path / "deploy.toml", labels={"tpudeploy-rung": "2"})
    assert line == (
        "capacity: rung 2 of 2 (spot in us-central1-a), deployed 2026-12-03T09:00:00+00:00; "
        "skipped rung 1 (stockout)"
    )


def test_a_node_on_another_rung_than_the_record_is_called_out(tmp_path: Path) -> None:
    cfg = parse_config({"capacity": LADDER})
    lines = rung_lines(cfg, config_file=tmp_path / "deploy.toml", labels={"tpudeploy-rung": "2"})
    assert lines[0].startswith("capacity: rung 1 of 2 (spot in us-west4-a) (no record")
    assert "the node's label says rung 2" in lines[1] and "TPUDEPLOY_RUNG=2" in lines[1]
