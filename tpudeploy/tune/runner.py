"""`make tune`: each arm in turn on a node booted from scratch, resumable, billing stopped after.

One boot of one arm is a unit: `make destroy` (the previous node goes: an arm is never patched in
place, whatever it changes), `make deploy` with the arm's whole config, `make wait`, the node's
boot check kept beside the results (`make boot-record`: boot and compile time, the build's
capabilities), `make accept` (the build log's acceptance table: a build can boot, answer "hi"
and still be wrong), then the bench sweep into OUT/<arm>/round-<r>/. An arm that fails
acceptance is not benched, its later rounds are not booted, and the verdict ranks it out naming
the failed rows. Each unit ends with OUT/<arm>/round-<r>.status.json, written last: a unit
without it was interrupted and runs again (its partial results are moved aside, never deleted).
A unit that fails to deploy, boot or bench is recorded with its reason (the build log's 0.95 arm
died 691 s into compiling: that outcome is data too) and the tune goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from tpudeploy.accept import failed_rows_in
from tpudeploy.tune import tomlwrite
from tpudeploy.tune.arms import Arm
from tpudeploy.tune.bootverdict import BOOT_SUFFIX
from tpudeploy.tune.plan import TunePlan
from tpudeploy.tune.ranking import STATUS_SUFFIX

STATE_FILE = "tune.json"
ARM_CONFIGS = "arms"
OUTPUT_TAIL_LINES = 12


class TuneError(RuntimeError):
    """The tune cannot go on; the message says why and what to run."""


@dataclass(frozen=True)
class StepResult:
    returncode: int
    tail: str  # the last lines of the step's output: a failure's reason


Step = Callable[[Sequence[str], Mapping[str, str]], StepResult]


def make_step(out: TextIO = sys.stdout) -> Step:
    """Run a make target with extra environment, echoing its output, keeping its tail."""

    def step(argv: Sequence[str], env: Mapping[str, str]) -> StepResult:
        tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)
        with subprocess.Popen(
            list(argv),
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                tail.append(line.rstrip("\n"))
        return StepResult(proc.returncode, "\n".join(tail))

    return step


def status_path(out: Path, arm: str, round_: int) -> Path:
    return out / arm / f"round-{round_}{STATUS_SUFFIX}"


def boot_path(out: Path, arm: str, round_: int) -> Path:
    """The node's boot check of one unit (tpudeploy/tpuvm/bootrecord.py), beside its results."""
    return out / arm / f"round-{round_}{BOOT_SUFFIX}"


def unit_dir(out: Path, arm: str, round_: int) -> Path:
    return out / arm / f"round-{round_}"


def arm_config_file(arm: Arm, profile: str) -> str:
    """The arm's whole config as TOML, its sweep cut to one repetition per boot: the rounds are
    the repetitions, each on a fresh node."""
    data = json.loads(json.dumps(arm.data, default=str))  # a deep copy of plain data
    for key in ("project", "region"):
        if key in arm.data:
            data[key] = arm.data[key]
    bench = dict(data.get("bench", {}))
    bench["profile"] = profile
    bench["repetitions"] = 1
    quick = dict(bench.get("quick", {}))
    quick["repetitions"] = 1
    bench["quick"] = quick
    data["bench"] = bench
    header = (
        f"make tune arm {arm.name!r}: {arm.description}\n"
        f"Your config merged with {arm.source}; written by make tune, not for editing."
    )
    return tomlwrite.dumps(data, header=header)


def _state(plan: TunePlan) -> dict[str, object]:
    return {
        "profile": plan.profile,
        "rounds": plan.rounds,
        "order": [list(u) for u in plan.order],
        "fingerprints": {p.arm.name: p.arm.fingerprint for p in plan.arms},
    }


def prepare(plan: TunePlan, out: Path) -> dict[str, Path]:
    """Write (or, resuming, check) OUT/tune.json and every arm's config file."""
    out.mkdir(parents=True, exist_ok=True)
    state_file = out / STATE_FILE
    state = _state(plan)
    if state_file.exists():
        old = json.loads(state_file.read_text(encoding="utf-8"))
        for key in ("profile", "rounds"):
            if old.get(key) != state[key]:
                raise TuneError(
                    f"{state_file}: this run was started with {key} = {old.get(key)!r}, not "
                    f"{state[key]!r}; resume with the same settings, or use a new OUT"
                )
        old_prints, new_prints = old.get("fingerprints", {}), state["fingerprints"]
        assert isinstance(new_prints, dict)
        for name, fp in new_prints.items():
            if name in old_prints and old_prints[name] != fp:
                raise TuneError(
                    f"arm {name!r} changed since this run started (its config is not the one "
                    f"measured in {out}); restore it, or use a new OUT for the changed arms"
                )
        planned = [list(u) for u in plan.order]
        state["order"] = old["order"] + [u for u in planned if u not in old["order"]]
    state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    configs = out / ARM_CONFIGS
    configs.mkdir(exist_ok=True)
    files = {}
    for p in plan.arms:
        path = configs / f"{p.arm.name}.toml"
        path.write_text(arm_config_file(p.arm, plan.profile), encoding="utf-8")
        files[p.arm.name] = path
    return files


