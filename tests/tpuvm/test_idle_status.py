"""`make status` with [idle] stop_after (issue 39): what the node's watcher last published as
the guest attribute tpudeploy/idle, read through the TPU API without SSH."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fake_scheduler_api import FakeSchedulerApi
from tests.fake_tpu_api import FakeTpuApi
from tests.tpuvm.test_status import PROJECT, _spot_node, fake, google, use_config  # noqa: F401
from tpudeploy.cli import main
from tpudeploy.config import parse_config
from tpudeploy.tpuvm.guestattributes import idle_lines

IDLE = {"project": PROJECT, "provisioning": "spot", "idle": {"stop_after": "30m"}}
NODE = f"projects/{PROJECT}/locations/us-west4-a/nodes/gemma4-v5e"


def seen(state: str, idle_s: int, at: float) -> dict[str, str]:
    value = {"state": state, "idle_s": idle_s, "stop_after_s": 1800, "at": int(at)}
    return {"idle": json.dumps(value)}


def test_make_status_says_idle_for_12_min_stops_at_30(
    fake: FakeTpuApi,  # noqa: F811
    google: FakeSchedulerApi,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(
        monkeypatch,
        tmp_path,
        f'project = "{PROJECT}"\nprovisioning = "spot"\n[idle]\nstop_after = "30m"\n',
    )
    _spot_node(fake)
    value = seen("idle", 12 * 60 + 40, time.time())["idle"]
    assert fake.set_guest_attribute(NODE, "tpudeploy/idle", value)
    assert main(["status"]) == 0
    assert "idle for 12 min, stops at 30" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("state", "idle_s", "says"),
    [
        ("busy", 0, "serving: a request ran since the last reading; idle stop after 30 min"),
        ("stop", 1800, "idle for 30 min, stops at 30"),
        ("stopping", 1815, "idle for 30 min: the node deleted itself (idle stop)"),
        ("unreadable", 0, "an unread counter never counts as idle"),
    ],
)
def test_each_state_in_words(state: str, idle_s: int, says: str) -> None:
    (line,) = idle_lines(parse_config(IDLE), seen(state, idle_s, 1000.0), now=1010.0)
    assert says in line and "ago" not in line


def test_a_value_the_watcher_stopped_refreshing_says_how_old_it_is() -> None:
    (line,) = idle_lines(parse_config(IDLE), seen("idle", 600, 1000.0), now=1000.0 + 20 * 60)
    assert line == "idle for 10 min, stops at 30 (as of 20 min ago: the watcher stopped reporting)"


def test_before_ready_and_when_off() -> None:
    (line,) = idle_lines(parse_config(IDLE), {})
    assert "not watching yet" in line
    assert idle_lines(parse_config({"project": PROJECT, "provisioning": "spot"}), {}) == []
    (bad,) = idle_lines(parse_config(IDLE), {"idle": "{}"})
    assert "not the watcher's" in bad


def test_after_an_idle_stop_status_says_nothing_bills_and_the_deadline_stands(
    fake: FakeTpuApi,  # noqa: F811
    google: FakeSchedulerApi,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The node deleted itself; its deadline job is still pending (it fires at the deadline and
    finds nothing). Before: "billing stops: deadline ... (in 5 h)", as if it billed."""
    use_config(
        monkeypatch,
        tmp_path,
        f'project = "{PROJECT}"\nprovisioning = "spot"\n[idle]\nstop_after = "30m"\n',
    )
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=5)
    google.set_job(
        f"projects/{PROJECT}/locations/us-west4/jobs/gemma4-v5e-deadline", schedule_time=at
    )
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "NOT_FOUND" in out
    assert f"nothing is billing: no node before its deadline {at:%Y-%m-%dT%H:%M}" in out
    assert "`make deploy` creates it again with this deadline" in out
    assert "billing stops" not in out
