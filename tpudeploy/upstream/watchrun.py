"""The watch's run: a new build on its own flex-start deployment, judged, always destroyed.

One run, in order: destroy whatever a killed run left (the watch deployment's state sits in the
state bucket under its own prefix, so `make destroy` of `<name>-watch` finds it); ask the registry
for the tag's digest; if it is the pinned one, stop. Else: refuse a run whose worst case is over
`[watch] budget_usd`; boot the candidate (`make deploy`, then `make wait`, which fails on the
node's boot-log check); run `make accept`'s rows (tpudeploy.accept verdicts) and stop at the first
failed one (no sweep is paid for a build that answers wrong); then the tune harness (pinned and
candidate, each on a fresh node, the quick profile's repetitions) and its verdict against the
pinned build. A `finally` destroys the watch deployment on every path. The run ends with an
artifact: `verdict.json` and `verdict.md` always, `pr-body.md` and `pin.json` only when the
candidate is better and every accept row passed (issue 42: the watch never proposes a pin that
fails the acceptance table).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from tpudeploy import accept, facts
from tpudeploy.config import DeployConfig
from tpudeploy.errors import NotOnThisPlatform
from tpudeploy.platform import platform_for
from tpudeploy.tune import tomlwrite
from tpudeploy.tune.arms import BASELINE, load_arms
from tpudeploy.tune.plan import TunePlan, build_plan
from tpudeploy.tune.ranking import collect
from tpudeploy.tune.runner import Step, run_tune
from tpudeploy.tune.verdict import BETTER, WORSE, ArmVerdict, compare
from tpudeploy.upstream.pinfile import PIN_JSON
from tpudeploy.upstream.prbody import pr_body, verdict_markdown
from tpudeploy.upstream.registry import ImageRef, Release
from tpudeploy.watchbudget import budget, name_problem, watch_data, watch_name

CANDIDATE = "candidate"
PROFILE = "quick"
# The rows a pin must pass whatever else happens: the smoke test's two (issue 40: "the smoke test
# (chat, tool call) passes"); every other row must not FAIL either (issue 42).
REQUIRED_ROWS = ("chat", "tool call")
# Flex-start deletes are not instant: the run stops starting paid work this long before its
# limit so that its own destroy still fits in the job.
DESTROY_MARGIN_S = 15 * 60
RUN_FILE = "watch-run.json"
VERDICT_JSON, VERDICT_MD, PR_BODY = "verdict.json", "verdict.md", "pr-body.md"

# Given the candidate's config file, its acceptance rows (production: tpudeploy.upstream.__main__
# reaches the node's front door as `make accept` does).
AcceptRows = Callable[[Path], Sequence[accept.Verdict]]
Latest = Callable[[str, str], Release]


class WatchError(RuntimeError):
    """The watch cannot go on; the message says why and what to run."""


@dataclass
class Outcome:
    """What the run found: `proposed` only with a better verdict and every accept row passing."""

    status: str  # off, refused, unchanged, proposed, not-proposed, failed
    reasons: list[str] = field(default_factory=list)
    pinned: str = ""
    candidate: str = ""
    accept_rows: list[dict[str, object]] = field(default_factory=list)
    verdict: dict[str, object] = field(default_factory=dict)
    resumed: bool = False

    @property
    def proposed(self) -> bool:
        return self.status == "proposed"

    @property
    def exit_code(self) -> int:
        """0 when the run did its job (whatever it concluded), 1 when it could not."""
        return 1 if self.status in ("refused", "failed") else 0


def accept_reasons(rows: Sequence[accept.Verdict]) -> list[str]:
    """Why the acceptance table refuses the candidate: any FAIL, and chat or the tool call not
    passing (a skip does not count as a pass for those two)."""
    reasons = [f"accept row {v.row!r} failed: {v.detail}" for v in rows if v.failed]
    seen = {v.row: v.status for v in rows}
    for row in REQUIRED_ROWS:
        if seen.get(row) not in ("pass", "FAIL"):
            reasons.append(f"accept row {row!r} did not pass ({seen.get(row, 'not run')})")
    return reasons


def sweep_reasons(verdict: ArmVerdict | None) -> list[str]:
    """Why the sweep does not call the candidate better: throughput as `make tune` picks a
    winner, better in at least one cell and worse in none, under the build log's bar."""
    if verdict is None:
        return ["no sweep verdict: the sweep measured nothing for one of the two builds"]
    reasons = []
    worse = [
        f"{c.context}/{c.clients}"
        for c in verdict.cells
        if c.metric == "aggregate" and c.label == WORSE
    ]
    if worse:
        reasons.append(
            "throughput worse than the pinned build in cell(s) "
            + ", ".join(worse)
            + " (context/clients; the whole 95% interval below 1)"
        )
    if verdict.count(BETTER) == 0:
        reasons.append(
            "throughput better than the pinned build in no cell (no interval wholly above 1 "
            "with cv under 10%): not worth a pin"
        )
    return reasons


