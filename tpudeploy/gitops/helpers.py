"""GitOps helpers for the workflows: which deployments exist or changed, and what bills."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from tpudeploy.gitops.billing import (
    NOTICE,
    Finding,
    cloud_billing,
    deadline_hours,
    static_billing,
)
from tpudeploy.gitops.deployments import (
    KEY_PROJECT,
    NAME_RE,
    PROJECT_RE,
    STACK_SUFFIXES,
    GitopsError,
    changed_deployments,
    discover,
    pipeline_deployments,
    removed_deployment_files,
    resolve_input,
)
from tpudeploy.gitops.plan_report import pinned_versions, plan_report
from tpudeploy.gitops.recovery import candidates, judge


def _read_json_list(path: str) -> list[dict[str, object]]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    data = json.loads(text) if text.strip() else []
    if not isinstance(data, list):
        raise GitopsError(f"{path}: expected a JSON list (gcloud --format=json)")
    return [item for item in data if isinstance(item, dict)]


def _annotate(findings: Sequence[Finding]) -> None:
    for finding in findings:
        # One line per annotation: a newline would end the workflow command early.
        print(f"::{finding.level}::{finding.message.replace(chr(10), ' ')}")


def _cmd_matrix(args: argparse.Namespace) -> int:
    root = Path(args.root)
    deployments = pipeline_deployments(root)
    if args.changed_from is not None:
        changed = _read_lines(args.changed_from)
        for rel in removed_deployment_files(root, changed):
            print(
                f"::warning::{rel} was removed: if its stacks were deployed they keep billing; "
                "run the destroy workflow for it (from a commit that still has the file)",
                file=sys.stderr,
            )
        names = set(changed_deployments(deployments, changed))
        deployments = [d for d in deployments if d.name in names]
    print(json.dumps([d.matrix_entry() for d in deployments], separators=(",", ":")))
    return 0


def _cmd_configs(args: argparse.Namespace) -> int:
    for dep in discover(Path(args.root)):
        print(dep.config)
    return 0


def _cmd_resolve(args: argparse.Namespace) -> int:
    dep = resolve_input(Path(args.root), args.deployment)
    for key, value in dep.matrix_entry().items():
        print(f"{key}={value}")
    return 0


def _cmd_zones(args: argparse.Namespace) -> int:
    pairs = set()
    for dep in pipeline_deployments(Path(args.root)):
        project = dep.project or args.default_project
        if not project or PROJECT_RE.fullmatch(project) is None:
            raise GitopsError(
                f"{dep.config}: no {KEY_PROJECT} set and no valid default project "
                "(repository variable GCP_PROJECT)"
            )
        pairs.add((project, dep.zone))
    for project, zone in sorted(pairs):
        print(f"{project} {zone}")
    return 0


def _cmd_billing(args: argparse.Namespace) -> int:
    deployments = discover(Path(args.root))
    findings = static_billing(deployments)
    nodes = [n for path in args.nodes_json for n in _read_json_list(path)]
    queued = [q for path in args.queued_json for q in _read_json_list(path)]
    findings += cloud_billing(
        nodes,
        queued,
        now=datetime.now(UTC),
        max_age_hours=args.max_age_hours,
        deadlines=deadline_hours(deployments),
    )
    _annotate(findings)
    # Notices (what ends a GKE deployment's billing) are said, never failed on.
    problems = [f for f in findings if f.level != NOTICE]
    if not problems:
        print("no node bills without an end time")
    failed = any(f.level == "error" for f in problems) or (args.strict and bool(problems))
    return 1 if failed else 0


def _cmd_recover_targets(args: argparse.Namespace) -> int:
    """'project zone region' of each deployment the recover workflow watches (none: nothing)."""
    lines = set()
    for dep in candidates(pipeline_deployments(Path(args.root))):
        project = dep.project or args.default_project
        if not project or PROJECT_RE.fullmatch(project) is None:
            raise GitopsError(
                f"{dep.config}: no {KEY_PROJECT} set and no valid default project "
                "(repository variable GCP_PROJECT)"
            )
        lines.add(f"{project} {dep.zone} {dep.region}")
    for line in sorted(lines):
        print(line)
    return 0


def _cmd_recover_select(args: argparse.Namespace) -> int:
    """The matrix of deployments to recover; one summary line per candidate."""
    verdicts = judge(
        pipeline_deployments(Path(args.root)),
        nodes=[n for path in args.nodes_json for n in _read_json_list(path)],
        jobs=[j for path in args.jobs_json for j in _read_json_list(path)],
        firewalls=[f for path in args.firewalls_json for f in _read_json_list(path)],
        now=datetime.now(UTC),
    )
    lines = [v.line for v in verdicts] or ["- no deployment sets auto_recover = true"]
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as summary:
            summary.write("\n".join(["### recover", *lines]) + "\n")
    for line in lines:
        print(line, file=sys.stderr)
    chosen = [v.deployment.matrix_entry() for v in verdicts if v.recover]
    print(json.dumps(chosen, separators=(",", ":")))
    return 0


def _read_lines(path: str) -> list[str]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return text.splitlines()


def _cmd_plan_report(args: argparse.Namespace) -> int:
    if NAME_RE.fullmatch(args.name) is None:
        raise GitopsError(f"plan-report: {args.name!r} is not a deployment name")
    output = Path(args.output).read_text(encoding="utf-8", errors="replace")
    config = Path(args.root) / args.config
    versions = pinned_versions(config.read_text(encoding="utf-8")) if config.is_file() else {}
    stacks = args.stacks.split()
    known = {f"{args.name}-{suffix}" for suffixes in STACK_SUFFIXES.values() for suffix in suffixes}
    bad = [s for s in stacks if s not in known]
    if bad:
        raise GitopsError(f"plan-report: {bad[0]!r} is not a stack of {args.name}")
    check = args.check_output
    check_output = (
        Path(check).read_text(encoding="utf-8", errors="replace")
        if check and Path(check).is_file()
        else ""
    )
    print(
        plan_report(
            name=args.name,
            config=args.config,
            exit_code=args.exit_code,
            output=output,
            versions=versions,
            stacks=stacks,
            check_output=check_output,
        )
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tpudeploy.gitops", description=__doc__)
    parser.add_argument("--root", default=".", help="repository root (default: .)")
    sub = parser.add_subparsers(dest="command", required=True)

    matrix = sub.add_parser("matrix", help="JSON matrix of pipeline deployments")
    matrix.add_argument(
        "--changed-from",
        metavar="FILE",
        help="only deployments affected by the paths listed in FILE ('-' for stdin)",
    )
    matrix.set_defaults(func=_cmd_matrix)

    configs = sub.add_parser("configs", help="every deployment file, one per line")
    configs.set_defaults(func=_cmd_configs)

    resolve = sub.add_parser("resolve", help="validate a workflow input; print name/config")
    resolve.add_argument("deployment")
    resolve.set_defaults(func=_cmd_resolve)

    zones = sub.add_parser("zones", help="'project zone' pairs the pipeline deploys to")
    zones.add_argument("--default-project", default="")
    zones.set_defaults(func=_cmd_zones)

    report = sub.add_parser("plan-report", help="markdown for one deployment's plan output")
    report.add_argument("--name", required=True)
    report.add_argument("--config", required=True)
    report.add_argument("--exit-code", type=int, required=True)
    report.add_argument(
        "--stacks", default="", help="the deployment's stacks in apply order (the matrix entry's)"
    )
    report.add_argument(
        "--check-output", metavar="FILE", help="`make check`'s output: its cost and billing lines"
    )
    report.add_argument("output", help="file holding the captured `make diff` output")
    report.set_defaults(func=_cmd_plan_report)

    targets = sub.add_parser(
        "recover-targets", help="'project zone region' of the auto_recover deployments"
    )
    targets.add_argument("--default-project", default="")
    targets.set_defaults(func=_cmd_recover_targets)

    select = sub.add_parser("recover-select", help="JSON matrix of deployments to recover")
    select.add_argument("--nodes-json", action="append", default=[], metavar="FILE")
    select.add_argument("--jobs-json", action="append", default=[], metavar="FILE")
    select.add_argument("--firewalls-json", action="append", default=[], metavar="FILE")
    select.add_argument("--summary", help="append the verdicts to this file (the run summary)")
    select.set_defaults(func=_cmd_recover_select)

    billing = sub.add_parser("billing-check", help="report nodes that bill with no end time")
    billing.add_argument("--nodes-json", action="append", default=[], metavar="FILE")
    billing.add_argument("--queued-json", action="append", default=[], metavar="FILE")
    billing.add_argument(
        "--max-age-hours",
        type=float,
        default=12.0,
        help="a node with no end time older than this fails the check (default 12)",
    )
    billing.add_argument("--strict", action="store_true", help="fail on warnings too")
    billing.set_defaults(func=_cmd_billing)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except GitopsError as exc:
        print(f"::error::{exc}", file=sys.stderr)
        return 2
    return result
