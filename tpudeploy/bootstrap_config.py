"""The GitOps bootstrap's typed configuration (gitops.toml): one per repository, not per deployment.

The bootstrap creates what the pipeline needs before any deployment exists (the state bucket, the
Workload Identity Federation pool and provider, the read-only plan account, and for each pipeline
deployment its node account and its own deploy identity), so it reads its own file and every
deployment file it names; they are cross-checked so that a mismatched state bucket or project, or
an environment without a deployment, fails offline, not at `terraform init` or in the pipeline.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from tpudeploy import gitops, names
from tpudeploy.config import ConfigError, DeployConfig
from tpudeploy.config.base import Strict
from tpudeploy.config.messages import format_errors, problem
from tpudeploy.grants import cel_list, cel_string
from tpudeploy.platform import load_config, platform_for
from tpudeploy.platform import parse_config as load_config_data

DEFAULT_BOOTSTRAP_PATH = "gitops.toml"
BOOTSTRAP_ENV = "BOOTSTRAP_CONFIG"
# One bootstrap per repository, so a fixed stack name; deployment stacks all end in -secrets or
# -node, so it never collides with one.
BOOTSTRAP_STACK = "gitops-bootstrap"

# GitHub: owner 1-39 characters, repository 1-100 (letters, digits, '.', '_', '-').
_REPO_RE = re.compile(
    r"^(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/(?P<name>[A-Za-z0-9._-]{1,100})$"
)
_BRANCH_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")
# Workload identity pool and provider ids: 4-32 lowercase letters, digits and hyphens.
_WIF_ID_RE = re.compile(r"^[a-z][a-z0-9-]{2,30}[a-z0-9]$")
# google.subject is limited to 127 bytes by Workload Identity Federation, the provider's
# attribute condition to 4096 characters.
SUBJECT_LIMIT = 127
CONDITION_LIMIT = 4096
# The only workflows whose jobs may obtain a deploy identity (job_workflow_ref), and only from the
# main branch: a pull request, or a branch carrying its own copy of these files, gets nothing.
# recover.yml: the scheduled replacement of a preempted node (auto_recover), gated like a deploy.
DEPLOY_WORKFLOWS = ("deploy.yml", "destroy.yml", "recover.yml")
# The custom attribute the deploy identities' bindings match: the job's GitHub environment when the
# token passes every deploy check, this value otherwise (never a deployment name).
DEPLOY_ATTRIBUTE = "deploy_environment"
# The upstream watch (docs/tuning.md): its own workflow, its own environments (<name>-watch) and
# its own mapped attribute, so that a watch job never obtains a deploy identity and a deploy job
# never the watch's.
WATCH_WORKFLOW = "upstream-watch.yml"
WATCH_ATTRIBUTE = "watch_environment"
NOT_A_DEPLOYMENT = "-"
# Where the two numeric ids come from, for a gitops.toml that lacks them.
ID_HINTS = {
    "github_repository_id": "add `github_repository_id = N` with N from `gh api "
    "repos/OWNER/NAME --jq .id` (or run `make bootstrap-check` with GITHUB_TOKEN set)",
    "github_repository_owner_id": "add `github_repository_owner_id = N` with N from `gh api "
    "repos/OWNER/NAME --jq .owner.id` (or run `make bootstrap-check` with GITHUB_TOKEN set)",
}


class BootstrapConfig(Strict):
    """One repository's GitOps foundation. project, github_repository, its two numeric ids and
    state_bucket are required; everything else has a default."""

    project: str
    github_repository: str
    # Required: the immutable numeric ids of the repository and of its owner, which GitHub's OIDC
    # token carries as repository_id and repository_owner_id. owner/name alone is reusable: a
    # deleted repository (or a renamed owner) can be re-created by someone else under the same
    # name and would pass. Google's GitHub Actions guide and google-github-actions/auth pin these
    # (https://cloud.google.com/iam/docs/workload-identity-federation-with-deployment-pipelines,
    # "attribute conditions"). `gh api repos/OWNER/NAME --jq '.id, .owner.id'` prints them, and
    # `make bootstrap-check` compares them with GitHub's answer.
    github_repository_id: int = Field(gt=0, examples=[123456789])
    github_repository_owner_id: int = Field(gt=0, examples=[987654321])
    # The scheduled drift check runs on the default branch and authenticates as the plan account.
    main_branch: str = "main"
    # GitHub environments that get a deploy identity, one per pipeline deployment of that name;
    # empty means every pipeline deployment (tpudeploy.gitops.pipeline_deployments).
    environments: tuple[str, ...] = ()
    state_bucket: str
    state_bucket_location: str = "US-WEST4"
    # Noncurrent state versions kept per object: enough to roll back a bad apply, bounded cost.
    noncurrent_versions: int = Field(default=10, ge=1, le=100)
    # Derived, never written: the watch deployment (<name>-watch) of each pipeline deployment
    # whose [watch] enabled = true; load_bootstrap fills it from the deployment files.
    watch_environments: tuple[str, ...] = ()
    pool_id: str = "tpudeploy-github"
    provider_id: str = "github-actions"
    plan_account_id: str = "tpudeploy-plan"

    @field_validator("environments", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return tuple(v) if isinstance(v, list) else v

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if not names.PROJECT_ID_RE.fullmatch(v):
            raise ValueError("not a Google Cloud project id; use the id, e.g. my-project-123")
        return v

    @field_validator("github_repository")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not _REPO_RE.match(v) or v.endswith((".", "/.", "/..")):
            raise ValueError('not a GitHub repository; write "owner/name", no URL or .git')
        return v

    @field_validator("main_branch")
    @classmethod
    def _branch(cls, v: str) -> str:
        if not _BRANCH_RE.match(v) or ".." in v:
            raise ValueError("not a branch name; write the short name, e.g. main")
        return v

    @field_validator("environments")
    @classmethod
    def _envs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for env in v:
            if not gitops.NAME_RE.fullmatch(env):
                raise ValueError(
                    f"{env!r} is not a deployment name; the workflows name each GitHub "
                    "environment after its deployment (3-24 lowercase letters, digits, hyphens)"
                )
        return v

    @field_validator("state_bucket")
    @classmethod
    def _bucket(cls, v: str) -> str:
        if not names.BUCKET_RE.fullmatch(v):
            raise ValueError("not a Cloud Storage bucket name; write the bare name, no gs://")
        return v

    @field_validator("state_bucket_location")
    @classmethod
    def _location(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9-]{2,30}", v):
            raise ValueError("not a Cloud Storage location; write e.g. US-WEST4 or US")
        return v

    @field_validator("pool_id", "provider_id")
    @classmethod
    def _wif_id(cls, v: str) -> str:
        if not _WIF_ID_RE.match(v) or v.startswith("gcp-"):
            raise ValueError("not a workload identity id; use 4-32 lowercase letters, digits, '-'")
        return v

    @field_validator("plan_account_id")
    @classmethod
    def _sa_id(cls, v: str) -> str:
        if not names.SERVICE_ACCOUNT_ID_RE.fullmatch(v):
            raise ValueError("not a service account id; use 6-30 lowercase letters, digits, '-'")
        return v

    # Derived values: deterministic, from the config.
    def account_email(self, account_id: str) -> str:
        return names.service_account_email(account_id, self.project)

    @property
    def plan_account_email(self) -> str:
        return self.account_email(self.plan_account_id)

    def subject(self, suffix: str) -> str:
        """A GitHub OIDC `sub` claim of this repository, e.g. repo:o/n:environment:staging."""
        return f"repo:{self.github_repository}:{suffix}"

    @property
    def main_ref(self) -> str:
        return f"refs/heads/{self.main_branch}"

    @property
    def deploy_subjects(self) -> tuple[str, ...]:
        """Jobs bound to a deployment's GitHub environment (its protection rules are the
        approval gate); admitted only together with main_ref and a deploy workflow."""
        return tuple(self.subject(f"environment:{env}") for env in self.environments)

    @property
    def plan_subjects(self) -> tuple[str, ...]:
        """Pull-request plans and the scheduled drift check on the main branch."""
        return (self.subject("pull_request"), self.subject(f"ref:{self.main_ref}"))

    @property
    def deploy_workflow_refs(self) -> tuple[str, ...]:
        """job_workflow_ref of the deploy, destroy and recover workflows, as committed on main."""
        return tuple(
            f"{self.github_repository}/.github/workflows/{wf}@{self.main_ref}"
            for wf in DEPLOY_WORKFLOWS
        )

    def _repository_check(self) -> str:
        """The repository by its immutable ids (the claims are strings), and by name so that
        the condition reads as what it admits."""
        return (
            f"assertion.repository == {cel_string(self.github_repository)} && "
            f"assertion.repository_id == {cel_string(str(self.github_repository_id))} && "
            f"assertion.repository_owner_id == {cel_string(str(self.github_repository_owner_id))}"
        )

    def _deploy_check(self) -> str:
        return (
            f"assertion.ref == {cel_string(self.main_ref)} && "
            f"assertion.job_workflow_ref in {cel_list(self.deploy_workflow_refs)}"
        )

    @property
    def watch_workflow_ref(self) -> str:
        return f"{self.github_repository}/.github/workflows/{WATCH_WORKFLOW}@{self.main_ref}"

    def _watch_check(self) -> str:
        return (
            f"assertion.ref == {cel_string(self.main_ref)} && "
            f"assertion.job_workflow_ref == {cel_string(self.watch_workflow_ref)}"
        )

    @property
    def watch_subjects(self) -> tuple[str, ...]:
        return tuple(self.subject(f"environment:{env}") for env in self.watch_environments)

    @property
    def attribute_condition(self) -> str:
        """CEL evaluated on every GitHub token before any binding is looked at: only this
        repository; plan subjects (pull requests, main) as they come; environment subjects only
        from main and only from the deploy workflows. Forks, other branches, other workflows and
        other repositories are refused."""
        # Subjects as `==` disjunctions rather than `in [...]` (same meaning): checkov's
        # CKV_GCP_125 recognizes only `assertion.sub == '...'`, and keeping it applicable keeps
        # its check of the subject's shape.
        watch = (
            f" || (({_any_subject(self.watch_subjects)}) && {self._watch_check()})"
            if self.watch_environments
            else ""
        )
        return (
            f"{self._repository_check()} && ({_any_subject(self.plan_subjects)} || ("
            f"({_any_subject(self.deploy_subjects)}) && {self._deploy_check()}){watch})"
        )

    @property
    def attribute_mapping(self) -> dict[str, str]:
        """google.subject for the plan bindings and audit logs; attribute.deploy_environment for
        the deploy bindings, which repeats the deploy checks so that a binding never relies on
        the provider condition alone."""
        gate = (
            f"{self._repository_check()} && {self._deploy_check()} && "
            f"'environment' in assertion ? assertion.environment : {cel_string(NOT_A_DEPLOYMENT)}"
        )
        # The watch's: its environment only from upstream-watch.yml on main (never a deploy
        # workflow's job, whose environment maps to deploy_environment alone).
        watch_gate = (
            f"{self._repository_check()} && {self._watch_check()} && "
            f"'environment' in assertion ? assertion.environment : {cel_string(NOT_A_DEPLOYMENT)}"
        )
        watch = {f"attribute.{WATCH_ATTRIBUTE}": watch_gate} if self.watch_environments else {}
        return {
            **watch,
            "google.subject": "assertion.sub",
            "attribute.repository": "assertion.repository",
            "attribute.repository_id": "assertion.repository_id",
            "attribute.repository_owner_id": "assertion.repository_owner_id",
            "attribute.ref": "assertion.ref",
            "attribute.job_workflow_ref": "assertion.job_workflow_ref",
            f"attribute.{DEPLOY_ATTRIBUTE}": gate,
        }


def _any_subject(subjects: tuple[str, ...]) -> str:
    return " || ".join(f"assertion.sub == {cel_string(sub)}" for sub in subjects)


@dataclass(frozen=True)
class Bootstrap:
    """gitops.toml plus the validated config of each deployment it gives a deploy identity."""

    config: BootstrapConfig
    deployments: tuple[DeployConfig, ...]  # one per config.environments, same order
    # The upstream watch's deployments (<name>-watch, flex-start), one per watch_environments.
    watches: tuple[DeployConfig, ...] = ()


def cross_check(
    cfg: BootstrapConfig,
    deployments: list[gitops.Deployment],
    others: Sequence[gitops.Deployment] = (),
) -> list[str]:
    """The pipeline deployments must use this bootstrap's bucket and project. `others`: the
    repository's deployment files outside the pipeline (deploy.toml without pipeline = true),
    named when an environment lists one of them."""
    problems = []
    if not cfg.environments:
        problems.append(
            problem(
                "environments",
                [],
                "no GitHub environment may deploy: no pipeline deployment was found",
                "add deployments/<name>.toml with pipeline = true and state_bucket set, or "
                "list environments",
            )
        )
    names = {dep.name: dep.config for dep in deployments}
    local = {dep.name: dep for dep in others if not dep.pipeline}
    for env in cfg.environments:
        if env in local:
            # The file exists but does not say the pipeline applies it: its stacks declare the
            # node account and secrets the bootstrap would create too.
            problems.append(
                problem(
                    "environments",
                    env,
                    f"{local[env].config} declares it without {gitops.KEY_PIPELINE} = true, so "
                    "the pipeline does not apply it (state_bucket alone is remote state for "
                    "local use, whose stacks declare the node account, secrets and APIs the "
                    "bootstrap would create too)",
                    f"add {gitops.KEY_PIPELINE} = true to {local[env].config}, or drop {env!r} "
                    "from environments",
                )
            )
        elif env not in names:
            problems.append(
                problem(
                    "environments",
                    env,
                    "no pipeline deployment has this name, so its deploy identity would have "
                    "nothing of its own to deploy (and no resource names to be scoped to)",
                    f'add deployments/<file>.toml with name = "{env}", pipeline = true and '
                    "state_bucket, or drop "
                    "it from environments (known: " + (", ".join(sorted(names)) or "none") + ")",
                )
            )
        if len(cfg.subject(f"environment:{env}").encode()) > SUBJECT_LIMIT:
            problems.append(
                problem(
                    "environments",
                    env,
                    f"the token subject for it exceeds Workload Identity's {SUBJECT_LIMIT} bytes",
                    "use a shorter deployment name",
                )
            )
    for dep in deployments:
        if dep.state_bucket is not None and dep.state_bucket != cfg.state_bucket:
            problems.append(
                problem(
                    "state_bucket",
                    cfg.state_bucket,
                    f"{dep.config} keeps its state in {dep.state_bucket!r}, which its deploy "
                    "identity cannot write",
                    f'set state_bucket = "{cfg.state_bucket}" in {dep.config}',
                )
            )
        if dep.project is not None and dep.project != cfg.project:
            problems.append(
                problem(
                    "project",
                    cfg.project,
                    f"{dep.config} deploys into {dep.project!r}, where CI accounts hold no role",
                    f"use the bootstrap's project in {dep.config}, or bootstrap that project too",
                )
            )
    if len(cfg.attribute_condition) > CONDITION_LIMIT:
        problems.append(
            problem(
                "environments",
                list(cfg.environments),
                f"the provider's attribute condition would be {len(cfg.attribute_condition)} "
                f"characters, over Workload Identity Federation's {CONDITION_LIMIT}",
                "split the deployments over two repositories or bootstraps",
            )
        )
    return problems


def parse_bootstrap(
    data: dict[str, Any],
    *,
    deployments: list[gitops.Deployment],
    source: str,
    others: Sequence[gitops.Deployment] = (),
) -> BootstrapConfig:
    """Validate raw TOML; unset environments become the pipeline deployments' names."""
    data = dict(data)
    if not data.get("environments"):
        data["environments"] = [d.name for d in deployments]
    try:
        cfg = BootstrapConfig.model_validate(data)
    except ValidationError as exc:
        problems = format_errors(exc, BootstrapConfig, hints=ID_HINTS)
        raise ConfigError(source, problems) from None
    problems = cross_check(cfg, deployments, others)
    if problems:
        raise ConfigError(source, problems)
    return cfg


