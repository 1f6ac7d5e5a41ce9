"""Parse human durations ("4h", "90m", "1h30m", "14400") into whole seconds, at most 7 days."""

from __future__ import annotations

import re

# Flex-start's max run duration is capped at 7 days by the TPU API; the seed's runs used 4h. A
# spot or on-demand deadline (and `make extend`) keeps to the same week: a node nobody looked at
# for seven days was forgotten.
MAX_DURATION_SECONDS = 7 * 24 * 3600
# A spot/on-demand deadline job is created seconds after its deadline is computed, in the same
# apply; a deadline that passed before its job existed would first fire a year later (the cron
# has no year), so such a max_run_duration is at least this long.
MIN_DEADLINE_SECONDS = 15 * 60

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_COMBO = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_EXAMPLES = "use e.g. '4h', '90m', '2d', '45s', '1h30m' or plain seconds '14400'"


class DurationError(ValueError):
    """A value that is not a duration: "name: reason; fix", with reason and fix kept apart for
    messages that name the key themselves (the config's)."""

    def __init__(self, name: str, reason: str, fix: str = _EXAMPLES) -> None:
        self.reason, self.fix = reason, fix
        super().__init__(f"{name}: {reason}; {fix}")


def parse_duration(text: str | int, *, name: str = "duration") -> int:
    """Return the number of seconds in `text`; raise DurationError naming `name`, value and fix."""
    if isinstance(text, bool):
        raise DurationError(name, f"{str(text).lower()} is not a duration")
    if isinstance(text, int):
        seconds = text
    elif isinstance(text, str):
        cleaned = text.strip().lower()
        if not cleaned:
            raise DurationError(name, "empty duration")
        if cleaned.isdigit():
            seconds = int(cleaned)
        else:
            match = _COMBO.fullmatch(cleaned)
            if match is None or not any(match.groups()):
                raise DurationError(
                    name,
                    f"{text!r} is not a duration (units d, h, m, s in that order, "
                    "whole numbers only)",
                )
            seconds = sum(
                int(value) * _UNIT_SECONDS[unit]
                for value, unit in zip(match.groups(), "dhms", strict=True)
                if value is not None
            )
    else:
        raise DurationError(name, f"{text!r} is not a duration")
    if seconds <= 0:
        raise DurationError(name, f"{text!r} must be longer than 0 seconds")
    if seconds > MAX_DURATION_SECONDS:
        raise DurationError(
            name,
            f"{text!r} is {seconds} s, over the 7-day maximum ({MAX_DURATION_SECONDS} s: "
            "flex-start accepts no longer run, and a deadline stays within a week)",
            "use at most '7d'",
        )
    return seconds
