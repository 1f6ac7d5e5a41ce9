"""`python -m tpudeploy.upstream run|check|apply-pin`: the watch, as the workflow and make call it.

DEPLOY_CONFIG=deployments/staging.toml python -m tpudeploy.upstream check
DEPLOY_CONFIG=deployments/staging.toml python -m tpudeploy.upstream run --out watch-out
python -m tpudeploy.upstream apply-pin watch-out deployments/staging.toml
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

from tpudeploy import accept, errors, smoke
from tpudeploy.config import ConfigError, config_path, require_project
from tpudeploy.platform import load_config, platform_for
from tpudeploy.tune import tomlwrite
from tpudeploy.tune.runner import make_step
from tpudeploy.upstream import registry
from tpudeploy.upstream.pinfile import PinError, apply_pin
from tpudeploy.upstream.watchrun import Watch
from tpudeploy.watchbudget import check_lines, name_problem, watch_data, watch_name
from tpudeploy.watchrunner import hosted_refusal


def accept_rows(config: Path) -> list[accept.Verdict]:
    """`make accept`'s rows against the watch node, reached as `make accept` reaches a node."""
    cfg = load_config(config)
    project = require_project(cfg, source=str(config))
    try:
        endpoint = platform_for(cfg).endpoint(cfg, project)
        key = smoke.resolve_api_key(cfg, project)
        return accept.verdicts(endpoint, key, accept.Limits.of(cfg))
    except errors.UserError as exc:
        # No row could run (the front door unreachable, untrusted or open; no key): a failed
        # row, so the run still destroys its node and files the verdict.
        return [accept.Verdict("front door", "FAIL", 0.0, str(exc))]


def _cmd_check(args: argparse.Namespace) -> int:
    cfg = load_config(config_path())
    lines = check_lines(cfg)
    # The paid job runs this before its credential: on a GitHub-hosted runner (a hand-edited
    # runs-on) it stops here, before a flex-start boot it could not judge is paid for.
    hosted = hosted_refusal(os.environ)
    if hosted:
        lines.append(f"  REFUSED: {hosted}")
    print("\n".join(lines) or f"{config_path()}: no [watch] table; the upstream watch is off")
    return 1 if any("REFUSED" in line for line in lines) else 0


def _cmd_config(args: argparse.Namespace) -> int:
    """The watch deployment's config with the pinned build: for its one-time setup
    (`DEPLOY_CONFIG=<it> make secret` and `make api-key`) and for a look at what it deploys."""
    path = config_path()
    cfg = load_config(path)
    problem = name_problem(cfg)
    if problem:
        raise errors.UserError(problem)
    base = tomllib.loads(path.read_text(encoding="utf-8"))
    out = Path(args.out)
    header = f"The upstream watch's deployment for {cfg.name!r} ({path}); written by the watch."
    out.write_text(tomlwrite.dumps(watch_data(base, cfg, cfg.vllm.image), header=header))
    print(f"{out}: deployment {watch_name(cfg)!r} (flex-start, the pinned build)")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    hosted = hosted_refusal(os.environ)
    if hosted:
        # The same stop as watch-check's, for a workflow edited to skip it: nothing is paid.
        raise errors.UserError(hosted)
    path = config_path()
    cfg = load_config(path)
    base = tomllib.loads(path.read_text(encoding="utf-8"))
    base_url = os.environ.get(registry.REGISTRY_URL_ENV, registry.DOCKER_HUB)

    def latest(repository: str, tag: str) -> registry.Release:
        return registry.latest(repository, tag, base_url=base_url)

    outcome = Watch(
        cfg, base, Path(args.out), step=make_step(), latest=latest, accept_rows=accept_rows
    ).run()
    print(f"upstream watch: {outcome.status}")
    for reason in outcome.reasons:
        print(f"  - {reason}")
    print(f"the verdict: {Path(args.out) / 'verdict.md'}")
    return outcome.exit_code


def _cmd_apply_pin(args: argparse.Namespace) -> int:
    try:
        new = apply_pin(Path(args.artifact), Path(args.deployment))
    except PinError as exc:
        raise errors.UserError(str(exc)) from None
    print(f"{args.deployment}: image pinned to {new}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpudeploy.upstream")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="the watch's budget, time limit and what stops the billing")
    config = sub.add_parser("config", help="write the watch deployment's config (one-time setup)")
    config.add_argument("--out", required=True)
    run = sub.add_parser("run", help="one watch run: judge a new build, destroy, write a verdict")
    run.add_argument("--out", required=True, help="the artifact's folder")
    pin = sub.add_parser("apply-pin", help="write a proposed pin into the deployment file")
    pin.add_argument("artifact")
    pin.add_argument("deployment")
    args = parser.parse_args(argv)
    commands = {
        "check": _cmd_check,
        "config": _cmd_config,
        "run": _cmd_run,
        "apply-pin": _cmd_apply_pin,
    }
    try:
        return commands[args.command](args)
    except (ConfigError, registry.RegistryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(errors.run(main))
