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
# pipeline = true: the GitOps pipeline applies this file and its bootstrap creates its node
# account, secrets, APIs and NAT (tpudeploy.config.DeployConfig.gitops_managed). state_bucket
# alone is remote state for local use and does not make a pipeline deployment.
KEY_PIPELINE = "pipeline"
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
# platform = "gke" (tpudeploy.config.gke): a cluster and N replicas instead of one TPU VM.
KEY_PLATFORM = "platform"
DEFAULT_PLATFORM = "tpu-vm"
GKE = "gke"
# Each platform's stacks, in the order `make deploy` applies them (destroy runs them backwards):
# <name>-<suffix>. tpudeploy.platform's Platform.stacks() is the truth; this module cannot import
# it (it reads TOML with tomllib alone), so tests/gitops/test_gitops_gke.py holds the two equal.
STACK_SUFFIXES = {
    DEFAULT_PLATFORM: ("secrets", "node"),
    GKE: ("secrets", "gke", "serving"),
}
# Provisioning models whose node bills until deleted unless a deadline job deletes it.
NO_END_MODELS = frozenset({"spot", "on-demand"})
# What a deploy job does besides waiting for capacity: install (pip + npm), two synths, the
# secrets stack's apply, the live-node check and Terraform's own init/plan, with room to spare.
DEPLOY_JOB_OVERHEAD_MINUTES = 25
# A destroy job: install, synth, cdktf destroy, then the queued-resource clean-up's own wait.
DESTROY_JOB_OVERHEAD_MINUTES = 20

