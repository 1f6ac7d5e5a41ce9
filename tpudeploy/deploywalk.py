"""`make deploy`'s apply: `cdktf deploy` of every stack, and with a capacity ladder, rung by rung.

Without `capacity` it runs the one `cdktf deploy` the Makefile ran before, its output untouched.
With a ladder (config/ladder.py) each rung is one `cdktf deploy` with TPUDEPLOY_RUNG naming the
rung, so main.py synthesizes the rung's zone and provisioning, and the deadline job, labels and
prices follow it. On a capacity or quota error Google documents for the TPU API
(tpudeploy/tpuvm/capacity_errors.py) the walk destroys what the failed rung left in the billing
stacks (`cdktf destroy` of those stacks, then `tpudeploy cleanup`, as `make destroy` does), says
why, and tries the next rung. Any other error ends the walk as a failed deploy ends today. The
rung that runs is recorded beside the config (config/ladder.py record_path) and on the node
(label tpudeploy-rung); `make destroy` forgets the record.

    python -m tpudeploy.deploywalk --cdktf node_modules/.bin/cdktf --outdir DIR [--auto-approve]
    python -m tpudeploy.deploywalk --forget
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tpudeploy import errors
from tpudeploy.config import DeployConfig, config_path
from tpudeploy.config.ladder import RUNG_ENV, record_path
from tpudeploy.platform import load_config, platform_for
from tpudeploy.tpuvm.capacity_errors import CapacityError, classify

# How much of a rung's output the classifier reads: the error is in Terraform's last lines.
TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class Attempt:
    """One rung's `cdktf deploy`: its exit code and the tail of what it printed."""

    code: int
    tail: str


Deploy = Callable[[int | None], Attempt]  # rung number (None: no ladder) -> its attempt
Destroy = Callable[[int], int]  # rung number -> exit code of its destroy and cleanup


def walk(
    cfg: DeployConfig,
    config_file: Path,
    *,
    deploy: Deploy,
    destroy: Destroy,
    out: TextIO,
    start: int | None = None,
    now: Callable[[], datetime.datetime] | None = None,
) -> int:
    """Deploy rung after rung from `start` (from 1; default: the one `cfg` is on); 0 once one
    is up, else the last failure's exit code. Without a ladder, one deploy."""
    if not cfg.capacity:
        return deploy(None).code
    total = len(cfg.capacity)
    first = start or (cfg.rung_index or 0) + 1
    skipped: list[dict[str, object]] = []
    for number in range(first, total + 1):
        rung = cfg.capacity[number - 1]
        print(f"capacity ladder: rung {number} of {total}: {rung.label()}", file=out, flush=True)
        attempt = deploy(number)
        if attempt.code == 0:
            _record(cfg, config_file, number, skipped, now)
            print(_ran(number, total, rung.label(), skipped), file=out, flush=True)
            return 0
        found = classify(attempt.tail)
        if found is None:
            # Not a documented capacity or quota error: the user's to fix, as without a ladder.
            return attempt.code
        skipped.append({"rung": number, "kind": found.kind, "error": found.line})
        print(_why(number, rung.label(), found), file=out, flush=True)
        print(
            f"capacity ladder: destroying what rung {number} left (its billing stacks), so "
            "state holds nothing of it before the next rung",
            file=out,
            flush=True,
        )
        if destroy(number) != 0:
            print(
                f"capacity ladder: could not destroy what rung {number} left (the error above); "
                "stopping here so no two rungs bill at once. Fix it, then `make destroy` and "
                "`make deploy` again",
                file=out,
                flush=True,
            )
            return 1
        if number == total:
            print(
                f"capacity ladder: every rung from {first} to {total} was out of capacity or "
                "quota; nothing of the deployment's node is left. Try later, add a rung, or ask "
                "for quota (docs/capacity-and-cost.md)",
                file=out,
                flush=True,
            )
            return attempt.code
    return 1  # `start` past the last rung: nothing was tried


def _why(number: int, label: str, found: CapacityError) -> str:
    return (
        f"capacity ladder: rung {number} ({label}) failed with a {found.kind} error: {found.why}. "
        f"The API said: {found.line} (rule: {found.source})"
    )


