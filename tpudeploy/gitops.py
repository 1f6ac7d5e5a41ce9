"""GitOps helpers for the workflows: which deployments exist or changed, and what bills."""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import re
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tpudeploy import facts, names
from tpudeploy.durations import parse_duration
from tpudeploy.names import deploy_account_id
from tpudeploy.queued_resource import DEFAULT_CLEANUP_TIMEOUT, DEFAULT_DELETE_TIMEOUT

# deploy.toml is the single-deployment developer default; deployments/*.toml are the pipeline's
# environments. Both are synthesized and scanned on every pull request.
DEFAULT_CONFIG = "deploy.toml"
DEPLOYMENTS_DIR = "deployments"

# TOML keys read here. tpudeploy.config owns validation; this module routes the pipeline with
# tomllib alone, because the workflows call it before `make install` has built the venv. The
# defaults mirror tpudeploy.config.DeployConfig (tests/test_gitops.py holds them equal).
KEY_NAME = "name"
KEY_STATE_BUCKET = "state_bucket"
KEY_PROVISIONING = "provisioning"
KEY_PROJECT = "project"
KEY_ZONE = "zone"
DEFAULT_NAME = "gemma4-v5e"
DEFAULT_PROVISIONING = "flex-start"
# The build log's zone, where flex-start v5litepod-1 was verified (tpudeploy.facts).
DEFAULT_ZONE = facts.ZONE
KEY_FLEX_START_TIMEOUT = "flex_start_timeout"
DEFAULT_FLEX_START_TIMEOUT = "1h"
# What a deploy job does besides waiting for capacity: install (pip + npm), two synths, the
# secrets stack's apply, the live-node check and Terraform's own init/plan, with room to spare.
DEPLOY_JOB_OVERHEAD_MINUTES = 25
# A destroy job: install, synth, cdktf destroy, then the queued-resource clean-up's own wait.
DESTROY_JOB_OVERHEAD_MINUTES = 20
NO_END_TIME = frozenset({"spot", "on-demand"})

# A name ends up in stack names, state prefixes, concurrency groups and GitHub environment names:
# lowercase letters, digits and inner hyphens keep it safe in every one of them (tpudeploy.names).
NAME_RE = names.DEPLOYMENT_NAME_RE
PROJECT_RE = names.PROJECT_ID_RE
ZONE_RE = names.ZONE_RE
# What a person types into the destroy workflow: a name, name.toml, or deployments/name.toml.
INPUT_RE = re.compile(rf"(?:deployments/)?{names.DEPLOYMENT_NAME}(?:\.toml)?")

# Every state object the pipeline writes sits under this folder of the state bucket, one
# sub-folder per deployment (stacks/common.py state_prefix; the deploy identities' state grants).
STATE_PREFIX_ROOT = "tpudeploy"

# Files that cannot change what Terraform plans. Anything else (code, templates, pins, the
# Makefile, workflows) may change every deployment's plan, so it selects all of them.
NON_INFRA_PATTERNS = ("*.md", "docs/*", "tests/*", "LICENSE", ".gitignore")


class GitopsError(ValueError):
    """A deployment file or workflow input the pipeline refuses; the message says the fix."""


@dataclass(frozen=True)
class Deployment:
    name: str
    config: str  # path relative to the repository root, e.g. deployments/staging.toml
    provisioning: str
    project: str | None
    zone: str
    state_bucket: str | None
    # Seconds a flex-start create waits for capacity before it gives up (and cleans up).
    flex_start_timeout_seconds: int = 3600

    @property
    def deploy_timeout_minutes(self) -> int:
        """The deploy job's time limit, derived from the capacity wait: a job killed mid-create
        leaves the queued resource to `make destroy` (Terraform kills its provisioner), so the
        job must outlast the wait plus the failed create's own clean-up."""
        wait = self.flex_start_timeout_seconds + DEFAULT_CLEANUP_TIMEOUT
        return math.ceil(wait / 60) + DEPLOY_JOB_OVERHEAD_MINUTES

    @property
    def destroy_timeout_minutes(self) -> int:
        """The destroy job's: the destroy provisioner, then `tpudeploy cleanup`, may each wait
        for a delete (a queued resource in PROVISIONING cannot be deleted until it leaves it)."""
        return math.ceil(2 * DEFAULT_DELETE_TIMEOUT / 60) + DESTROY_JOB_OVERHEAD_MINUTES

    def matrix_entry(self) -> dict[str, str]:
        # The GitHub environment carries the deployment's name: protection rules and
        # environment-scoped variables are set per deployment in the repository settings.
        # deploy_account: the service-account id of this deployment's own deploy identity; the
        # workflows build its email with the GCP_PROJECT repository variable.
        return {
            "name": self.name,
            "config": self.config,
            "environment": self.name,
            "deploy_account": deploy_account_id(self.name),
            "timeout_minutes": str(self.deploy_timeout_minutes),
            "destroy_timeout_minutes": str(self.destroy_timeout_minutes),
        }