_GOOGLE_BETA = "github.com/hashicorp/terraform-provider-google-beta/blob/main/google-beta/services/"
_KUBERNETES = "github.com/hashicorp/terraform-provider-kubernetes/blob/main/kubernetes/"
# GKE has no capacity wait in the deploy: a flex-start or spot TPU node is the cluster
# autoscaler's to provision, inside the cluster, after the apply. `make deploy` waits for
# Terraform only, and the serving Deployment is declared with wait_for_rollout = false
# (stacks/gke/serving.py: the first replica's node and boot are `make wait`'s). A job killed
# mid-create leaves a cluster or pool that state never recorded (the next create gets "already
# exists" while it bills), so the job outlasts the longest chain of Terraform's own create
# timeouts: Terraform then fails by itself and records what it made. (minutes, what, source:
# the providers' own source, read in stored copies of their repositories at recent commits, not
# at the pinned google-beta 6.50.0 / kubernetes 2.38.0 tags: a release that changed a default
# would make this stale, so the numbers are checked again on a provider upgrade.)
GKE_CREATE_CHAIN = (
    (
        20,
        "the cluster stack enables container.googleapis.com first (google_project_service)",
        f"{_GOOGLE_BETA}resourcemanager/resource_google_project_service.go: "
        "'Create: schema.DefaultTimeout(20 * time.Minute)'",
    ),
    (
        40,
        "google_container_cluster create",
        f"{_GOOGLE_BETA}container/resource_container_cluster.go: "
        "'Create: schema.DefaultTimeout(40 * time.Minute)'",
    ),
    # The pools are created side by side (the provider takes a read lock on the cluster);
    # GKE runs one pool operation at a time and the provider retries a busy cluster inside
    # the same timeout.
    (
        30,
        "google_container_node_pool create (each pool, side by side)",
        f"{_GOOGLE_BETA}container/resource_container_node_pool.go: "
        "'Create: schema.DefaultTimeout(30 * time.Minute)'",
    ),
    # The serving stack's waiting objects, side by side: the Service's load balancer address
    # (wait_for_load_balancer defaults to true) and the metrics adapter's rollout.
    (
        10,
        "the serving stack: kubernetes_service_v1 / kubernetes_deployment_v1 create",
        f"{_KUBERNETES}resource_kubernetes_service_v1.go and "
        "resource_kubernetes_deployment_v1.go: "
        "'Create: schema.DefaultTimeout(10 * time.Minute)'",
    ),
)
# The destroy job on GKE: `make destroy` (the serving stack: its objects, then the namespace),
# then `make destroy-cluster` (deletion protection lifted by a state-only apply, the pools side
# by side, then the cluster). (minutes, what, source)
GKE_DESTROY_CHAIN = (
    (
        20,
        "kubernetes_service_v1 delete, waiting until its load balancer's Service is gone",
        f"{_KUBERNETES}resource_kubernetes_service_v1.go declares no Delete timeout; "
        "the plugin SDK's "
        "ResourceData.Timeout: 'System default of 20 minutes'",
    ),
    (
        5,
        "kubernetes_namespace_v1 delete (Terminating until its objects are gone)",
        f"{_KUBERNETES}resource_kubernetes_namespace_v1.go: "
        "'Delete: schema.DefaultTimeout(5 * time.Minute)'",
    ),
    (
        30,
        "google_container_node_pool delete (each pool, side by side)",
        f"{_GOOGLE_BETA}container/resource_container_node_pool.go: "
        "'Delete: schema.DefaultTimeout(30 * time.Minute)'",
    ),
    (
        40,
        "google_container_cluster delete",
        f"{_GOOGLE_BETA}container/resource_container_cluster.go: "
        "'Delete: schema.DefaultTimeout(40 * time.Minute)'",
    ),
)
# `make destroy-cluster`'s own run: a second synth, cdktf's init and the deletion_protection
# apply (the provider's field, no API call).
DESTROY_CLUSTER_OVERHEAD_MINUTES = 10

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
    platform: str = DEFAULT_PLATFORM
    pipeline: bool = False
    # Whether the file says `pipeline` at all: deploy.toml with state_bucket and no such key was
    # a pipeline deployment before the key existed (see pipeline_deployments).
    pipeline_said: bool = False

    @property
    def region(self) -> str:
        return names.region_of(self.zone)

    @property
    def gke(self) -> bool:
        return self.platform == GKE

    @property
    def stacks(self) -> tuple[str, ...]:
        """Every stack, in the order `make deploy` applies them."""
        return tuple(f"{self.name}-{suffix}" for suffix in STACK_SUFFIXES[self.platform])

    @property
    def bills_forever(self) -> bool:
        """Nothing ends its billing: spot or on-demand with max_run_duration = "none"; on GKE,
        max_run_duration = "none" (no deadline job deletes the cluster)."""
        if self.gke:
            return self.deadline_seconds is None
        return self.provisioning in NO_END_MODELS and self.deadline_seconds is None

    @property
    def deploy_timeout_minutes(self) -> int:
        """The deploy job's time limit. A TPU VM's is derived from the capacity wait: a job
        killed mid-create leaves the queued resource to `make destroy` (Terraform kills its
        provisioner), so the job must outlast the wait plus the failed create's own clean-up.
        GKE's from the chain of Terraform's create timeouts (GKE_CREATE_CHAIN)."""
        if self.gke:
            return sum(m for m, _, _ in GKE_CREATE_CHAIN) + DEPLOY_JOB_OVERHEAD_MINUTES
        wait = self.flex_start_timeout_seconds + DEFAULT_CLEANUP_TIMEOUT
        return math.ceil(wait / 60) + DEPLOY_JOB_OVERHEAD_MINUTES

    @property
    def destroy_timeout_minutes(self) -> int:
        """The destroy job's: the destroy provisioner, then `tpudeploy cleanup`, may each wait
        for a delete (a queued resource in PROVISIONING cannot be deleted until it leaves it).
        GKE's: the serving stack's deletes, then the cluster stack's (GKE_DESTROY_CHAIN)."""
        if self.gke:
            chain = sum(m for m, _, _ in GKE_DESTROY_CHAIN)
            return chain + DESTROY_JOB_OVERHEAD_MINUTES + DESTROY_CLUSTER_OVERHEAD_MINUTES
        return math.ceil(2 * DEFAULT_DELETE_TIMEOUT / 60) + DESTROY_JOB_OVERHEAD_MINUTES

    def matrix_entry(self) -> dict[str, str]:
        # The GitHub environment carries the deployment's name: protection rules and
        # environment-scoped variables are set per deployment in the repository settings.
        # deploy_account: the service-account id of this deployment's own deploy identity; the
        # workflows build its email with the GCP_PROJECT repository variable. platform and
        # stacks (space-separated, in apply order): what the drift and destroy jobs loop over.
        return {
            "name": self.name,
            "config": self.config,
            "environment": self.name,
            "deploy_account": deploy_account_id(self.name),
            "platform": self.platform,
            "stacks": " ".join(self.stacks),
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
    pipeline = data.get(KEY_PIPELINE, False)
    if not isinstance(pipeline, bool):
        raise GitopsError(
            f"{rel}: {KEY_PIPELINE} = {pipeline!r} is not true or false; write "
            f"{KEY_PIPELINE} = true (no quotes) for a deployment the pipeline applies"
        )
    try:
        wait = parse_duration(
            data.get(KEY_FLEX_START_TIMEOUT, DEFAULT_FLEX_START_TIMEOUT),
            name=KEY_FLEX_START_TIMEOUT,
        )
    except ValueError as exc:
        raise GitopsError(f"{rel}: {exc}") from None
    platform = data.get(KEY_PLATFORM, DEFAULT_PLATFORM)
    if platform not in STACK_SUFFIXES:
        raise GitopsError(
            f"{rel}: {KEY_PLATFORM} = {platform!r} is not a platform; use "
            + " or ".join(f'"{p}"' for p in STACK_SUFFIXES)
        )
    deadline = None
    # GKE: the top-level max_run_duration is the cluster's deadline whatever `provisioning`
    # says (tpudeploy.config.platforms.GKE takes spot's default; [gke] max_run_duration only
    # recycles a flex-start node, which the pool replaces while a replica wants it).
    if provisioning in NO_END_MODELS or platform == GKE:
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
        platform=platform,
        pipeline=pipeline,
        pipeline_said=KEY_PIPELINE in data,
    )


