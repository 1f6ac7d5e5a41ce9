"""`python -m tools.rehearsal` (`make rehearse`): the whole lifecycle against the fake cloud."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tools.rehearsal.lifecycle import PROVISIONING_MODELS, SCENARIOS, VM_SCENARIOS, Rehearsal
from tools.rehearsal.parallel import Runner
from tools.rehearsal.schema import CACHE_DIR, SchemaError, ensure

ALL = "all"
PLATFORMS = ("tpu-vm", "gke")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make rehearse", description=__doc__)
    parser.add_argument(
        "--platform",
        default="tpu-vm",
        help="tpu-vm (the default) or gke (one lifecycle: --provisioning does not apply)",
    )
    parser.add_argument(
        "--provisioning",
        default="flex-start",
        help=f"{', '.join(PROVISIONING_MODELS)}, or {ALL} (the three side by side)",
    )
    parser.add_argument("--scenario", default="lifecycle", help=", ".join(SCENARIOS))
    parser.add_argument(
        "--post-synth",
        metavar="MODULE:FUNCTION",
        help="edit the synthesized JSON after every synth (tests break it on purpose this way)",
    )
    parser.add_argument("--workdir", type=Path, help="default: build/rehearsal/runs/<time>-<model>")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy after a pass")
    args = parser.parse_args(argv)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if args.platform not in PLATFORMS:
        print(
            f"error: PLATFORM={args.platform!r} is not a platform: use one of "
            f"{', '.join(PLATFORMS)}",
            file=sys.stderr,
        )
        return 2
    if args.platform == "gke":
        return _gke(args, stamp)
    if args.provisioning == ALL:
        return _all(args, stamp)
    workdir = args.workdir or CACHE_DIR / "runs" / f"{stamp}-{args.provisioning}"
    return _run(Rehearsal, args, provisioning=args.provisioning, workdir=workdir)


def _gke(args: argparse.Namespace, stamp: str) -> int:
    from tools.rehearsal.gke import GkeRehearsal

    workdir = args.workdir or CACHE_DIR / "runs" / f"{stamp}-gke"
    # The TPU pools' capacity comes from [gke] capacity; the VM provisioning model is unused.
    return _run(GkeRehearsal, args, provisioning="spot", workdir=workdir)


def _run(
    kind: type[Rehearsal], args: argparse.Namespace, *, provisioning: str, workdir: Path
) -> int:
    """One lifecycle of `kind`: its scratch copy kept when it fails (or with --keep)."""
    try:
        rehearsal = kind(
            provisioning=provisioning,
            scenario=args.scenario,
            post_synth=args.post_synth,
            workdir=workdir.resolve(),
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        rc = rehearsal.run()
    except SchemaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if rc == 0 and not args.keep:
        rehearsal.cleanup()
    return rc


def _all(args: argparse.Namespace, stamp: str) -> int:
    """The three provisioning models side by side (2 cores keep the total under 3 minutes)."""
    try:
        ensure_schema()
    except SchemaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    start = time.monotonic()
    root = (args.workdir or CACHE_DIR / "runs" / f"{stamp}-all").resolve()
    # A preemption or a deadline job happens to spot and on-demand nodes only.
    models = [
        m for m in PROVISIONING_MODELS if args.scenario not in VM_SCENARIOS or m != "flex-start"
    ]
    runner = Runner(parallel=len(models), out=sys.stdout)
    extra = ["--scenario", args.scenario, *(["--keep"] if args.keep else [])]
    if args.post_synth:
        extra += ["--post-synth", args.post_synth]
    for model in models:
        runner.start(model, ["--provisioning", model, *extra], root / model)
    failed = [run.label for run in runner.wait_all() if run.returncode != 0]
    elapsed = time.monotonic() - start
    if failed:
        print(f"rehearsal FAILED for {', '.join(failed)} ({elapsed:.1f} s in all)")
        return 1
    print(f"rehearsal passed for {', '.join(models)} in {elapsed:.1f} s")
    return 0


def ensure_schema() -> None:
    """Generate the schema cache once, before the runs that would each generate it."""
    from tools.rehearsal.resources import RESOURCES

    ensure(RESOURCES)


if __name__ == "__main__":
    sys.exit(main())
