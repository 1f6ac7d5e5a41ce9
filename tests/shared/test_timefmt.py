"""tpudeploy.timefmt: the single elapsed-time spelling of every progress line."""

from __future__ import annotations

import pytest

from tpudeploy.durations import MAX_DURATION_SECONDS, parse_duration
from tpudeploy.timefmt import format_seconds

HOUR = 3600
DAY = 24 * HOUR


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (-3, "0s"),
        (0.99, "0s"),
        (45, "45s"),
        (59.999, "59s"),
        (60, "1m00s"),
        (307, "5m07s"),
        (HOUR - 1, "59m59s"),
        (HOUR, "1h00m00s"),
        (HOUR + 2 * 60 + 5, "1h02m05s"),
        (DAY + 61, "24h01m01s"),
    ],
)
def test_spelling(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


def test_a_redrawn_line_never_gets_shorter() -> None:
    widths = [len(format_seconds(s)) for s in range(0, 2 * HOUR)]
    assert widths == sorted(widths)


@pytest.mark.parametrize("seconds", [45, 90 * 60, 4 * HOUR, HOUR + 30 * 60, DAY + 61, 7 * DAY])
def test_round_trips_through_parse_duration(seconds: int) -> None:
    assert seconds <= MAX_DURATION_SECONDS
    assert parse_duration(format_seconds(seconds)) == seconds