def deployment_files(root: Path) -> list[str]:
    """deploy.toml (if present) and deployments/*.toml, relative to `root`."""
    rels = [DEFAULT_CONFIG] if (root / DEFAULT_CONFIG).is_file() else []
    folder = root / DEPLOYMENTS_DIR
    if folder.is_dir():
        rels += sorted(f"{DEPLOYMENTS_DIR}/{p.name}" for p in folder.glob("*.toml") if p.is_file())
    return rels


def same_name_refusal(config: str, name: str, other: str) -> str:
    """The one rule for two files with one name: the same stacks, the same state and the same
    synth folder, so either file acts on the other's deployment. Refused by the pipeline
    (discover) and by `make check` / `make deploy` for the file in use (tpudeploy.stateinit)."""
    return (
        f"{config}: name {name!r} is already used by {other}; two files with one name act on "
        "one deployment (its stacks, state and output folder): rename one (each deployment "
        "needs its own name)"
    )


def same_name_files(root: Path, name: str, *, besides: str) -> list[str]:
    """The deployment files other than `besides` that declare `name`. A file that does not load
    is left out: it is refused when it is the one in use."""
    found = []
    for rel in deployment_files(root):
        if rel == besides:
            continue
        try:
            dep = _load(root, rel)
        except (GitopsError, OSError):
            continue
        if dep.name == name:
            found.append(rel)
    return found


def discover(root: Path) -> list[Deployment]:
    """Every deployment file in the repository: deploy.toml (if present) and deployments/*.toml."""
    found = [_load(root, rel) for rel in deployment_files(root)]
    seen: dict[str, str] = {}
    for dep in found:
        if dep.name in seen:
            raise GitopsError(same_name_refusal(dep.config, dep.name, seen[dep.name]))
        seen[dep.name] = dep.config
    return found


def pipeline_deployments(root: Path) -> list[Deployment]:
    """Deployments the pipeline plans, deploys and checks for drift: those with pipeline = true.

    deployments/*.toml are the pipeline's files: each must say pipeline = true (its bootstrap
    then creates its node account, secrets, APIs and NAT, and its stacks stop declaring them)
    and set state_bucket (a runner's disk is gone after the job: without remote state the node
    or cluster would keep billing with nothing to destroy it). deploy.toml, the local default,
    joins the pipeline only once it says pipeline = true; its state_bucket alone is remote state
    for local use.
    """
    selected = []
    for dep in discover(root):
        # A GKE file joins exactly like a TPU VM file: its matrix entry carries its platform
        # and its three stacks, which the workflows plan, apply, check and destroy.
        if not dep.pipeline:
            if dep.config == DEFAULT_CONFIG and not (dep.state_bucket and not dep.pipeline_said):
                continue
            # deploy.toml with state_bucket and no pipeline key was a pipeline deployment when
            # state_bucket alone meant one: leaving it out silently would have the bootstrap
            # plan to destroy the node account and secrets it made for it. Ask which it is.
            raise GitopsError(pipeline_key_missing(dep))
        if dep.state_bucket is None:
            raise GitopsError(
                f"{dep.config}: {KEY_STATE_BUCKET} is not set; a pipeline deployment needs remote "
                "state (a runner's local state is lost after the job and the node keeps "
                f'billing); add {KEY_STATE_BUCKET} = "<gcs bucket>"'
            )
        selected.append(dep)
    return selected


def pipeline_key_missing(dep: Deployment) -> str:
    """Why a file the pipeline would apply is refused without pipeline = true, and the fix."""
    return (
        f"{dep.config}: {KEY_PIPELINE} is not set to true, but the GitOps pipeline would apply "
        f"this file; a pipeline deployment's stacks leave its node account, secrets, APIs and "
        "NAT to the bootstrap, and only that key says so (state_bucket alone is remote state "
        f"for local use, whose stacks declare them). Add {KEY_PIPELINE} = true to {dep.config}, "
        + (
            f"or move the file out of {DEPLOYMENTS_DIR}/ if it is for local use"
            if dep.config.startswith(f"{DEPLOYMENTS_DIR}/")
            else f"or, if it is for local use with shared state, write {KEY_PIPELINE} = false "
            "and leave it out of gitops.toml's environments (before the "
            f"{KEY_PIPELINE} key, state_bucket alone put it in the pipeline: say which)"
        )
    )


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
