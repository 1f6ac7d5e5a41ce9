"""The deployments the repository declares, which a change touches, and what an input names."""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tpudeploy import facts, names
from tpudeploy.durations import parse_duration
from tpudeploy.names import deploy_account_id
from tpudeploy.tpuvm.queued_resource import DEFAULT_CLEANUP_TIMEOUT, DEFAULT_DELETE_TIMEOUT

# deploy.toml is the single-deployment developer default; deployments/*.toml are the pipeline's
# environments. Both are synthesized and scanned on every pull request.
DEFAULT_CONFIG = "deploy.toml"
DEPLOYMENTS_DIR = "deployments"

# TOML keys read here. tpudeploy.config owns validation; this module routes the pipeline with
# tomllib alone, because the workflows call it before `make install` has built the venv. The
# defaults mirror tpudeploy.config.DeployConfig (tests/gitops/test_gitops.py holds them equal).
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
# Spot and on-demand: the deadline job's delay (default "8h"), or "none" for no end; and
# whether the recover workflow replaces a preempted node (tpudeploy.config.DeployConfig).
KEY_MAX_RUN_DURATION = "max_run_duration"
DEFAULT_DEADLINE = "8h"
NO_END = "none"
KEY_AUTO_RECOVER = "auto_recover"
# platform = "gke" (tpudeploy.config.gke): deployed with `make deploy` only; the pipeline's
# identities and jobs know the TPU VM's stacks, not the cluster's.
KEY_PLATFORM = "platform"
# Provisioning models whose node bills until deleted unless a deadline job deletes it.
NO_END_MODELS = frozenset({"spot", "on-demand"})
# What a deploy job does besides waiting for capacity: install (pip + npm), two synths, the
# secrets stack's apply, the live-node check and Terraform's own init/plan, with room to spare.
DEPLOY_JOB_OVERHEAD_MINUTES = 25
# A destroy job: install, synth, cdktf destroy, then the queued-resource clean-up's own wait.
DESTROY_JOB_OVERHEAD_MINUTES = 20

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
    # Spot and on-demand: seconds from deploy to the deadline job's delete; None: no deadline
    # (flex-start ends on its own; "none" bills until destroyed).
    deadline_seconds: int | None = None
    auto_recover: bool = False
    platform: str = "tpu-vm"

    @property
    def region(self) -> str:
        return names.region_of(self.zone)

    @property
    def bills_forever(self) -> bool:
        """Spot or on-demand with max_run_duration = "none": nothing ends its billing."""
        return self.provisioning in NO_END_MODELS and self.deadline_seconds is None

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
    deadline = None
    if provisioning in NO_END_MODELS:
        value = data.get(KEY_MAX_RUN_DURATION, DEFAULT_DEADLINE)
        if not (isinstance(value, str) and value.strip().lower() == NO_END):
            try:
                deadline = parse_duration(value, name=KEY_MAX_RUN_DURATION)
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
        deadline_seconds=deadline,
        auto_recover=data.get(KEY_AUTO_RECOVER) is True,
        platform=str(data.get(KEY_PLATFORM, "tpu-vm")),
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
        if dep.platform == "gke":
            # Not built yet for GKE: the deploy identity's grants and the jobs' stack order are
            # the TPU VM's, so a GKE file is deployed by `make deploy`, never by the pipeline.
            continue
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
