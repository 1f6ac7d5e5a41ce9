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
            {"provisioning": "flex-start", "max_run_duration": "20m"},
            "the run's end (20 min after the deploy) always comes first",
            "use a stop_after shorter than max_run_duration",
        ),
        (
            {**SPOT, "max_run_duration": "none"},
            ': with max_run_duration = "none" there is no deadline, and the node\'s grant to '
            "delete itself ends with the deadline",
            "set max_run_duration",
        ),
        (
            {**SPOT, "max_run_duration": "20m"},
            "the deadline (20 min after the deploy) always comes first",
            "use a stop_after shorter than max_run_duration",
        ),
        # At the deadline itself the deadline job deletes the node first: refused too.
        (
            {**SPOT, "max_run_duration": "30m"},
            "the deadline (30 min after the deploy) always comes first",
            "use a stop_after shorter than max_run_duration",
        ),
    ],
)
def test_refused_where_it_cannot_work(data: dict[str, Any], why: str, fix: str) -> None:
    line = refusal({"project": "idle-proj", **data, "idle": {"stop_after": "30m"}})
    assert line.startswith("idle.stop_after = '30m': ")
    assert why in line and f"Fix: {fix}" in line


def test_flex_start_is_accepted_on_every_rung_that_uses_it() -> None:
    flex = {"project": "idle-proj", "provisioning": "flex-start", "zone": "us-central1-a"}
    assert parse_config({**flex, "idle": {"stop_after": "30m"}}).idle.seconds == 1800
    ladder = {
        "project": "idle-proj",
        "capacity": [
            {"provisioning": "spot", "zone": "us-west4-a"},
            {"provisioning": "flex-start", "zone": "us-central1-a"},
        ],
        "idle": {"stop_after": "30m"},
    }
    assert parse_config(ladder).idle.seconds == 1800


@pytest.mark.parametrize("provisioning", ["spot", "flex-start"])
def test_a_pipeline_deployment_is_refused_and_told_why(provisioning: str) -> None:
    """The bootstrap cannot know a run's deadline and the deploy identity cannot grant one
    (tests/gitops/test_idle_pipeline.py shows both in the synthesized bootstrap)."""
    pipeline = {
        "project": "idle-proj",
        "provisioning": provisioning,
        "pipeline": True,
        "state_bucket": "idle-proj-state",
    }
    line = refusal({**pipeline, "idle": {"stop_after": "30m"}})
    assert line.startswith("idle.stop_after = '30m': a pipeline deployment's grants")
    assert "cannot know a run's deadline" in line
    assert "resourcemanager.projects.setIamPolicy" in line
    assert "Fix: remove [idle] from a pipeline deployment" in line
    # The same deployment without [idle] is accepted: the refusal is the idle stop's alone.
    assert parse_config(pipeline).idle.seconds is None