def _load(root: Path, rel: str) -> Deployment:
    path = root / rel
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise GitopsError(f"{rel}: not valid TOML ({exc}); fix the syntax") from exc
    name = data.get(KEY_NAME, DEFAULT_NAME)
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise GitopsError(
            f"{rel}: {KEY_NAME} = {name!r} is not a deployment name; use 3-24 lowercase "
            'letters, digits and hyphens, starting with a letter (e.g. name = "staging")'
        )
    provisioning = str(data.get(KEY_PROVISIONING, DEFAULT_PROVISIONING)).lower()
    project = data.get(KEY_PROJECT)
    if project is not None and (
        not isinstance(project, str) or PROJECT_RE.fullmatch(project) is None
    ):
        raise GitopsError(f"{rel}: {KEY_PROJECT} = {project!r} is not a Google Cloud project id")
    zone = data.get(KEY_ZONE, DEFAULT_ZONE)
    if not isinstance(zone, str) or ZONE_RE.fullmatch(zone) is None:
        raise GitopsError(f"{rel}: {KEY_ZONE} = {zone!r} is not a zone (e.g. us-west4-a)")
    bucket = data.get(KEY_STATE_BUCKET)
    try:
        wait = parse_duration(
            data.get(KEY_FLEX_START_TIMEOUT, DEFAULT_FLEX_START_TIMEOUT),
            name=KEY_FLEX_START_TIMEOUT,
        )
    except ValueError as exc:
        raise GitopsError(f"{rel}: {exc}") from None
    return Deployment(
        name=name,
        config=rel,
        provisioning=provisioning,
        project=project,
        zone=zone,
        state_bucket=bucket if isinstance(bucket, str) and bucket else None,
        flex_start_timeout_seconds=wait,
    )


def discover(root: Path) -> list[Deployment]:
    """Every deployment file in the repository: deploy.toml (if present) and deployments/*.toml."""
    rels = [DEFAULT_CONFIG] if (root / DEFAULT_CONFIG).is_file() else []
    folder = root / DEPLOYMENTS_DIR
    if folder.is_dir():
        rels += sorted(f"{DEPLOYMENTS_DIR}/{p.name}" for p in folder.glob("*.toml") if p.is_file())
    found = [_load(root, rel) for rel in rels]
    seen: dict[str, str] = {}
    for dep in found:
        if dep.name in seen:
            # Same name means the same stacks and the same state: two files would fight.
            raise GitopsError(
                f"{dep.config}: name {dep.name!r} is already used by {seen[dep.name]}; "
                "each deployment needs its own name"
            )
        seen[dep.name] = dep.config
    return found


def pipeline_deployments(root: Path) -> list[Deployment]:
    """Deployments the pipeline plans, deploys and checks for drift: those with remote state.

    A runner's disk is gone after the job, so a deployment without state_bucket would lose its
    state and leave the TPU billing with nothing to destroy it. deployments/*.toml must set it;
    deploy.toml (the local default) joins the pipeline only once it does.
    """
    selected = []
    for dep in discover(root):
        if dep.state_bucket is None:
            if dep.config == DEFAULT_CONFIG:
                continue
            raise GitopsError(
                f"{dep.config}: {KEY_STATE_BUCKET} is not set; a pipeline deployment needs remote "
                "state (a runner's local state is lost after the job and the node keeps "
                f'billing); add {KEY_STATE_BUCKET} = "<gcs bucket>"'
            )
        selected.append(dep)
    return selected