def _ran(number: int, total: int, label: str, skipped: list[dict[str, object]]) -> str:
    before = "; ".join(f"rung {s['rung']}: {s['kind']}" for s in skipped)
    return f"capacity ladder: rung {number} of {total} runs ({label})" + (
        f"; skipped {before}" if before else ""
    )


def _record(
    cfg: DeployConfig,
    config_file: Path,
    number: int,
    skipped: list[dict[str, object]],
    now: Callable[[], datetime.datetime] | None,
) -> None:
    """Which rung runs, for every later command (config/ladder.py rung_in_use) and `make
    status`; no secret is in it."""
    rung = cfg.capacity[number - 1]
    when = (now or (lambda: datetime.datetime.now(datetime.UTC)))()
    record = {
        "rung": number,
        "provisioning": rung.provisioning,
        "zone": rung.zone,
        "since": when.isoformat(timespec="seconds"),
        "skipped": skipped,
    }
    path = record_path(config_file, cfg.name)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def recorded(cfg: DeployConfig, config_file: Path) -> dict[str, object] | None:
    """The walker's record of the rung that runs, if this machine has one."""
    try:
        found = json.loads(record_path(config_file, cfg.name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def forget(cfg: DeployConfig, config_file: Path) -> None:
    """`make destroy` removed the node: the next deploy walks from the first rung again."""
    record_path(config_file, cfg.name).unlink(missing_ok=True)


# ---- the real commands -------------------------------------------------------------------------


def _env(number: int | None, **extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    if number is not None:
        env[RUNG_ENV] = str(number)
    return env


def run_deploy(argv: Sequence[str], number: int | None, *, out: TextIO) -> Attempt:
    """Run one `cdktf deploy`; without a ladder with the terminal as is, else with its output
    passed through as it comes (prompts included: read in chunks, not lines) and its tail kept
    for the classifier, in memory only."""
    if number is None:
        return Attempt(subprocess.run(list(argv), check=False).returncode, "")
    proc = subprocess.Popen(list(argv), env=_env(number), stdout=subprocess.PIPE, stderr=2)
    assert proc.stdout is not None
    tail = b""
    while chunk := os.read(proc.stdout.fileno(), 4096):
        if hasattr(out, "buffer"):
            out.buffer.write(chunk)
        else:
            out.write(chunk.decode("utf-8", "replace"))
        out.flush()
        tail = (tail + chunk)[-TAIL_BYTES:]
    return Attempt(proc.wait(), tail.decode("utf-8", "replace"))


def run_destroy(argv: Sequence[str], number: int) -> int:
    """`cdktf destroy` of the billing stacks, then the by-name cleanup `make destroy` runs."""
    env = _env(number, TPUDEPLOY_COMMAND="destroy")
    code = subprocess.run(list(argv), env=env, check=False).returncode
    cleanup = [sys.executable, "-m", "tpudeploy", "cleanup"]
    return code or subprocess.run(cleanup, env=env, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpudeploy.deploywalk", description=__doc__)
    parser.add_argument("--cdktf", default="node_modules/.bin/cdktf")
    parser.add_argument("--outdir", default="")
    parser.add_argument("--auto-approve", action="store_true")
    parser.add_argument("--forget", action="store_true", help="after make destroy")
    args = parser.parse_args(argv)

    def command() -> int:
        cfg = load_config()
        if args.forget:
            forget(cfg, config_path())
            return 0
        platform = platform_for(cfg)
        outdir = ["--output", args.outdir] if args.outdir else []
        approve = ["--auto-approve"] if args.auto_approve else []
        deploy_argv = [args.cdktf, "deploy", *outdir, *platform.stacks(cfg), *approve]
        # The failed rung's own stacks only, never the secrets: the next rung reuses them.
        destroy_argv = [args.cdktf, "destroy", *outdir, *platform.billing_stacks(cfg)]
        return walk(
            cfg,
            config_path(),
            deploy=lambda n: run_deploy(deploy_argv, n, out=sys.stdout),
            destroy=lambda n: run_destroy([*destroy_argv, "--auto-approve"], n),
            out=sys.stdout,
        )

    return errors.run(command)


if __name__ == "__main__":
    sys.exit(main())
