"""make tune runs `make accept` on each arm before its sweep counts (issue 42): an arm that fails
a row is not benched, not booted again, and ranked out with the row named."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.tune.test_tune import FakeMake, small_plan
from tools.tune_example import Effect
from tpudeploy import accept
from tpudeploy.endpoint import Endpoint
from tpudeploy.tune.arms import BASELINE
from tpudeploy.tune.ranking import collect, write_report
from tpudeploy.tune.runner import run_tune, status_path


def make_accept_output(monkeypatch: pytest.MonkeyPatch, failing: dict[str, str]) -> str:
    """What `make accept` prints when `failing` rows fail: accept.run's own closing error, as
    tpudeploy.errors prints it, from verdicts of the real rows (no server: the hook is faked)."""
    limits = accept.Limits("m", 32_768, 4)
    verdicts = [
        accept.Verdict(row.name, "FAIL" if row.name in failing else "pass", 1.0,
                       failing.get(row.name, "ok"))
        for row in accept.rows(limits)
    ]  # fmt: skip
    monkeypatch.setattr(accept, "verdicts", lambda *a, **k: verdicts)
    with pytest.raises(accept.AcceptError) as info:
        accept.run(Endpoint("https://127.0.0.1:8443", "0" * 64), "key", limits, io.StringIO())
    return f"error: {info.value}\nmake: *** [Makefile:215: accept] Error 1"


def test_failed_rows_are_read_from_make_accepts_own_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said = make_accept_output(
        monkeypatch, {"tool call": "no get_weather tool call; got text", "needle 8K": "lost it"}
    )
    assert accept.failed_rows_in(said) == ["tool call", "needle 8K"]
    assert accept.failed_rows_in("make: *** [Makefile:1: wait] Error 1") == []


def test_an_arm_that_fails_acceptance_is_ranked_out_naming_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = small_plan(rounds=2)
    # The arm is the fastest (10% more throughput), and answers the tool call wrongly.
    effects = {
        BASELINE: Effect(1.0, 0.01),
        "batched-tokens-8192": Effect(1.10, 0.01),
        "bucket-padding-128": Effect(1.0, 0.01),
    }
    said = make_accept_output(monkeypatch, {"tool call": "no get_weather tool call"})
    make = FakeMake(effects, rejects={"batched-tokens-8192": said})
    run_tune(plan, tmp_path, step=make, log=io.StringIO())
    calls = make.calls
    # Accepted before the sweep: the failing arm is never benched, and booted only once.
    assert ("bench", "batched-tokens-8192") not in calls
    assert calls.count(("deploy", "batched-tokens-8192")) == 1
    assert calls.index(("accept", BASELINE)) < calls.index(("bench", BASELINE))
    for round_ in (1, 2):
        status = json.loads(status_path(tmp_path, "batched-tokens-8192", round_).read_text())
        assert status["status"] == "failed" and status["step"] == "accept"
        assert status["rows"] == ["tool call"]
    assert collect(tmp_path).ranked_out == {"batched-tokens-8192": ("tool call",)}
    report = write_report(tmp_path, baseline=BASELINE, price_per_hour=None, plots=False)
    text = report.read_text()
    assert "| - | batched-tokens-8192 | ranked out: make accept failed (tool call) |" in text
    ranked = text.split("## Ranked", 1)[1].split("\n## ", 1)[0]
    assert "| 1 | bucket-padding-128 |" in ranked
    assert not any(
        line.startswith("| 1 | batched") or line.startswith("| 2 | batched")
        for line in ranked.splitlines()
    )