def changed_deployments(deployments: Sequence[Deployment], changed: Iterable[str]) -> list[str]:
    """Names of deployments whose plan a change to `changed` (repo-relative paths) may alter."""
    by_config = {dep.config: dep.name for dep in deployments}
    hit: set[str] = set()
    for path in (p.strip() for p in changed):
        if not path:
            continue
        if path in by_config:
            hit.add(by_config[path])
        elif path == DEFAULT_CONFIG or (
            path.startswith(f"{DEPLOYMENTS_DIR}/") and path.endswith(".toml")
        ):
            # A deployment file that is not (or no longer) in the pipeline: deleted, or
            # deploy.toml without remote state. Nothing of it can be planned.
            continue
        elif not any(fnmatch.fnmatch(path, pattern) for pattern in NON_INFRA_PATTERNS):
            return [dep.name for dep in deployments]
    return [dep.name for dep in deployments if dep.name in hit]


def removed_deployment_files(root: Path, changed: Iterable[str]) -> list[str]:
    """Changed deployment files that no longer exist: their stacks may still be billing."""
    return sorted(
        p
        for p in (c.strip() for c in changed)
        if (p == DEFAULT_CONFIG or (p.startswith(f"{DEPLOYMENTS_DIR}/") and p.endswith(".toml")))
        and not (root / p).exists()
    )


def resolve_input(root: Path, text: str) -> Deployment:
    """Map the destroy workflow's free-text input onto a known deployment, or refuse it.

    The input is matched against the files that exist, never joined into a path, so neither
    `../` nor shell metacharacters can reach a command.
    """
    cleaned = text.strip()
    match = INPUT_RE.fullmatch(cleaned)
    if match is None:
        raise GitopsError(
            f"deployment input {text!r} is not a deployment name; give e.g. 'staging' or "
            "'deployments/staging.toml'"
        )
    deployments = pipeline_deployments(root)
    for dep in deployments:
        # The name, the file, or the file's own name with or without .toml ("staging" for
        # deployments/staging.toml, whose deployment is called gemma4-staging).
        stem = Path(dep.config).stem if dep.config.startswith(DEPLOYMENTS_DIR) else None
        if cleaned in (dep.name, dep.config) or (
            stem is not None and cleaned in (f"{dep.name}.toml", stem, f"{stem}.toml")
        ):
            return dep
    known = ", ".join(d.name for d in deployments) or "none"
    raise GitopsError(f"deployment {cleaned!r} not found; pipeline deployments: {known}")


# ---- billing: static (what the files declare) and cloud (what gcloud lists) ----

# Nodes in these states no longer run a workload but still hold quota until deleted (seed:
# a preempted spot TPU VM cannot be restarted; it must be deleted and created again).
DEAD_NODE_STATES = frozenset({"PREEMPTED", "TERMINATED"})
# A flex-start queued resource whose run ended (or never got capacity) holds quota too.
DEAD_QUEUED_STATES = frozenset({"SUSPENDED", "FAILED"})
ALIVE_NODE_STATES = frozenset({"CREATING", "READY", "RESTARTING", "REPAIRING", "STARTING"})


@dataclass(frozen=True)
class Finding:
    level: str  # "warning" or "error": a GitHub annotation level
    message: str


def static_billing(deployments: Sequence[Deployment]) -> list[Finding]:
    """Deployments whose node, once deployed, bills until someone destroys it."""
    return [
        Finding(
            "warning",
            f"{dep.config}: {dep.name} uses {KEY_PROVISIONING} = {dep.provisioning!r}: once "
            "deployed its node bills with no end time until `make destroy` (or the destroy "
            "workflow); flex-start stops itself",
        )
        for dep in deployments
        if dep.provisioning in NO_END_TIME
    ]


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _age_hours(created: object, now: datetime) -> float | None:
    if not isinstance(created, str) or not created:
        return None
    try:
        when = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (now - when).total_seconds() / 3600


