"""The one spelling of elapsed and estimated time on progress lines: 45s, 5m07s, 1h02m05s."""

from __future__ import annotations


def format_seconds(seconds: float) -> str:
    """Whole seconds (rounded down; below zero is 0s) as 45s, 5m07s or 1h02m05s.

    Every unit after the first is two digits wide, so a line that `make wait` redraws in place
    never gets shorter as time passes; `durations.parse_duration` reads the result back.
    """
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
