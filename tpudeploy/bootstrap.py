"""The GitOps bootstrap's typed configuration (gitops.toml): one per repository, not per deployment.

The bootstrap creates what every pipeline deployment shares (the state bucket, the Workload
Identity Federation pool and provider, the deploy and plan service accounts), so it reads its own
file instead of a table repeated in each deployment file; the deployments are cross-checked
against it so that a mismatched state bucket or project fails offline, not at `terraform init`.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

from tpudeploy import gitops
from tpudeploy.config import ConfigError, _problem, _Strict

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
_PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$")
# Workload identity pool and provider ids: 4-32 lowercase letters, digits and hyphens.
_WIF_ID_RE = re.compile(r"^[a-z][a-z0-9-]{2,30}[a-z0-9]$")
# Service account ids: 6-30 characters.
_SA_ID_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
# google.subject is limited to 127 bytes by Workload Identity Federation.
SUBJECT_LIMIT = 127


class BootstrapConfig(_Strict):
    """One repository's GitOps foundation. Only project, github_repository and state_bucket are
    required; everything else has a default."""

    project: str
    github_repository: str
    # Optional: the numeric id survives a rename and cannot be re-registered by someone else
    # after a deletion, unlike owner/name. `gh api repos/OWNER/NAME --jq .id` prints it.
    github_repository_id: int | None = Field(default=None, gt=0)
    # The scheduled drift check runs on the default branch and authenticates as the plan account.
    main_branch: str = "main"
    # GitHub environments allowed to use the deploy account; empty means every pipeline
    # deployment's name (tpudeploy.gitops.pipeline_deployments), which is what the workflows use.
    environments: tuple[str, ...] = ()
    state_bucket: str
    state_bucket_location: str = "US-WEST4"
    # Noncurrent state versions kept per object: enough to roll back a bad apply, bounded cost.
    noncurrent_versions: int = Field(default=10, ge=1, le=100)
    pool_id: str = "tpudeploy-github"
    provider_id: str = "github-actions"
    deploy_account_id: str = "tpudeploy-deploy"
    plan_account_id: str = "tpudeploy-plan"

    @field_validator("environments", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return tuple(v) if isinstance(v, list) else v

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if not _PROJECT_RE.match(v):
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
        if not _BUCKET_RE.match(v):
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

    @field_validator("deploy_account_id", "plan_account_id")
    @classmethod
    def _sa_id(cls, v: str) -> str:
        if not _SA_ID_RE.match(v):
            raise ValueError("not a service account id; use 6-30 lowercase letters, digits, '-'")
        return v

    # Derived values: deterministic, from the config.
    def account_email(self, account_id: str) -> str:
        return f"{account_id}@{self.project}.iam.gserviceaccount.com"

    @property
    def deploy_account_email(self) -> str:
        return self.account_email(self.deploy_account_id)

    @property
    def plan_account_email(self) -> str:
        return self.account_email(self.plan_account_id)

    def subject(self, suffix: str) -> str:
        """A GitHub OIDC `sub` claim of this repository, e.g. repo:o/n:environment:staging."""
        return f"repo:{self.github_repository}:{suffix}"

    @property
    def deploy_subjects(self) -> tuple[str, ...]:
        """Only jobs bound to a deployment's GitHub environment (its protection rules are the
        approval gate) may act as the deploy account."""
        return tuple(self.subject(f"environment:{env}") for env in self.environments)

    @property
    def plan_subjects(self) -> tuple[str, ...]:
        """Pull-request plans and the scheduled drift check on the main branch."""
        return (self.subject("pull_request"), self.subject(f"ref:refs/heads/{self.main_branch}"))

    @property
    def attribute_condition(self) -> str:
        """CEL evaluated on every GitHub token: only this repository, only the subjects the
        workflows use. Tokens from forks, other branches or other repositories are refused by
        the provider before any IAM binding is looked at."""
        subjects = " || ".join(
            f"assertion.sub == '{s}'" for s in (*self.plan_subjects, *self.deploy_subjects)
        )
        cond = f"assertion.repository == '{self.github_repository}' && ({subjects})"
        if self.github_repository_id is not None:
            cond += f" && assertion.repository_id == '{self.github_repository_id}'"
        return cond


def cross_check(cfg: BootstrapConfig, deployments: list[gitops.Deployment]) -> list[str]:
    """The pipeline deployments must use this bootstrap's bucket and project."""
    problems = []
    if not cfg.environments:
        problems.append(
            _problem(
                "environments",
                [],
                "no GitHub environment may deploy: no pipeline deployment was found",
                "add deployments/<name>.toml with state_bucket set, or list environments",
            )
        )
    for env in cfg.environments:
        if len(cfg.subject(f"environment:{env}").encode()) > SUBJECT_LIMIT:
            problems.append(
                _problem(
                    "environments",
                    env,
                    f"the token subject for it exceeds Workload Identity's {SUBJECT_LIMIT} bytes",
                    "use a shorter deployment name",
                )
            )
    for dep in deployments:
        if dep.state_bucket is not None and dep.state_bucket != cfg.state_bucket:
            problems.append(
                _problem(
                    "state_bucket",
                    cfg.state_bucket,
                    f"{dep.config} keeps its state in {dep.state_bucket!r}, which the deploy "
                    "account cannot write",
                    f'set state_bucket = "{cfg.state_bucket}" in {dep.config}',
                )
            )
        if dep.project is not None and dep.project != cfg.project:
            problems.append(
                _problem(
                    "project",
                    cfg.project,
                    f"{dep.config} deploys into {dep.project!r}, where CI accounts hold no role",
                    f"use the bootstrap's project in {dep.config}, or bootstrap that project too",
                )
            )
    return problems


def parse_bootstrap(
    data: dict[str, Any], *, deployments: list[gitops.Deployment], source: str
) -> BootstrapConfig:
    """Validate raw TOML; unset environments become the pipeline deployments' names."""
    data = dict(data)
    if not data.get("environments"):
        data["environments"] = [d.name for d in deployments]
    try:
        cfg = BootstrapConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(top level)"
            if err["type"] == "extra_forbidden":
                known = ", ".join(BootstrapConfig.model_fields)
                problems.append(_problem(key, err.get("input"), "unknown key", f"known: {known}"))
            elif err["type"] == "missing":
                problems.append(_problem(key, None, "required", "add it to the bootstrap file"))
            else:
                reason, _, fix = str(err["msg"]).removeprefix("Value error, ").partition("; ")
                problems.append(_problem(key, err.get("input"), reason, fix or "see README"))
        raise ConfigError(source, problems) from None
    problems = cross_check(cfg, deployments)
    if problems:
        raise ConfigError(source, problems)
    return cfg


def bootstrap_path() -> Path:
    return Path(os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP_PATH)


def load_bootstrap(path: str | Path | None = None, *, root: str | Path = ".") -> BootstrapConfig:
    """Read gitops.toml (or BOOTSTRAP_CONFIG) and check it against the repository's deployments."""
    p = Path(path) if path is not None else bootstrap_path()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            str(p), [f"file not found; create it (see README, GitOps) or set {BOOTSTRAP_ENV}"]
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), [f"not valid TOML ({exc}); fix the syntax"]) from None
    try:
        deployments = gitops.pipeline_deployments(Path(root))
    except gitops.GitopsError as exc:
        raise ConfigError(str(p), [str(exc)]) from None
    return parse_bootstrap(data, deployments=deployments, source=str(p))