def cloud_billing(
    nodes: Sequence[dict[str, object]],
    queued: Sequence[dict[str, object]],
    *,
    now: datetime,
    max_age_hours: float,
) -> list[Finding]:
    """Judge `gcloud alpha compute tpus tpu-vm list` and `... queued-resources list` JSON.

    Errors: dead nodes and ended queued resources (drift: the repository says it runs, the cloud
    says it does not, and quota stays held), and nodes with no termination time running longer
    than `max_age_hours`. Younger such nodes are warnings.
    """
    findings: list[Finding] = []
    for node in nodes:
        name = _short(str(node.get("name", "?")))
        state = str(node.get("state", ""))
        if state in DEAD_NODE_STATES:
            findings.append(
                Finding(
                    "error",
                    f"TPU node {name} is {state}: it cannot be restarted and holds quota; "
                    "run the deploy workflow again (or `make destroy`) to replace it",
                )
            )
            continue
        if state not in ALIVE_NODE_STATES:
            continue
        scheduling = node.get("schedulingConfig")
        ends = isinstance(scheduling, dict) and bool(scheduling.get("terminationTimestamp"))
        if ends:
            continue
        age = _age_hours(node.get("createTime"), now)
        age_text = f"{age:.1f} h" if age is not None else "an unknown time"
        level = "error" if age is None or age > max_age_hours else "warning"
        findings.append(
            Finding(
                level,
                f"TPU node {name} is {state} with no termination time and has run {age_text}: "
                "it bills until deleted (`make destroy` or the destroy workflow)",
            )
        )
    for resource in queued:
        name = _short(str(resource.get("name", "?")))
        state_obj = resource.get("state")
        state = str(state_obj.get("state", "")) if isinstance(state_obj, dict) else ""
        if state in DEAD_QUEUED_STATES:
            findings.append(
                Finding(
                    "error",
                    f"queued resource {name} is {state}: its run ended or never started and it "
                    "holds quota; run the destroy workflow, then deploy again if still wanted",
                )
            )
    return findings


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


# ---- pull-request plan report ----

# A GitHub comment holds at most 65,536 characters and several deployments share one comment.
PLAN_DETAIL_LIMIT = 20_000
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SUMMARY = re.compile(r"Plan: \d+ to add, \d+ to change, \d+ to destroy|No changes\.|Error: ")


def plan_report(*, name: str, config: str, exit_code: int, output: str) -> str:
    """Markdown for one deployment's `cdktf diff`: summary lines first, full output folded."""
    # A fence inside the plan output would close the code block early and render the rest.
    text = _ANSI.sub("", output).replace("```", "'''")
    summary: list[str] = []
    for line in text.splitlines():
        if _SUMMARY.search(line) and line.strip() not in summary:
            summary.append(line.strip())
    status = "plan succeeded" if exit_code == 0 else f"plan FAILED (exit {exit_code})"
    if len(text) > PLAN_DETAIL_LIMIT:
        text = text[:PLAN_DETAIL_LIMIT] + "\n... truncated: the full plan is in the job log\n"
    lines = [f"### `{name}` ({config}): {status}", ""]
    lines += [f"- {s}" for s in summary] or ["- no plan summary found in the output"]
    lines += ["", "<details><summary>cdktf diff output</summary>", "", "```", text, "```"]
    lines += ["", "</details>", ""]
    return "\n".join(lines)


# ---- command line ----


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
    findings = static_billing(discover(Path(args.root)))
    nodes = [n for path in args.nodes_json for n in _read_json_list(path)]
    queued = [q for path in args.queued_json for q in _read_json_list(path)]
    findings += cloud_billing(
        nodes, queued, now=datetime.now(UTC), max_age_hours=args.max_age_hours
    )
    _annotate(findings)
    if not findings:
        print("no node bills without an end time")
    failed = any(f.level == "error" for f in findings) or (args.strict and bool(findings))
    return 1 if failed else 0


def _read_lines(path: str) -> list[str]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return text.splitlines()


def _cmd_plan_report(args: argparse.Namespace) -> int:
    if NAME_RE.fullmatch(args.name) is None:
        raise GitopsError(f"plan-report: {args.name!r} is not a deployment name")
    output = Path(args.output).read_text(encoding="utf-8", errors="replace")
    print(plan_report(name=args.name, config=args.config, exit_code=args.exit_code, output=output))
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
    report.add_argument("output", help="file holding the captured `make diff` output")
    report.set_defaults(func=_cmd_plan_report)

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


if __name__ == "__main__":
    raise SystemExit(main())
