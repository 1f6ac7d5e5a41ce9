"""The idle watcher's "stops soon" entry (issue 38's alert on issue 39's idle stop): when, what
it says, that it is written once per idle spell, in the log contract's names, and that the
deployment's alert filter matches it and nothing else."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.node.test_idlewatch import Recorder, server, watcher  # noqa: F401 - the loopback fixture
from tools.rehearsal.fakes.logging_rules import parse_filter
from tpudeploy import logsources, stopsoon
from tpudeploy.config import parse_config
from tpudeploy.node.idlewatch import Verdict, soon_entry, warn_before


@pytest.mark.parametrize(
    ("stop_after", "margin"),
    [(900.0, 150.0), (1800.0, 300.0), (7200.0, 300.0)],
)
def test_the_warning_comes_a_sixth_of_stop_after_ahead_at_most_five_minutes(
    stop_after: float, margin: float
) -> None:
    assert warn_before(stop_after) == margin
    # The reading interval (60 s) fits in the margin of the shortest stop_after at least twice.
    assert warn_before(900.0) >= 2 * 60


def test_the_entry_says_when_the_stop_comes_in_the_contracts_names() -> None:
    at = datetime(2026, 12, 3, 12, 0, tzinfo=UTC).timestamp()
    assert soon_entry(Verdict("idle", 1499.0), 1800.0, at) is None  # 301 s before the stop
    assert soon_entry(Verdict("busy", 0.0), 1800.0, at) is None
    entry = soon_entry(Verdict("idle", 1560.0), 1800.0, at)
    assert entry == {
        "phase": logsources.IDLE_PHASE,
        "event": logsources.STOPS_SOON_EVENT,
        "elapsed_s": 1560,
        "stop_after_s": 1800,
        logsources.STOPS_AT_FIELD: "2026-12-03T12:04:00Z",  # 240 s after `at`
    }


IDLE = {"stop_after": "30m"}


def _boot_entry(name: str, payload: dict[str, object]) -> dict[str, object]:
    return {
        "logName": f"projects/p/logs/{logsources.TPUVM_LOG_IDS['boot']}",
        "labels": {logsources.DEPLOYMENT_LABEL: name},
        "jsonPayload": payload,
    }


def test_each_deployments_idle_alert_matches_its_own_warning_only() -> None:
    alpha, beta = (
        parse_config({"project": "my-proj-123", "provisioning": "spot", "name": n, "idle": IDLE})
        for n in ("alpha", "beta")
    )
    warning = soon_entry(Verdict("idle", 1600.0), 1800.0, 1.7e9)
    assert warning is not None
    matches = parse_filter(stopsoon.idle_filter(alpha))
    assert matches(_boot_entry("alpha", warning))
    assert not matches(_boot_entry("beta", warning))  # the other deployment's node
    assert not matches(_boot_entry("alpha", {"phase": "compile", "event": "end", "elapsed_s": 9}))
    assert parse_filter(stopsoon.idle_filter(beta))(_boot_entry("beta", warning))


def test_a_real_run_writes_one_warning_before_the_stop(
    server: tuple[str, Recorder],  # noqa: F811
    tmp_path: Path,
) -> None:
    base, rec = server
    boot_log = tmp_path / "boot.log"
    done = watcher(base, 80, 1.2, interval=0.05, extra=("--boot-log", str(boot_log)))
    assert done.returncode == 0, done.stderr
    assert [c for c in rec.calls if c[0] == "DELETE"], "the idle node stopped"
    lines = [json.loads(x) for x in boot_log.read_text().splitlines()]
    assert len(lines) == 1, lines  # once per idle spell, not at every reading
    (entry,) = lines
    assert entry["event"] == logsources.STOPS_SOON_EVENT
    # Written within warn_before (0.2 s) of the stop: idle for at least 1.0 of the 1.2 s.
    assert entry["elapsed_s"] >= 1 and entry["stop_after_s"] == 1
    stops = datetime.fromisoformat(entry[logsources.STOPS_AT_FIELD].replace("Z", "+00:00"))
    assert abs((stops - datetime.now(UTC)).total_seconds()) < 30
