"""`[idle]`: a TPU VM that stops its own billing after `stop_after` with no request (issue 39).

The node watches vLLM's request counters on loopback (tpudeploy/node/idlewatch.py) and, after
that long with none, deletes itself as its own account through the deployment's stop role, the
grant ending with the deadline (stacks/deadline_job.py). Off by default: `make check` prints what
turning it on would save at the planner's rates (tpudeploy/planner/idle.py).
"""

from __future__ import annotations

import math

from pydantic import field_validator

from tpudeploy import facts
from tpudeploy.config.base import Strict
from tpudeploy.durations import DurationError, parse_duration

OFF = "off"
# The floor: the cold boot the next deploy pays (facts.COLD_BOOT_S, 857 s), rounded up to whole
# minutes. A stop after less idle time than a boot takes turns an agent's pause shorter than a
# boot into a wait longer than the pause (stop after 5 idle minutes, and the next request waits
# 14 minutes for a cold node): the idle stop must never be the slowest thing in the loop.
MIN_STOP_AFTER_S = math.ceil(facts.COLD_BOOT_S / 60) * 60
# The watcher reads the counters this often on a real node (the rehearsal passes seconds).
INTERVAL_S = 60


class IdleConfig(Strict):
    """The idle stop of a spot or on-demand TPU VM (tpudeploy/node/idlewatch.py)."""

    stop_after: str | int = OFF
    """how long with no request before the node deletes itself, e.g. "30m"; "off" (default)"""

    @field_validator("stop_after", mode="before")
    @classmethod
    def _stop_after(cls, v: object) -> object:
        if isinstance(v, str) and v.strip().lower() == OFF:
            return OFF
        try:
            seconds = parse_duration(v)  # type: ignore[arg-type]
        except DurationError as exc:
            raise ValueError(f'{exc.reason}; {exc.fix}, or "{OFF}"') from None
        if seconds < MIN_STOP_AFTER_S:
            raise ValueError(
                f"an idle stop under {MIN_STOP_AFTER_S // 60} minutes: the next request after a "
                f"stop waits for a whole boot ({facts.COLD_BOOT_S:.0f} s cold, "
                f"{facts.WARM_BOOT_S:.0f} s warm), longer than the pause that stopped the node; "
                f'use at least "{MIN_STOP_AFTER_S // 60}m"'
            )
        return v

    @property
    def seconds(self) -> int | None:
        """The idle time before the stop; None when off."""
        if self.stop_after == OFF:
            return None
        return parse_duration(self.stop_after, name="idle.stop_after")
