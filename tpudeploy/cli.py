"""Ops commands behind the Makefile; each loads the validated config once (no cdktf here)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from tpudeploy.config import ConfigError, DeployConfig, config_path, load_config, require_project


def _check(cfg: DeployConfig, args: argparse.Namespace) -> int:
    if args.deploy:
        require_project(cfg, source=str(config_path()))
    print(f"{config_path()}: deployment {cfg.name!r} is valid")
    print(
        f"  {cfg.provisioning} {cfg.accelerator_type} in {cfg.zone}, "
        f"project {cfg.project or '(unset)'}"
    )
    return 0


def _stacks(cfg: DeployConfig, args: argparse.Namespace) -> int:
    names = [cfg.secrets_stack_name, cfg.node_stack_name]
    if args.node:
        names = [cfg.node_stack_name]
    elif args.secrets:
        names = [cfg.secrets_stack_name]
    print(" ".join(names))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tpudeploy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="validate the config")
    check.add_argument("--deploy", action="store_true", help="also require what deploying needs")
    check.set_defaults(func=_check)

    stacks = sub.add_parser("stacks", help="print the stack names for cdktf")
    which = stacks.add_mutually_exclusive_group()
    which.add_argument("--node", action="store_true", help="only the node (billing) stack")
    which.add_argument("--secrets", action="store_true", help="only the long-lived stack")
    stacks.set_defaults(func=_stacks)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[DeployConfig, argparse.Namespace], int] = args.func
    try:
        return func(load_config(), args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
