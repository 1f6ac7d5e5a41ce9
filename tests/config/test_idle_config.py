"""[idle] stop_after (issue 39): off by default, a duration no shorter than a cold boot, and
refused where the idle stop cannot work, each refusal naming the key, the value, why and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from tpudeploy import facts
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.config.idle_table import MIN_STOP_AFTER_S

SPOT: dict[str, Any] = {"provisioning": "spot", "project": "idle-proj"}


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    (line,) = [p for p in caught.value.problems if p.startswith("idle.stop_after")]
    return line


def test_off_by_default() -> None:
    assert parse_config(SPOT).idle.seconds is None
    assert parse_config({**SPOT, "idle": {"stop_after": "OFF"}}).idle.seconds is None


def test_a_duration_on_spot_and_on_demand() -> None:
    assert parse_config({**SPOT, "idle": {"stop_after": "30m"}}).idle.seconds == 1800
    on_demand = {**SPOT, "provisioning": "on-demand", "idle": {"stop_after": 3600}}
    assert parse_config(on_demand).idle.seconds == 3600


def test_the_floor_is_the_cold_boot_rounded_up_to_minutes() -> None:
    assert MIN_STOP_AFTER_S == 900 and MIN_STOP_AFTER_S >= facts.COLD_BOOT_S
    assert parse_config({**SPOT, "idle": {"stop_after": "15m"}}).idle.seconds == 900
    line = refusal({**SPOT, "idle": {"stop_after": "5m"}})
    assert line.startswith("idle.stop_after = '5m': an idle stop under 15 minutes")
    assert "857 s cold" in line and 'Fix: use at least "15m"' in line


def test_not_a_duration() -> None:
    line = refusal({**SPOT, "idle": {"stop_after": "when quiet"}})
    assert "'when quiet' is not a duration" in line and '"off"' in line


@pytest.mark.parametrize(
    ("data", "why", "fix"),
    [
        (
            {"platform": "gke"},
            "scaling to zero (issue 39, [gke] min_replicas = 0)",
            "remove [idle], and use [gke] min_replicas = 0",
        ),
        (
            {"provisioning": "flex-start"},
            "not built for flex-start yet",
            'use provisioning = "spot"',
        ),
        ({**SPOT, "max_run_duration": "none"}, "there is no deadline", "set max_run_duration"),
        (
            {**SPOT, "max_run_duration": "20m"},
            "the deadline (20 min after the deploy) always comes first",
            "use a stop_after shorter than max_run_duration",
        ),
    ],
)
def test_refused_where_it_cannot_work(data: dict[str, Any], why: str, fix: str) -> None:
    line = refusal({"project": "idle-proj", **data, "idle": {"stop_after": "30m"}})
    assert line.startswith("idle.stop_after = '30m': ")
    assert why in line and f"Fix: {fix}" in line


def test_a_pipeline_deployment_is_refused_until_the_bootstrap_grants_the_delete() -> None:
    pipeline = {**SPOT, "pipeline": True, "state_bucket": "idle-proj-state"}
    line = refusal({**pipeline, "idle": {"stop_after": "30m"}})
    assert line.startswith("idle.stop_after = '30m': a pipeline deployment's grants")
    assert "Fix: remove [idle] from a pipeline deployment" in line
    # The same deployment without [idle] is accepted: the refusal is the idle stop's alone.
    assert parse_config(pipeline).idle.seconds is None