def bootstrap_path() -> Path:
    return Path(os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP_PATH)


def load_bootstrap(path: str | Path | None = None, *, root: str | Path = ".") -> Bootstrap:
    """Read gitops.toml (or BOOTSTRAP_CONFIG), check it against the repository's deployments and
    load the full config of each deployment that gets a deploy identity."""
    p = Path(path) if path is not None else bootstrap_path()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            str(p), [f"file not found; create it (see docs/gitops.md) or set {BOOTSTRAP_ENV}"]
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), [f"not valid TOML ({exc}); fix the syntax"]) from None
    try:
        found = gitops.pipeline_deployments(Path(root))
        every = gitops.discover(Path(root))
    except gitops.GitopsError as exc:
        raise ConfigError(str(p), [str(exc)]) from None
    cfg = parse_bootstrap(data, deployments=found, source=str(p), others=every)
    by_name = {dep.name: dep for dep in found}
    # Every name, id and bucket the grants are scoped to comes from the deployment's own config
    # (tpudeploy.config.DeployConfig), so the bootstrap and the deployment can never disagree.
    configs = tuple(load_config(Path(root) / by_name[env].config) for env in cfg.environments)
    watches = tuple(
        _watch_config(dep, Path(root) / by_name[dep.name].config)
        for dep in configs
        if dep.watch.enabled
    )
    if watches:
        cfg = cfg.model_copy(update={"watch_environments": tuple(w.name for w in watches)})
    return Bootstrap(config=cfg, deployments=configs, watches=watches)


def _watch_config(dep: DeployConfig, path: Path) -> DeployConfig:
    """The watch deployment of `dep` ([watch] enabled): its own name, accounts and secrets."""
    from tpudeploy.watchbudget import name_problem, watch_data

    problem_text = name_problem(dep)
    if problem_text:
        raise ConfigError(str(path), [problem_text])
    platform_for(dep).require(dep, "tune")  # the watch runs make tune's harness
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    return load_config_data(watch_data(raw, dep, dep.vllm.image), source=f"{path} [watch]")
