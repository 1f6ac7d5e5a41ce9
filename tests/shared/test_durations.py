"""Tests for tpudeploy.durations: every accepted spelling and every rejection."""

from __future__ import annotations

import pytest

from tpudeploy.durations import MAX_DURATION_SECONDS, parse_duration

HOUR = 60 * 60
DAY = 24 * HOUR


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("4h", 4 * HOUR),
        ("90m", 90 * 60),
        ("2d", 2 * DAY),
        ("45s", 45),
        ("14400", 4 * HOUR),
        (14400, 4 * HOUR),
        ("1h30m", HOUR + 30 * 60),
        ("1d2h3m4s", DAY + 2 * HOUR + 3 * 60 + 4),
        (" 4H ", 4 * HOUR),
        ("7d", 7 * DAY),
        (7 * DAY, 7 * DAY),
    ],
)
def test_accepted_forms(text: str | int, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("0", "longer than 0"),
        (0, "longer than 0"),
        (-5, "longer than 0"),
        ("-5m", "not a duration"),
        ("1.5h", "not a duration"),
        ("4x", "not a duration"),
        ("h", "not a duration"),
        ("30m1h", "not a duration"),
        ("4 h", "not a duration"),
        ("8d", "7-day maximum"),
        ("169h", "7-day maximum"),
        (7 * DAY + 1, "7-day maximum"),
        (True, "not a duration"),
        (None, "not a duration"),
        (4.5, "not a duration"),
    ],
)
def test_rejections_name_key_value_and_fix(text: object, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text, name="max_run_duration")  # type: ignore[arg-type]
    message = str(info.value)
    assert fragment in message
    assert message.startswith("max_run_duration:")
    assert "\n" not in message


def test_max_is_seven_days() -> None:
    assert MAX_DURATION_SECONDS == 7 * DAY
