"""Ops commands behind the Makefile; each loads the validated config once (no cdktf here)."""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tpudeploy import errors, planner, policy, terraform
from tpudeploy.config import DeployConfig, config_path, require_project
from tpudeploy.platform import (
    guard_rails,
    load_config,
    platform_for,
    summary_lines,
)
from tpudeploy.tpuvm import queued_resource as qr

if TYPE_CHECKING:
    from tpudeploy.endpoint import Endpoint

REPO_ROOT = Path(__file__).resolve().parent.parent


def _check(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy import stateinit

    if not args.destroy:
        # Before anything else: a second file with this name acts on this same deployment.
        # Never for a destroy: stopping what bills must not wait for a rename.
        stateinit.refuse_same_name(cfg, config_path(), REPO_ROOT)
    if args.deploy or args.destroy:
        require_project(cfg, source=str(config_path()))
    if not args.destroy:
        # Checking for a synth or a deploy: the guard rails apply. A destroy never needs them.
        policy.enforce(cfg, guard_rails(cfg), source=str(config_path()))
    print(f"{config_path()}: deployment {cfg.name!r} is valid")
    print(f"  {platform_for(cfg).describe(cfg)}, project {cfg.project or '(unset)'}")
    print("\n".join(stateinit.state_lines(cfg, platform_for(cfg).stacks(cfg), REPO_ROOT)))
    if not args.destroy:
        # What `make synth` ends with, without loading cdktf (a second, not twenty).
        print()
        print("\n".join(summary_lines(cfg, today=datetime.date.today())))
    return 0


def _stacks(cfg: DeployConfig, args: argparse.Namespace) -> int:
    if args.outdir:
        print(terraform.synth_outdir(cfg))
        return 0
    platform = platform_for(cfg)
    names = list(platform.stacks(cfg))
    if args.node:
        names = list(platform.billing_stacks(cfg))
    elif args.protected:
        names = list(platform.protected_stacks(cfg))
    elif args.secrets:
        names = [cfg.secrets_stack_name]
    print(" ".join(names))
    return 0


def _capacity(cfg: DeployConfig, args: argparse.Namespace) -> int:
    print(planner.capacity_table(cfg))
    return 0


def _cost(cfg: DeployConfig, args: argparse.Namespace) -> int:
    chips = planner.lookup_accelerator(cfg.accelerator_type).chips
    today = datetime.date.today()
    print(planner.cost_table(chips=chips, prices=planner.price_table(cfg), today=today))
    print()
    print("\n".join(summary_lines(cfg, today=today)))
    return 0


def _plan_scale(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy.gke import scaleplan

    clients, context, ttft = scaleplan.resolve_inputs(
        cfg, clients=args.clients, context=args.context, ttft_ms=args.ttft_ms
    )
    plan = scaleplan.scale_plan(cfg, clients=clients, context=context, ttft_ms=ttft)
    print("\n".join(scaleplan.report(cfg, plan)))
    return 0


def _status(cfg: DeployConfig, args: argparse.Namespace) -> int:
    return platform_for(cfg).status(cfg, require_project(cfg, source=str(config_path())))


def _cleanup(cfg: DeployConfig, args: argparse.Namespace) -> int:
    """What `make destroy` runs after `cdktf destroy` (tpudeploy.platform: the TPU VM deletes a
    queued resource Terraform lost track of; GKE says which TPU nodes still bill)."""
    project = require_project(cfg, source=str(config_path()))
    return platform_for(cfg).cleanup(cfg, project, timeout=args.timeout)


def _recover(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy.gcp.scheduler import SchedulerApi
    from tpudeploy.tpuvm import recover

    platform = platform_for(cfg)
    if args.apply:
        platform.require(cfg, "recover")  # `make recover`, asked for by name
    if not platform.replaces_dead_nodes:
        # GKE replaces a preempted replica itself (the Deployment and the autoscaler): the
        # deploy's first step has nothing to do.
        note = platform.recover_note(cfg)
        if note is not None:
            print(f"tpudeploy: {note}", file=sys.stderr)
        return 0
    project = require_project(cfg, source=str(config_path()))
    mode = recover.RECOVER if args.apply else recover.DEPLOY
    try:
        decision = recover.recover(
            cfg,
            project,
            api=qr.TpuApi(log=sys.stderr),
            scheduler=lambda: SchedulerApi(log=sys.stderr),
            stack_dir=lambda: _synthesized_stack(cfg),
            mode=mode,
        )
    except (recover.RecoverError, qr.QueuedResourceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        _run_summary(f"- {cfg.name}: recovery failed: {exc}")
        return 1
    if args.apply:
        _run_summary(f"- {cfg.name}: {decision.summary}")
    return 0


def _run_summary(line: str) -> None:
    """A GitHub Actions job's summary (the recover workflow): one line per attempt."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(line.replace("\n", " ") + "\n")


def _extend(cfg: DeployConfig, args: argparse.Namespace) -> int:
    platform = platform_for(cfg)
    from tpudeploy.deadline_ops import extension_seconds

    # Cheap checks first: whether extending applies and whether BY is a duration need neither a
    # project nor credentials (issue 23: both used to be asked for before saying so).
    extension_seconds(cfg, args.by)
    project = require_project(cfg, source=str(config_path()))
    return platform.extend(
        cfg,
        project,
        args.by,
        stack_dir=lambda: _synthesized_stack(cfg, cfg.deadline_stack_name),
    )


def _synthesized_stack(cfg: DeployConfig, stack: str | None = None) -> Path:
    """Synthesize the deployment (main.py, as `make synth`) and return a stack's folder (the
    node stack's unless named)."""
    from tpudeploy.tpuvm.recover import RecoverError

    outdir = Path(os.environ.get("CDKTF_OUTDIR") or REPO_ROOT / terraform.synth_outdir(cfg))
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "main.py")],
        cwd=REPO_ROOT,
        env={**os.environ, "CDKTF_OUTDIR": str(outdir)},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RecoverError(f"synth failed: {result.stderr.strip()}")
    return outdir / "stacks" / (stack or cfg.node_stack_name)


def _preflight(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy import preflight, stateinit

    if args.purpose != "destroy":
        # deploy, deploy-secrets and diff act on the deployment by name: a second file with the
        # same name is refused before any API call. Never a destroy: stopping what bills must
        # not wait for a rename.
        stateinit.refuse_same_name(cfg, config_path(), REPO_ROOT)
    return preflight.run(cfg, args.purpose)


def _after_failure(cfg: DeployConfig, args: argparse.Namespace) -> int:
    """The last lines of a failed deploy or destroy (the Makefile calls this); exits 1, since
    it only ever runs after a failure."""
    from tpudeploy import failures

    if args.command_failed == "deploy":
        failures.after_deploy(cfg)
    else:
        failures.after_destroy(
            cfg, terraform_exit=args.terraform_exit, cleanup_exit=args.cleanup_exit
        )
    return 1


def _secret(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy.tune import hubcheck

    require_project(cfg, source=str(config_path()))
    # The token is read and checked before any credential is looked for; then Hugging Face is
    # asked about the model and the tune arms' drafts with it (warnings only).
    return hubcheck.store_token(cfg, sys.stdin, sys.stdout)


def _empty_cache(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy.gcp import storage

    project = require_project(cfg, source=str(config_path()))
    store = storage.CacheBucket.from_env()
    return storage.empty_cache(cfg, project, store, assume_yes=args.yes)


def _api_key(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy.gcp import secretmanager

    store = secretmanager.SecretStore.from_env(require_project(cfg, source=str(config_path())))
    return secretmanager.store_new_api_key(
        cfg,
        store,
        sys.stdout,
        client=args.client,
        rotate=args.rotate == "1",
        overlap=args.overlap,
        show=args.show == "1",
    )


def _usage(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy import usage

    platform = platform_for(cfg)
    project = require_project(cfg, source=str(config_path()))
    return usage.command(
        cfg,
        since=args.since,
        client=args.client,
        model=platform.usage_model(cfg),
        read_logs=lambda seconds: platform.access_logs(cfg, project, seconds),
        out=sys.stdout,
    )


def _wait(cfg: DeployConfig, args: argparse.Namespace) -> int:
    project = require_project(cfg, source=str(config_path()))
    return platform_for(cfg).wait(cfg, project, timeout=args.timeout, interval=args.interval)


def _pin(cfg: DeployConfig, args: argparse.Namespace) -> int:
    platform_for(cfg).require(cfg, "pin")
    from tpudeploy.tpuvm import guestattributes, pin
    from tpudeploy.tpuvm.queued_resource import TpuApi

    project = require_project(cfg, source=str(config_path()))
    attributes = guestattributes.node_attributes(cfg, project, TpuApi(log=sys.stderr))
    return pin.pin(cfg, attributes, config_path(), out=sys.stdout)


def _endpoint_and_key(cfg: DeployConfig, command: str) -> tuple[Endpoint, str]:
    """The front door and a key, as `make smoke` and `make accept` reach them: the platform's
    endpoint (TPU VM: the node; GKE: the Service's load balancer) and the first client's key,
    each unless ENDPOINT/TLS_SHA256 or VLLM_API_KEY say otherwise."""
    from tpudeploy import smoke

    project = require_project(cfg, source=str(config_path()))
    try:
        return platform_for(cfg).endpoint(cfg, project), smoke.resolve_api_key(cfg, project)
    except Exception as exc:
        if not errors.is_no_credentials(exc):
            raise
        # Each lookup that needed credentials has an environment variable that skips it.
        raise errors.UserError(
            f"{errors.no_credentials(exc)}; or run without them: ENDPOINT=https://HOST:PORT "
            f"TLS_SHA256=<fingerprint, from make endpoint> VLLM_API_KEY=<key> make {command}"
        ) from None


def _smoke(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy import smoke

    endpoint, key = _endpoint_and_key(cfg, "smoke")
    return smoke.run(endpoint, key, cfg.vllm.served_model_name)


def _accept(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy import accept

    endpoint, key = _endpoint_and_key(cfg, "accept")
    return accept.run(endpoint, key, accept.Limits.of(cfg))


def _endpoint(cfg: DeployConfig, args: argparse.Namespace) -> int:
    project = require_project(cfg, source=str(config_path()))
    return platform_for(cfg).endpoint_report(cfg, project, cert_out=args.cert_out or "")


def _tunnel(cfg: DeployConfig, args: argparse.Namespace) -> int:
    platform = platform_for(cfg)
    platform.require(cfg, "tunnel")
    return platform.tunnel(cfg, require_project(cfg, source=str(config_path())))


def _tls_cert(cfg: DeployConfig, args: argparse.Namespace) -> int:
    platform = platform_for(cfg)
    platform.require(cfg, "tls-cert")
    from tpudeploy import tlscert
    from tpudeploy.gcp import secretmanager

    store = secretmanager.SecretStore.from_env(require_project(cfg, source=str(config_path())))
    return tlscert.store_new_tls_cert(
        cfg,
        store,
        sys.stdout,
        rotate=args.rotate == "1",
        takes_effect=platform.tls_takes_effect,
    )


def _state_init(cfg: DeployConfig, args: argparse.Namespace) -> int:
    from tpudeploy import stateinit
    from tpudeploy.gcp.statebucket import StateBucketApi

    stateinit.refuse_same_name(cfg, config_path(), REPO_ROOT)
    return stateinit.state_init(
        cfg,
        require_project(cfg, source=str(config_path())),
        stacks=platform_for(cfg).stacks(cfg),
        api=StateBucketApi.from_env,
        synthesize=lambda: _synthesized_stack(cfg).parent.parent,
        config_file=str(config_path()),
        bucket_override=os.environ.get("STATE_BUCKET", "").strip(),
        dry_run=args.dry_run,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tpudeploy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="validate the config")
    purpose = check.add_mutually_exclusive_group()
    purpose.add_argument("--deploy", action="store_true", help="also require what deploying needs")
    purpose.add_argument(
        "--destroy", action="store_true", help="only what destroying needs (no guard rails)"
    )
    check.set_defaults(func=_check)

    stacks = sub.add_parser("stacks", help="print the stack names for cdktf")
    which = stacks.add_mutually_exclusive_group()
    which.add_argument("--node", action="store_true", help="only the node (billing) stack")
    which.add_argument("--secrets", action="store_true", help="only the long-lived stack")
    which.add_argument(
        "--protected",
        action="store_true",
        help="stacks whose deletion protection destroy-all lifts first (var deletion_protection)",
    )
    which.add_argument(
        "--outdir", action="store_true", help="the deployment's synth output folder instead"
    )
    stacks.set_defaults(func=_stacks)

    preflight = sub.add_parser(
        "preflight", help="Terraform, credentials, project and (deploy) the secrets, in a second"
    )
    preflight.add_argument("purpose", choices=("deploy", "deploy-secrets", "diff", "destroy"))
    preflight.set_defaults(func=_preflight)

    after = sub.add_parser(
        "after-failure", help="what a failed deploy or destroy left in state, and what bills"
    )
    after.add_argument("command_failed", choices=("deploy", "destroy"))
    after.add_argument("--terraform-exit", type=int, default=1, help="cdktf's exit status")
    after.add_argument("--cleanup-exit", type=int, default=0, help="the cleanup's exit status")
    after.set_defaults(func=_after_failure)

    sub.add_parser("capacity", help="KV pool, memory budget and safe concurrency").set_defaults(
        func=_capacity
    )
    sub.add_parser("cost", help="hourly, monthly and per-token cost").set_defaults(func=_cost)
    scale = sub.add_parser(
        "plan-scale", help="replicas, $/hour, $/M tokens and autoscaler targets for a load"
    )
    # Strings, checked by the planner: a bad value gets the key, the reason and the fix.
    scale.add_argument("--clients", help="concurrent clients (default [load] expected_clients)")
    scale.add_argument("--context", help="tokens of context (default [load] expected_context)")
    scale.add_argument("--ttft-ms", help="median TTFT target, ms (default [load] target_ttft_ms)")
    scale.set_defaults(func=_plan_scale)
    sub.add_parser(
        "status", help="queued resource / node state and when billing stops"
    ).set_defaults(func=_status)

    cleanup = sub.add_parser(
        "cleanup",
        help="delete the deployment's flex-start queued resource whatever Terraform's state says",
    )
    cleanup.add_argument("--timeout", type=float, help="seconds to wait for the delete")
    cleanup.set_defaults(func=_cleanup)
    recover_p = sub.add_parser(
        "recover",
        help="replace a preempted node or a suspended/failed queued resource at the next deploy",
    )
    recover_p.add_argument(
        "--apply",
        action="store_true",
        help="make recover: replace what died before its time now (never a run that ended)",
    )
    recover_p.set_defaults(func=_recover)
    extend_p = sub.add_parser(
        "extend", help="move a spot/on-demand node's (GKE: cluster's) deadline later"
    )
    extend_p.add_argument("by", help="how much later, e.g. 2h or 90m")
    extend_p.set_defaults(func=_extend)
    sub.add_parser(
        "secret", help="store the Hugging Face token (stdin or a hidden prompt) in Secret Manager"
    ).set_defaults(func=_secret)
    key_p = sub.add_parser(
        "api-key",
        help="generate a client's API key and store it in Secret Manager (not printed unless "
        "--show 1); --rotate 1 replaces it, the old key working for the overlap",
    )
    key_p.add_argument("--client", help="an [access] client (default: the first)")
    key_p.add_argument("--rotate", choices=("0", "1"), default="0", help="1: rotate the key")
    key_p.add_argument("--overlap", help="how long the old key keeps working (0: stop it now)")
    key_p.add_argument("--show", choices=("0", "1"), default="0", help="1: print the new key")
    key_p.set_defaults(func=_api_key)
    empty = sub.add_parser(
        "empty-cache",
        help="delete every compile-cache archive version (the first step of make destroy-all)",
    )
    empty.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    empty.set_defaults(func=_empty_cache)
    tls = sub.add_parser(
        "tls-cert",
        help="make the deployment's one front-door certificate and store it in Secret Manager "
        "(the key is never written to a file); every re-creation serves it",
    )
    tls.add_argument(
        "--rotate",
        choices=("0", "1"),
        default="0",
        help="1: replace the stored certificate (every agent must then re-pin)",
    )
    tls.set_defaults(func=_tls_cert)
    usage_p = sub.add_parser(
        "usage", help="each client's requests, errors, latency, tokens and cost share"
    )
    usage_p.add_argument("--since", default="24h", help="the window, e.g. 1h, 24h, 7d")
    usage_p.add_argument("--client", default="", help="one client only")
    usage_p.set_defaults(func=_usage)
    state = sub.add_parser(
        "state-init",
        help="create the deployment's state bucket and move local Terraform state into it",
    )
    state.add_argument("--dry-run", action="store_true", help="say what it would do; do nothing")
    state.set_defaults(func=_state_init)
    wait_p = sub.add_parser("wait", help="follow the boot phases until vLLM is ready (no SSH)")
    wait_p.add_argument("--timeout", type=float, default=3000.0, help="seconds (default 3000)")
    wait_p.add_argument("--interval", type=float, default=10.0, help="seconds between polls")
    wait_p.set_defaults(func=_wait)
    sub.add_parser(
        "pin", help="write the image digests the ready node runs into the deployment's TOML"
    ).set_defaults(func=_pin)
    sub.add_parser(
        "smoke",
        help="front door locked, then chat + get_weather tool call over pinned TLS "
        "(ENDPOINT=https://host:port, TLS_SHA256=fingerprint, or the node's)",
    ).set_defaults(func=_smoke)
    sub.add_parser(
        "accept",
        help="the build log's acceptance table over pinned TLS: chat, tool call, an image, "
        "needles at 2K/8K/14K, a 26,016-token prompt and one past max_model_len, determinism",
    ).set_defaults(func=_accept)
    endpoint = sub.add_parser(
        "endpoint", help="where the API is, the certificate fingerprint and how to pin it"
    )
    endpoint.add_argument(
        "--cert-out", help="also write the pinned certificate (PEM) here, for clients' CA files"
    )
    endpoint.set_defaults(func=_endpoint)
    sub.add_parser(
        "tunnel", help="forward localhost:LOCAL_PORT (default the proxy port) through IAP"
    ).set_defaults(func=_tunnel)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Every subcommand ends through tpudeploy.errors: one line with the fix, never a traceback."""
    args = build_parser().parse_args(argv)
    func: Callable[[DeployConfig, argparse.Namespace], int] = args.func
    return errors.run(lambda: func(load_config(), args))
