"""`python -m tools.rehearsal` (`make rehearse`): the whole lifecycle against the fake cloud."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tools.rehearsal.lifecycle import PROVISIONING_MODELS, SCENARIOS, Rehearsal
from tools.rehearsal.schema import CACHE_DIR, SchemaError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make rehearse", description=__doc__)
    parser.add_argument("--provisioning", default="flex-start", help=", ".join(PROVISIONING_MODELS))
    parser.add_argument("--scenario", default="lifecycle", help=", ".join(SCENARIOS))
    parser.add_argument(
        "--post-synth",
        metavar="MODULE:FUNCTION",
        help="edit the synthesized JSON after every synth (tests break it on purpose this way)",
    )
    parser.add_argument("--workdir", type=Path, help="default: build/rehearsal/runs/<time>-<model>")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy after a pass")
    args = parser.parse_args(argv)
    workdir = (
        args.workdir or CACHE_DIR / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.provisioning}"
    )
    try:
        rehearsal = Rehearsal(
            provisioning=args.provisioning,
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


if __name__ == "__main__":
    sys.exit(main())
