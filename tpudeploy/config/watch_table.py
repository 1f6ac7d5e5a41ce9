"""`[watch]`: the scheduled upstream watch (upstream-watch.yml), off by default."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from tpudeploy.config.base import Strict
from tpudeploy.durations import MAX_DURATION_SECONDS, DurationError, parse_duration
from tpudeploy.watchrunner import EXAMPLE, runner_problem

# GitHub's schedule event takes POSIX cron: five fields, minute hour day month weekday
# (https://docs.github.com/actions/reference/events-that-trigger-workflows#schedule: "The
# shortest interval you can run scheduled workflows is once every 5 minutes").
_CRON_FIELD = r"[0-9*/,\-A-Za-z]+"
CRON_RE = re.compile(rf"^{_CRON_FIELD}( {_CRON_FIELD}){{4}}$")
# A GitHub-hosted job runs at most 6 hours ("Each job in a workflow can run for up to 6 hours of
# execution time", docs.github.com/actions/reference/limits): the watch's time limit is its
# job's, so it cannot be longer.
JOB_LIMIT_SECONDS = 6 * 3600
# One cold boot of the build log (857 s) and the shortest sweep do not fit in less.
MIN_TIME_LIMIT_SECONDS = 30 * 60


class WatchConfig(Strict):
    """The upstream watch: boot each new vllm-tpu build on a flex-start node, judge it against
    the pinned one, and propose the pin only when it wins (docs/tuning.md, "Upstream watch")."""

    enabled: bool = False
    """false (default): the workflow's first step stops; true: it runs on `schedule`"""
    budget_usd: float = 20.0
    """the most one run may cost: refused when its worst case (printed by make check) is above"""
    time_limit: str | int = "3h"
    """the run's wall clock: its job's timeout and each watch node's max_run_duration"""
    schedule: str = "17 6 * * 1"
    """POSIX cron (UTC) of the workflow; checked against the workflow file by the tests"""
    tag: str = ""
    """the tag to follow; empty: the tag of [vllm] image (vllm/vllm-tpu:nightly -> nightly)"""
    runner: list[str] = Field(default_factory=list, examples=[list(EXAMPLE)])
    """paid job's self-hosted runner labels, "self-hosted" first; empty: only report new builds"""

    @field_validator("budget_usd")
    @classmethod
    def _budget(cls, v: float) -> float:
        if not v > 0:
            raise ValueError("must be a positive number of dollars; e.g. 20.0")
        return v

    @field_validator("time_limit")
    @classmethod
    def _time_limit(cls, v: str | int) -> str | int:
        try:
            seconds = parse_duration(v, name="time_limit")
        except DurationError as exc:
            raise ValueError(f"{exc.reason}; {exc.fix}") from None
        if not MIN_TIME_LIMIT_SECONDS <= seconds <= min(JOB_LIMIT_SECONDS, MAX_DURATION_SECONDS):
            raise ValueError(
                "must be between 30m (one cold boot and a short sweep) and 6h (a GitHub-hosted "
                "job's limit, which is the watch's); e.g. '3h'"
            )
        return v

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        if not CRON_RE.fullmatch(v.strip()):
            raise ValueError(
                "not a five-field cron expression (minute hour day month weekday, UTC); e.g. "
                "'17 6 * * 1' for Mondays at 06:17"
            )
        return v.strip()

    @field_validator("tag")
    @classmethod
    def _tag(cls, v: str) -> str:
        # Docker's tag grammar: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}.
        if v and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}", v):
            raise ValueError("not a Docker tag (letters, digits, '_', '.', '-'); e.g. 'nightly'")
        return v

    @field_validator("runner")
    @classmethod
    def _runner(cls, v: list[str]) -> list[str]:
        # A GitHub-hosted runner cannot reach the watch node (tpudeploy/watchrunner.py says why).
        problem = runner_problem(v)
        if problem:
            raise ValueError(f"{problem[0]}; {problem[1]}")
        return v

    @property
    def time_limit_seconds(self) -> int:
        return parse_duration(self.time_limit, name="time_limit")