def decide(rows: Sequence[accept.Verdict], verdict: ArmVerdict | None) -> list[str]:
    """Why the candidate may NOT be proposed; empty: propose it."""
    return accept_reasons(rows) + sweep_reasons(verdict)


def _rows_data(rows: Sequence[accept.Verdict]) -> list[dict[str, object]]:
    return [
        {"row": v.row, "status": v.status, "seconds": round(v.seconds, 1), "detail": v.detail}
        for v in rows
    ]


def _verdict_data(v: ArmVerdict) -> dict[str, object]:
    return {
        "better_cells": v.count(BETTER),
        "worse_cells": v.count(WORSE),
        "geomean_throughput_ratio": v.geomean,
        "cells": [
            {"context": c.context, "clients": c.clients, "metric": c.metric, "verdict": c.text()}
            for c in v.cells
        ],
    }


class Watch:
    """One run. `step` runs a make target with extra environment (tpudeploy.tune.runner's);
    `latest` asks the registry; `accept_rows` runs the acceptance table; `clock` is monotonic."""

    def __init__(
        self,
        cfg: DeployConfig,
        base: Mapping[str, Any],
        out: Path,
        *,
        step: Step,
        latest: Latest,
        accept_rows: AcceptRows,
        log: TextIO = sys.stdout,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg, self.base, self.out = cfg, base, out
        self.step, self.latest, self.accept_rows = step, latest, accept_rows
        self.log, self.clock = log, clock
        self.started = clock()
        self.configs = out / "configs"

    # ---- the configs and the destroy that always runs ----

    def _config_file(self, label: str, image: str) -> Path:
        self.configs.mkdir(parents=True, exist_ok=True)
        path = self.configs / f"{label}.toml"
        header = (
            f"The upstream watch's {label} build for deployment {self.cfg.name!r}; written by "
            "the watch, not for editing."
        )
        path.write_text(
            tomlwrite.dumps(watch_data(self.base, self.cfg, image), header=header),
            encoding="utf-8",
        )
        return path

    def destroy(self, config: Path, why: str) -> None:
        self.log.write(f"watch: make destroy ({why})\n")
        result = self.step(["make", "destroy", "AUTO_APPROVE=1"], {"DEPLOY_CONFIG": str(config)})
        if result.returncode != 0:
            raise WatchError(
                f"make destroy of {watch_name(self.cfg)} failed (exit {result.returncode}): "
                f"{result.tail.strip()[-400:]}. Run `DEPLOY_CONFIG={config} make destroy` now, "
                "or its node bills until its max_run_duration"
            )

    def remaining(self) -> float:
        return self.cfg.watch.time_limit_seconds - (self.clock() - self.started)

    # ---- the run ----

    def run(self) -> Outcome:
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            outcome = self._run()
        except WatchError as exc:
            # The leftover's destroy failed before anything new started: say so in the artifact.
            outcome = Outcome("failed", [str(exc)])
        self._write(outcome)
        return outcome

    def _run(self) -> Outcome:
        cfg = self.cfg
        if not cfg.watch.enabled:
            return Outcome("off", ["[watch] enabled = false: nothing runs until it is true"])
        image = ImageRef.parse(cfg.vllm.image)
        if image.digest is None:
            return Outcome(
                "refused",
                [
                    f"vllm.image = {cfg.vllm.image!r} is a tag, not a digest: there is no pinned "
                    "build to judge a new one against; pin it first (`make pin` after a boot)"
                ],
            )
        tag = cfg.watch.tag or image.tag
        if not tag:
            return Outcome(
                "refused",
                [
                    f"vllm.image = {cfg.vllm.image!r} names no tag to follow; add the tag to "
                    'the image or set [watch] tag = "nightly"'
                ],
            )
        problems = [p for p in (budget(cfg).refusal, name_problem(cfg)) if p]
        try:
            platform_for(cfg).require(cfg, "tune")  # the harness the watch runs
        except NotOnThisPlatform as exc:
            problems.append(str(exc))
        pinned = image.pinned(image.digest)
        if problems:
            return Outcome("refused", problems, pinned=pinned)
        pinned_config = self._config_file("pinned", pinned)
        # A killed run left its node: its state is under the watch deployment's own prefix.
        resumed = self._resume(pinned_config)
        release = self.latest(image.repository, tag)
        if release.digest == image.digest:
            return Outcome(
                "unchanged",
                [f"{image.repository}:{tag} still points at the pinned digest"],
                pinned=pinned,
                resumed=resumed,
            )
        candidate = ImageRef(image.repository, tag, release.digest).pinned(release.digest)
        outcome = Outcome("not-proposed", pinned=pinned, candidate=candidate, resumed=resumed)
        candidate_config = self._config_file(CANDIDATE, candidate)
        self._marker({"state": "running", "candidate": candidate})
        try:
            self._judge(outcome, candidate_config)
        except WatchError as exc:
            outcome.status, outcome.reasons = "failed", [*outcome.reasons, str(exc)]
        finally:
            # Every path, a failure or an exception included: nothing of the watch bills after.
            try:
                self.destroy(candidate_config, "the run is over: nothing of the watch may bill")
                self._marker({"state": "finished", "candidate": candidate})
            except WatchError as exc:
                # The marker stays "running": the next run destroys it first.
                outcome.status, outcome.reasons = "failed", [*outcome.reasons, str(exc)]
        if outcome.status == "not-proposed" and not outcome.reasons:
            outcome.status = "proposed"
        return outcome

    def _resume(self, config: Path) -> bool:
        marker = self.out / RUN_FILE
        earlier = json.loads(marker.read_text(encoding="utf-8")) if marker.exists() else {}
        interrupted = earlier.get("state") == "running"
        if interrupted:
            self.log.write(
                f"watch: the run of {earlier.get('started', '?')} (candidate "
                f"{earlier.get('candidate', '?')}) was interrupted; destroying what it left\n"
            )
        # Always: in CI the marker is gone with the runner, but the state bucket is not.
        self.destroy(config, "whatever an earlier run left")
        return interrupted

    def _marker(self, fields: Mapping[str, object]) -> None:
        record = {"deployment": watch_name(self.cfg), **fields}
        record["started" if fields.get("state") == "running" else "finished"] = datetime.now(
            UTC
        ).isoformat()
        (self.out / RUN_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")

    def _paid_step(self, what: str, argv: list[str], config: Path) -> None:
        if self.remaining() < DESTROY_MARGIN_S:
            raise WatchError(
                f"the time limit ({self.cfg.watch.time_limit}) leaves no room for make {what} "
                "and the destroy after it; raise [watch] time_limit"
            )
        result = self.step(argv, {"DEPLOY_CONFIG": str(config)})
        if result.returncode != 0:
            raise WatchError(
                f"make {what} of the candidate failed (exit {result.returncode}): "
                f"{result.tail.strip()[-600:]}"
            )

    def _judge(self, outcome: Outcome, candidate_config: Path) -> None:
        # Boot the candidate; `make wait` fails when the node's boot-log check does.
        self._paid_step("deploy", ["make", "deploy", "AUTO_APPROVE=1"], candidate_config)
        self._paid_step("wait", ["make", "wait"], candidate_config)
        rows = list(self.accept_rows(candidate_config))
        outcome.accept_rows = _rows_data(rows)
        refused = accept_reasons(rows)
        if refused:
            outcome.reasons = refused  # no sweep is paid for a build that answers wrong
            return
        plan = self._plan(outcome.pinned, outcome.candidate)
        needed = plan.tpu_vm.seconds + DESTROY_MARGIN_S
        if needed > self.remaining():
            raise WatchError(
                f"the sweep (about {plan.tpu_vm.seconds / 60:.0f} min for {plan.rounds} "
                f"round(s) of two builds) does not fit in the {self.remaining() / 60:.0f} min "
                "the time limit leaves; raise [watch] time_limit or shorten [bench.quick]"
            )
        tune_out = self.out / "sweep"
        run_tune(plan, tune_out, step=self.step, log=self.log)
        collected = collect(tune_out, [BASELINE, CANDIDATE])
        verdict = None
        if BASELINE in collected.runs and CANDIDATE in collected.runs:
            ranked = compare(
                collected.runs, baseline=BASELINE, price_per_hour=budget(self.cfg).rate
            )
            verdict = next(v for v in ranked if v.name == CANDIDATE)
            outcome.verdict = _verdict_data(verdict)
        for failure in collected.failures:
            outcome.reasons.append(
                f"sweep: {failure.arm} round {failure.round} failed at make {failure.step}: "
                f"{failure.reason[-300:]}"
            )
        outcome.reasons += decide(rows, verdict)

    def _plan(self, pinned: str, candidate: str) -> TunePlan:
        """The tune harness's plan: the pinned build as the baseline, the candidate as its one
        arm (an overlay of the image alone), the quick profile's repetitions."""
        arms_dir = self.out / "arms"
        arms_dir.mkdir(parents=True, exist_ok=True)
        overlay = {"arm": {"description": f"the new upstream build {candidate}"}}
        overlay["vllm"] = {"image": candidate}
        (arms_dir / f"{CANDIDATE}.toml").write_text(
            tomlwrite.dumps(overlay, header="The upstream watch's candidate build."),
            encoding="utf-8",
        )
        base = watch_data(self.base, self.cfg, pinned)
        arms = load_arms(base, source="the watch's pinned build", arms_dir=arms_dir)
        refused = [a for a in arms if not a.runnable]
        if refused:
            raise WatchError(
                "the guard rails refuse "
                + "; ".join(f"{a.name}: {'; '.join(a.refused)}" for a in refused)
            )
        # The build log's 3 repetitions, each on a fresh node (make tune's default rounds): one
        # repetition gives no interval, so no verdict.
        return build_plan(arms, profile=PROFILE, rounds=facts.REPETITIONS)

    # ---- the artifact ----

    def _write(self, outcome: Outcome) -> None:
        data = {
            "deployment": self.cfg.name,
            "watch_deployment": watch_name(self.cfg),
            "status": outcome.status,
            "pinned": outcome.pinned,
            "candidate": outcome.candidate,
            "reasons": outcome.reasons,
            "resumed_an_interrupted_run": outcome.resumed,
            "accept": outcome.accept_rows,
            "sweep": outcome.verdict,
        }
        (self.out / VERDICT_JSON).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        (self.out / VERDICT_MD).write_text(verdict_markdown(data), encoding="utf-8")
        for stale in (PR_BODY, PIN_JSON):
            (self.out / stale).unlink(missing_ok=True)
        if outcome.proposed:
            (self.out / PR_BODY).write_text(pr_body(data), encoding="utf-8")
            pin = {"old": outcome.pinned, "new": outcome.candidate}
            (self.out / PIN_JSON).write_text(json.dumps(pin, indent=2) + "\n", encoding="utf-8")