def _write_status(out: Path, arm: str, round_: int, **fields: object) -> None:
    record = {"arm": arm, "round": round_, "finished": datetime.now(UTC).isoformat(), **fields}
    status_path(out, arm, round_).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def _failed_acceptance(out: Path, arm: str, round_: int) -> tuple[int, list[str]] | None:
    """(round, rows) of this arm's earlier unit that failed `make accept`, else None: such an
    arm is ranked out, so booting it again would only bill."""
    for earlier in sorted((out / arm).glob("round-*" + STATUS_SUFFIX)):
        record = json.loads(earlier.read_text(encoding="utf-8"))
        if record.get("step") == "accept" and record.get("round") != round_:
            return int(record.get("round", 0)), [str(r) for r in record.get("rows", [])]
    return None


def _set_aside(path: Path) -> None:
    """An interrupted unit's partial results: kept beside, never mixed with its rerun."""
    n = 1
    while path.with_name(f"{path.name}.interrupted-{n}").exists():
        n += 1
    path.rename(path.with_name(f"{path.name}.interrupted-{n}"))


def run_tune(
    plan: TunePlan,
    out: Path,
    *,
    step: Step,
    log: TextIO = sys.stdout,
    keep: str | None = None,
) -> list[tuple[int, str, str]]:
    """Run every unit not yet done; return (round, arm, outcome) for each unit of the order.
    Billing stops at the end (`make destroy`), or the node is left on `keep` (an arm name)."""
    configs = prepare(plan, out)
    state = json.loads((out / STATE_FILE).read_text(encoding="utf-8"))
    order: list[tuple[int, str]] = [(int(r), str(n)) for r, n in state["order"]]
    outcomes: list[tuple[int, str, str]] = []
    total = len(order)
    for index, (round_, name) in enumerate(order, start=1):
        if name not in configs:
            continue  # an arm left out of this call (ARMS=...): its units wait for a later one
        status = status_path(out, name, round_)
        if status.exists():
            recorded = json.loads(status.read_text(encoding="utf-8")).get("status", "?")
            log.write(f"[{index}/{total}] {name}, round {round_}: {recorded} earlier, skipped\n")
            outcomes.append((round_, name, str(recorded)))
            continue
        refused = _failed_acceptance(out, name, round_)
        if refused is not None:
            earlier, rows = refused
            _write_status(
                out, name, round_, status="failed", step="accept", rows=rows,
                reason=f"not booted: failed make accept in round {earlier}",
            )  # fmt: skip
            log.write(f"[{index}/{total}] {name}, round {round_}: failed acceptance earlier\n")
            outcomes.append((round_, name, "failed"))
            continue
        results = unit_dir(out, name, round_)
        if results.exists():
            _set_aside(results)
        results.parent.mkdir(parents=True, exist_ok=True)
        env = {"DEPLOY_CONFIG": str(configs[name])}
        log.write(f"[{index}/{total}] {name}, round {round_}: a fresh node with this arm\n")
        steps = (
            ("destroy", ["make", "destroy", "AUTO_APPROVE=1"]),
            ("deploy", ["make", "deploy", "AUTO_APPROVE=1"]),
            ("wait", ["make", "wait"]),
            # The boot and compile time and the build's capabilities, from the node's own log.
            ("boot-record", ["make", "boot-record", f"OUT={boot_path(out, name, round_)}"]),
            ("accept", ["make", "accept"]),
            ("bench", ["make", "bench", f"PROFILE={plan.profile}", f"OUT={results}"]),
        )
        outcome = "done"
        for what, argv in steps:
            result = step(argv, env)
            if result.returncode != 0 and what == "boot-record":
                # Not the arm's fault: its verdict lacks this boot's times, the sweep still counts.
                log.write(f"    {name}: no boot check recorded ({result.tail.strip()[-200:]})\n")
                continue
            if result.returncode != 0:
                if what == "destroy":
                    raise TuneError(
                        f"make destroy failed before {name}, round {round_} (exit "
                        f"{result.returncode}); nothing new was started. Fix what it says, "
                        f"then `make tune OUT={out}` resumes here"
                    )
                rows = failed_rows_in(result.tail) if what == "accept" else []
                _write_status(
                    out, name, round_, status="failed", step=what, reason=result.tail.strip(),
                    **({"rows": rows} if what == "accept" else {}),
                )  # fmt: skip
                outcome = "failed"
                log.write(f"    {name} failed at make {what}; recorded, going on\n")
                break
        else:
            _write_status(out, name, round_, status="done")
        outcomes.append((round_, name, outcome))
    if keep is not None:
        if keep not in configs:
            raise TuneError(
                f"KEEP={keep!r} is not an arm of this tune; known: {', '.join(configs)}"
            )
        log.write(f"Leaving the node on {keep!r} (KEEP); make destroy stops its billing.\n")
        result = step(["make", "deploy", "AUTO_APPROVE=1"], {"DEPLOY_CONFIG": str(configs[keep])})
    else:
        log.write("Stopping the billing: make destroy\n")
        result = step(
            ["make", "destroy", "AUTO_APPROVE=1"],
            {"DEPLOY_CONFIG": str(configs[plan.arms[0].arm.name])},
        )
    if result.returncode != 0:
        raise TuneError(
            "the tune's results are kept, but its last make "
            f"{'deploy' if keep else 'destroy'} failed (exit {result.returncode}): run "
            "`make destroy` now, or the node keeps billing"
        )
    return outcomes
