"""Command line: `python -m tpudeploy.benchcli {plan,run,report}` (make bench, make report)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tpudeploy import errors
from tpudeploy.bench.commands import BenchTarget, NodeTarget, PodTarget, cell_command, plan_cells
from tpudeploy.bench.cost_kv import default_kv_pool
from tpudeploy.bench.report import write_report
from tpudeploy.bench.results import ReportError
from tpudeploy.bench.settings import (
    MAX_MODEL_LEN,
    PROFILES,
    BenchConfigError,
    SweepSettings,
    check_shared_prefix_percent,
    settings_from_table,
)
from tpudeploy.bench.sweep import (
    Executor,
    SweepError,
    expected_seconds,
    run_sweep,
    subprocess_executor,
)
from tpudeploy.config import ConfigError
from tpudeploy.gcp.secretmanager import SecretStore, SecretStoreError
from tpudeploy.render import compile_cache_key
from tpudeploy.timefmt import format_seconds


def _read_config(path: str | None) -> tuple[dict[str, Any], Any]:
    """The `[bench]` table as the user wrote it and the validated deployment config (None and
    {} without a file). The schema validated its shape; the sweep applies it to a profile."""
    if not path:
        return {}, None
    from tpudeploy.platform import load_config

    try:
        cfg = load_config(path)
    except ConfigError as exc:
        raise BenchConfigError(str(exc)) from None
    return cfg.bench.table(), cfg


def _settings(args: argparse.Namespace) -> tuple[str, SweepSettings, Any]:
    bench, cfg = _read_config(args.config)
    table: dict[str, Any] = {}
    max_model_len = MAX_MODEL_LEN
    if cfg is not None:
        # The serving side's values, so the client hits the container the stacks deployed.
        table = {"container": cfg.vllm.container_name, "port": cfg.vllm.port}
        table["model"] = cfg.vllm.model
        max_model_len = cfg.vllm.max_model_len
    table.update(bench)
    if args.container:
        table["container"] = args.container
    profile, settings = settings_from_table(
        table, profile=args.profile, max_model_len=args.max_model_len or max_model_len
    )
    if args.route == "gateway" and (cfg is None or not cfg.routing.gateway):
        raise BenchConfigError(
            "ROUTE=gateway: the sweep goes through [routing]'s Gateway, and "
            f"{args.config or 'no --config'} routes through none; set [routing] gateway = true "
            '(platform = "gke") and `make deploy`, or leave ROUTE unset to measure one replica'
        )
    settings = replace(
        settings, shared_prefix_percent=check_shared_prefix_percent(args.shared_prefix_percent)
    )
    if cfg is not None:
        # Recorded in every result (--metadata) so the report never averages two servers.
        settings = replace(settings, config_hash=compile_cache_key(cfg))
        if cfg.vllm.speculative_config is not None:
            settings = replace(settings, spec_metrics=True)
        served = cfg.vllm.served_model_name
        if served != settings.model:
            settings = replace(settings, served_model_name=served)
    return profile, settings, cfg


def _target(
    args: argparse.Namespace, cfg: Any, *, plan: bool = False
) -> tuple[BenchTarget | None, Executor]:
    """Where the sweep runs and what runs it: this machine (--on-node), the platform's choice
    (a GKE replica), or the TPU VM the config or --node/--zone name, over IAP SSH."""
    if args.on_node:
        return None, subprocess_executor
    project = args.project or (cfg.project if cfg is not None else None) or None
    if cfg is not None:
        from tpudeploy.platform import platform_for

        chosen = platform_for(cfg).bench_target(cfg, project or "", plan=plan, route=args.route)
        if chosen is not None:
            return chosen
    name = args.node or (cfg.node_id if cfg is not None else None)
    zone = args.zone or (cfg.zone if cfg is not None else None)
    if not name or not zone:
        raise BenchConfigError(
            "--node and --zone (or --config) are required to reach the TPU VM over IAP SSH "
            "(or pass --on-node when running on the node itself)"
        )
    return NodeTarget(name, zone, project), subprocess_executor


def _api_key(args: argparse.Namespace, cfg: Any = None, *, store: SecretStore | None = None) -> str:
    if args.api_key_env:
        key = os.environ.get(args.api_key_env, "")
        if not key:
            raise BenchConfigError(
                f"--api-key-env {args.api_key_env}: that variable is empty or unset; "
                "export it first or use --api-key-secret"
            )
        return key
    # vLLM listens on the node's loopback without a key (the TLS proxy checks it), and the
    # benchmark runs inside its container against 127.0.0.1: no key unless asked for one, e.g.
    # for a server started by hand with --api-key. Through the Gateway every replica's front
    # door checks it: the deployment's own key, read as make smoke reads it.
    secret = args.api_key_secret
    if not secret and args.route == "gateway" and cfg is not None:
        secret = cfg.api_key_secret_id
    if secret:
        # Read like make smoke reads it (tpudeploy.gcp.secretmanager): the value stays here.
        project = (
            args.project
            or (cfg.project if cfg is not None else None)
            or os.environ.get("GOOGLE_CLOUD_PROJECT", "").strip()
        )
        if not project:
            raise BenchConfigError(
                f"--api-key-secret {secret}: no project to read it from; pass --project or "
                "--config with project set (or export GOOGLE_CLOUD_PROJECT)"
            )
        try:
            key = (store or SecretStore.from_env(project)).access_current_key(secret)
        except SecretStoreError as exc:
            raise SweepError(f"cannot read the API key: {exc}") from None
        if not key.strip():
            raise SweepError(
                f"secret {secret!r} in project {project} is empty; store a key with `make api-key`"
            )
        return key.strip()
    return ""


def _routed(settings: SweepSettings, target: BenchTarget | None, cfg: Any) -> SweepSettings:
    """A target through the Gateway: the client sends there, and each run records the scoring
    and the replicas ready at the start."""
    if isinstance(target, PodTarget) and target.base_url:
        return replace(
            settings,
            base_url=target.base_url,
            replicas=target.replicas,
            scoring=cfg.routing.scoring,
        )
    return settings


def _cmd_plan(args: argparse.Namespace) -> int:
    profile, settings, cfg = _settings(args)
    target = None if args.on_node or not (args.node or cfg) else _target(args, cfg, plan=True)[0]
    settings = _routed(settings, target, cfg)
    cells = plan_cells(settings, base_seed=0)
    total = sum(expected_seconds(settings, cell) for cell in cells)
    print(f"# {profile}: {len(cells)} runs, ~{format_seconds(total)} at the build log's throughput")
    print("# seeds are base_seed + index; run uses the start time in seconds as base_seed")
    print("# run fills in RUN_ID and IMAGE_ID (the serving container's image id)")
    if isinstance(target, PodTarget):
        print(
            f"# each runs in {target.pod}'s {target.container} container (namespace "
            f"{target.namespace}) through the Kubernetes API's exec, the key on its stdin"
        )
        if target.base_url:
            print(
                f"# and sends to {target.base_url}, the Gateway's address from its status: "
                "the pool behind the endpoint picker, not that replica's own vLLM"
            )
    for cell in cells:
        argv = cell_command(settings, cell, run_id="RUN_ID", target=target, image_id="IMAGE_ID")
        print(shlex.join(argv))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    profile, settings, cfg = _settings(args)
    target, executor = _target(args, cfg)
    settings = _routed(settings, target, cfg)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = Path(args.out) if args.out else Path("bench-results") / f"{profile}-{stamp}"
    run_sweep(
        settings,
        out_dir=out_dir,
        target=target,
        executor=executor,
        api_key=_api_key(args, cfg),
        profile=profile,
        config_path=Path(args.config) if args.config else None,
    )
    return 0


def _price(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        price = float(value)
    except ValueError:
        price = -1.0
    if not sep or not name or price <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use MODEL=USD_PER_CHIP_HOUR, e.g. spot=0.5779")
    return name, price


def _context_grid(bench: dict[str, Any], cfg: Any) -> tuple[int, ...]:
    """Every context either profile of the config's [bench] sweeps (default: the build log's)."""
    max_model_len = cfg.vllm.max_model_len if cfg is not None else MAX_MODEL_LEN
    contexts: set[int] = set()
    for profile in PROFILES:
        _, settings = settings_from_table(bench, profile=profile, max_model_len=max_model_len)
        contexts.update(settings.contexts)
    return tuple(sorted(contexts))


def _cmd_report(args: argparse.Namespace) -> int:
    prices = dict(args.price) if args.price else None
    bench, cfg = _read_config(args.config)
    kv_pool = None
    if cfg is not None and args.kv_pool_tokens is None:
        # Size the pool for the deployed max-model-len and memory fraction, not the seed's.
        kv_pool = default_kv_pool(
            max_model_len=cfg.vllm.max_model_len,
            gpu_memory_utilization=cfg.vllm.gpu_memory_utilization,
        )
    report, paths = write_report(
        Path(args.results_dir),
        Path(args.out) if args.out else None,
        prices=prices,
        kv_pool_tokens=args.kv_pool_tokens,
        kv_pool=kv_pool,
        contexts=_context_grid(bench, cfg),
    )
    print(report.markdown)
    groups = f", {len(report.groups)} groups kept apart" if len(report.groups) > 1 else ""
    print(
        f"report: used {report.files_used} of {report.files_read} file(s), skipped "
        f"{len(report.skipped)} (listed in the report){groups}",
        file=sys.stderr,
    )
    print("wrote " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tpudeploy.benchcli", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (
        ("plan", "print every run's command and the time estimate; runs nothing"),
        ("run", "run the sweep on the node with `vllm bench serve`"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument(
            "--config", help="deployment TOML: node, zone, project, container; [bench] the sweep"
        )
        p.add_argument("--profile", choices=("full", "quick"), help="overrides bench.profile")
        p.add_argument("--node", help="TPU VM name")
        p.add_argument("--zone", help="TPU VM zone, e.g. us-west4-a")
        p.add_argument("--project", help="Google Cloud project (default: gcloud's)")
        p.add_argument("--container", help="serving container name (default vllm-gemma4)")
        p.add_argument("--on-node", action="store_true", help="run here, without SSH")
        p.add_argument("--max-model-len", type=int, help="default: config's, else 32768")
        p.add_argument(
            "--route",
            choices=("replica", "gateway"),
            default="replica",
            help="replica: one server's own vLLM (one chip, as the build log); gateway: the "
            "pool through [routing]'s Gateway and endpoint picker",
        )
        p.add_argument(
            "--shared-prefix-percent",
            type=int,
            default=0,
            help="percent of each prompt shared by every request of a run (agent turns: e.g. "
            "75); default 0, the build log's random prompts",
        )
        if name == "run":
            p.add_argument("--out", help="results directory (rerun with the same one to resume)")
            key = p.add_mutually_exclusive_group()
            key.add_argument("--api-key-secret", help="Secret Manager secret holding the API key")
            key.add_argument("--api-key-env", help="local environment variable holding the key")
    p = sub.add_parser("report", help="tables, ratios to the build log, cost, KV and plots")
    p.add_argument("results_dir")
    p.add_argument("--out", help="where report.md and the PNGs go (default: results_dir)")
    p.add_argument(
        "--kv-pool-tokens", type=int, help="KV pool size (default: planner or the build log)"
    )
    p.add_argument("--price", type=_price, action="append", help="MODEL=USD per chip-hour")
    p.add_argument(
        "--config",
        help="deployment TOML: sizes the KV pool for its vllm settings; [bench] contexts are the "
        "grid a run without tpudeploy_context metadata is matched to",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"plan": _cmd_plan, "run": _cmd_run, "report": _cmd_report}
    try:
        return commands[args.command](args)
    except (
        BenchConfigError,
        SweepError,
        ReportError,
        ConfigError,
        errors.UserError,
        OSError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted; rerun with the same --out to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(errors.run(main))
