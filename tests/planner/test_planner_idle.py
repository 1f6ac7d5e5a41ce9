"""`make check`'s idle-stop line (issue 39): what the stop saves and costs at the planner's rates,
with the example's assumptions stated. Expected figures are worked out here from the seed's spot
rate ($0.5779/chip-hour), its flex-start rate in us-west4 ($0.60/chip-hour) and the build log's
boot times (497 s warm, 857 s cold)."""

from __future__ import annotations

from tpudeploy.config import parse_config
from tpudeploy.planner.tables import synth_summary

SPOT_RATE = 0.5779
FLEX_RATE = 0.60


def idle(data: dict[str, object]) -> list[str]:
    return [line for line in synth_summary(parse_config(data)) if line.startswith("idle stop")]


def test_on_it_says_the_saving_the_example_and_the_boot_it_costs() -> None:
    (line,) = idle({"provisioning": "spot", "idle": {"stop_after": "45m"}})
    assert line.startswith("idle stop: after 45 min with no request the node deletes itself")
    assert f"saving ${SPOT_RATE:.4f} per idle hour" in line
    # 8 h deadline; busy 2 h, then 45 min idle: 2.75 h billed instead of 8 h.
    assert f"bills ${2.75 * SPOT_RATE:.2f} instead of ${8 * SPOT_RATE:.2f}" in line
    assert "$1.59 instead of $4.62" in line
    # The next deploy's boot, billed: 497 s warm ($0.08), 857 s cold ($0.14).
    assert "497 s warm with the compile cache, 857 s cold: $0.08-$0.14" in line
    # The grant it needs reaches the project's other TPU nodes: said where the user decides.
    assert "tpu.nodes.delete on every TPU node of the project until the deadline" in line


def test_off_it_says_what_turning_it_on_would_save() -> None:
    (line,) = idle({"provisioning": "spot"})
    assert line.startswith('idle stop: off; [idle] stop_after = "30m" would end the billing')
    assert "$1.44 instead of $4.62" in line  # 2.5 h instead of 8 h


def test_no_example_when_the_deadline_is_too_short_for_it() -> None:
    (line,) = idle({"provisioning": "spot", "max_run_duration": "2h"})
    assert "instead of" not in line and "per idle hour" in line


def test_flex_start_saves_until_the_runs_end_and_queues_again() -> None:
    """The default deployment (flex-start, max_run_duration 4 h): the saving runs to the run's
    end at flex-start's rate, and the next deploy waits for flex-start capacity again."""
    (line,) = idle({"idle": {"stop_after": "30m"}})
    assert line.startswith(
        "idle stop: after 30 min with no request the node deletes its queued resource"
    )
    assert f"saving ${FLEX_RATE:.4f} per idle hour before the run's end" in line
    # 4 h run; busy 2 h, then 30 min idle: 2.5 h billed instead of 4 h.
    assert f"bills ${2.5 * FLEX_RATE:.2f} instead of ${4 * FLEX_RATE:.2f}" in line
    assert "$1.50 instead of $2.40" in line
    assert "queues for flex-start capacity again" in line
    assert "tpu.queuedResources.delete on every queued resource of the project" in line
    (off,) = idle({})
    assert off.startswith('idle stop: off; [idle] stop_after = "30m" would end the billing')
    assert "$1.50 instead of $2.40" in off


def test_nothing_where_it_does_not_apply() -> None:
    assert idle({"provisioning": "spot", "max_run_duration": "none"}) == []
