"""Command line: `python -m tpudeploy.tune {plan,run,report}` (the make tune targets)."""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tpudeploy import errors, facts
from tpudeploy.bench.results import ReportError
from tpudeploy.bench.settings import BenchConfigError
from tpudeploy.config import ConfigError, config_path
from tpudeploy.planner.cost import NoPricesError, hourly_cost, price_table
from tpudeploy.platform import platform_for
from tpudeploy.tune import hubcheck
from tpudeploy.tune.arms import ARMS_DIR, BASELINE, ArmError, load_arms
from tpudeploy.tune.plan import TunePlan, build_plan, plan_text
from tpudeploy.tune.ranking import collect, write_report
from tpudeploy.tune.runner import TuneError, make_step, run_tune
from tpudeploy.tune.verdict import BETTER, WORSE, compare

DEFAULT_OUT = Path("tune-results")


def _base_data(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            str(path), ["file not found; point DEPLOY_CONFIG at your config"]
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), [f"not valid TOML ({exc}); fix the syntax"]) from None


def _plan(args: argparse.Namespace) -> TunePlan:
    path = Path(args.config) if args.config else config_path()
    only = [a for a in (args.arms or "").split(",") if a and a != BASELINE]
    arms = load_arms(
        _base_data(path),
        source=str(path),
        arms_dir=Path(args.arms_dir) if args.arms_dir else ARMS_DIR,
        only=only,
    )
    base = arms[0].config
    profile = args.profile or (base.bench.profile if base is not None else "full")
    return build_plan(arms, profile=profile, rounds=args.rounds)


def _cmd_plan(args: argparse.Namespace) -> int:
    plan = _plan(args)
    print(plan_text(plan))
    base = plan.arms[0].arm.config
    # The drafts' licence and size, asked of Hugging Face with the stored token when
    # credentials are there (tpudeploy/tune/hubcheck.py); else a line saying it was not run.
    for line in hubcheck.plan_lines(plan, base) if base is not None else []:
        print(line)
    return 0


def _out_dir(args: argparse.Namespace, plan: TunePlan) -> Path:
    if args.out:
        return Path(args.out)
    base = plan.arms[0].arm.config
    assert base is not None
    # Deterministic: `make tune` again resumes the same run.
    return DEFAULT_OUT / f"{base.name}-{plan.profile}"


def _winner(out: Path, plan: TunePlan) -> str:
    """The top-ranked arm if it is better somewhere and worse nowhere; else the baseline."""
    collected = collect(out, [p.arm.name for p in plan.arms])
    if BASELINE not in collected.ranked():
        return BASELINE
    # An arm that failed make accept is out of the ranking: it can never be the winner.
    ranked = compare(collected.ranked(), baseline=BASELINE, price_per_hour=None)
    for verdict in ranked[1:2]:
        if verdict.count(BETTER) > 0 and verdict.count(WORSE) == 0:
            return verdict.name
    return BASELINE


def _cmd_run(args: argparse.Namespace) -> int:
    plan = _plan(args)
    base = plan.arms[0].arm.config
    assert base is not None
    platform_for(base).require(base, "tune")
    print(plan_text(plan))
    if not args.yes:
        if not sys.stdin.isatty():
            raise TuneError(
                "not starting paid nodes without confirmation: make tune AUTO_APPROVE=1"
            )
        answer = input("Start? This creates and bills TPU nodes as planned above [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing started.")
            return 1
    # Before any node: a draft the stored token cannot download (or larger than its bound)
    # would boot, bill and fail at the download (tpudeploy/tune/hubcheck.py).
    for line in hubcheck.require_before_spend(plan, base):
        print(line)
    out = _out_dir(args, plan)
    keep = args.keep
    outcomes = run_tune(plan, out, step=make_step(), keep=None if keep == "winner" else keep)
    if keep == "winner":
        chosen = _winner(out, plan)
        print(f"Winner: {chosen}; leaving the node on it (make destroy stops its billing)")
        run_tune(plan, out, step=make_step(), keep=chosen)
    failed = sum(1 for _, _, outcome in outcomes if outcome == "failed")
    print(f"make tune: {len(outcomes)} boot(s), {failed} failed; results in {out}")
    print(f"The verdict: make tune-report OUT={out}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    results = Path(args.results)
    rate = None
    path = Path(args.config) if args.config else config_path()
    try:
        plan = _plan(args)
        cfg = plan.arms[0].arm.config
        if cfg is not None:
            rate = hourly_cost(cfg.provisioning, prices=price_table(cfg))
    except (NoPricesError, ConfigError, ArmError, BenchConfigError) as exc:
        print(f"note: no $/M column ({path}: {exc})", file=sys.stderr)
    report = write_report(results, baseline=BASELINE, price_per_hour=rate)
    print(report.read_text(encoding="utf-8"))
    print(f"wrote {report}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tpudeploy.tune", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (
        ("plan", "each arm's change, the run order, time and cost; starts nothing"),
        ("run", "boot each arm from scratch, wait, sweep; resumable; stops the billing at the end"),
        ("report", "the verdict: each arm against the baseline with bootstrap intervals"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--config", help="your deployment TOML (default: DEPLOY_CONFIG)")
        p.add_argument("--arms-dir", help="the arm files (default: tune/)")
        p.add_argument("--arms", help="comma-separated arm names (default: every arm)")
        p.add_argument("--profile", choices=("full", "quick"), help="default: [bench] profile")
        p.add_argument(
            "--rounds",
            type=int,
            choices=range(1, 11),
            metavar="N",
            help=f"boots per arm (default {facts.REPETITIONS}, the build log's repetitions)",
        )
        if name == "run":
            p.add_argument("--out", help=f"results (default {DEFAULT_OUT}/NAME-PROFILE; resumes)")
            p.add_argument("--keep", help="leave the node on this arm, or 'winner', at the end")
            p.add_argument("--yes", action="store_true", help="start without asking")
        if name == "report":
            p.add_argument("results", help="the OUT of make tune, or arms' results laid out alike")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command != "report" and args.rounds is None:
        args.rounds = facts.REPETITIONS
    commands = {"plan": _cmd_plan, "run": _cmd_run, "report": _cmd_report}
    try:
        return commands[args.command](args)
    except (
        ArmError,
        TuneError,
        BenchConfigError,
        ReportError,
        ConfigError,
        OSError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "tune: interrupted; `make tune` with the same OUT resumes at the unit it was on. A "
            "node may still be running: make destroy stops its billing",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(errors.run(main))
