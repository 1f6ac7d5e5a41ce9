"""`make bootstrap-check`: the GitHub environment settings each deployment needs, read back.

Each deployment's deploy identity is reachable only from its GitHub environment, on main, from the
deploy and destroy workflows (Workload Identity Federation checks that). What GitHub itself must
enforce is the approval gate: required reviewers and a deployment-branch rule naming only main.
With GITHUB_TOKEN set, this reads each environment through the REST API (GITHUB_API_URL overrides
the base URL, for GitHub Enterprise Server or a test server) and reports every environment that is
not protected; without one it prints what to set by hand. The token travels only in the
Authorization header: never in argv, a log line or an error message.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tpudeploy import defaultaccount, errors
from tpudeploy.bootstrap_config import BootstrapConfig, bootstrap_path, load_bootstrap
from tpudeploy.config import ConfigError

DEFAULT_API_URL = "https://api.github.com"
TOKEN_ENV = "GITHUB_TOKEN"  # noqa: S105 (the variable's name, not a token)
API_URL_ENV = "GITHUB_API_URL"
TIMEOUT_SECONDS = 20.0
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


class CheckError(Exception):
    """The check could not run (bad URL, no access, network); the message says the fix."""


def origin(url: str) -> tuple[str, str, int | None]:
    """scheme, host, port: what a browser calls an origin (port None when the scheme's)."""
    parts = urllib.parse.urlsplit(url)
    default = {"https": 443, "http": 80}.get(parts.scheme)
    port = parts.port if parts.port != default else None
    return parts.scheme, (parts.hostname or "").lower(), port


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only within the API's own origin. urllib copies every header but the
    content ones to the new request, the token's Authorization header included, whatever the
    new scheme and host: a redirect elsewhere (another host, plain http) is refused before
    anything is sent there."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if origin(newurl) != origin(req.full_url):
            scheme, host, port = origin(newurl)
            where = f"{scheme}://{host}" + (f":{port}" if port else "")
            raise CheckError(
                f"GitHub's API answered {code} redirecting to {where}, another origin; the token "
                f"is never sent there. Check {API_URL_ENV} (the API base of your GitHub server)"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def github_settings_text(cfg: BootstrapConfig) -> str:
    """What each environment needs in Settings > Environments, for a person to set by hand."""
    repo = cfg.github_repository
    lines = [
        f"GitHub settings for {repo} (Settings > Environments); `make bootstrap-check` reads them "
        "back with GITHUB_TOKEN set:"
    ]
    for env in cfg.environments:
        lines += [
            f"  environment {env}:",
            "    - Required reviewers: at least one person or team (the approval before any "
            "apply or destroy); tick 'Prevent self-review'",
            "    - Deployment branches and tags: 'Selected branches and tags', one rule: branch "
            f"'{cfg.main_branch}' (no patterns, no tags)",
            "    - 'Allow administrators to bypass configured protection rules': off",
        ]
    lines.append(
        f"  branch {cfg.main_branch}: protect it (pull requests with review required); whoever "
        "can push to it can run the deploy workflows"
    )
    return "\n".join(lines)


@dataclass(frozen=True)
class EnvironmentReport:
    name: str
    problems: tuple[str, ...]

    @property
    def protected(self) -> bool:
        return not self.problems


def judge(
    env: str,
    environment: dict[str, Any] | None,
    branch_policies: list[dict[str, Any]] | None,
    *,
    main_branch: str,
) -> EnvironmentReport:
    """Compare one environment (GET /repos/{repo}/environments/{env}, None when it does not
    exist) and its deployment-branch policies with what the pipeline needs."""
    if environment is None:
        return EnvironmentReport(
            env,
            (
                "does not exist: any job naming it would create it unprotected; create it with "
                "the settings above",
            ),
        )
    problems = []
    rules = environment.get("protection_rules") or []
    reviewers = [r for r in rules if isinstance(r, dict) and r.get("type") == "required_reviewers"]
    if not reviewers or not any(r.get("reviewers") for r in reviewers):
        problems.append("no required reviewers: add at least one person or team")
    elif not any(r.get("prevent_self_review") for r in reviewers):
        problems.append("self-review allowed: tick 'Prevent self-review'")
    if environment.get("can_admins_bypass", True):
        problems.append(
            "administrators may bypass the rules: untick 'Allow administrators to bypass'"
        )
    policy = environment.get("deployment_branch_policy")
    if not isinstance(policy, dict):
        problems.append(
            "any branch may deploy: set 'Selected branches and tags' with one rule, "
            f"'{main_branch}'"
        )
    elif policy.get("protected_branches"):
        problems.append(
            f"every protected branch may deploy: use 'Selected branches and tags' with one rule, "
            f"'{main_branch}'"
        )
    else:
        names = sorted(
            f"{p.get('type', 'branch')}:{p.get('name')}" for p in (branch_policies or [])
        )
        if names != [f"branch:{main_branch}"]:
            problems.append(
                f"deployment branch rules are {names or 'empty'}: keep exactly one, branch "
                f"'{main_branch}'"
            )
    return EnvironmentReport(env, tuple(problems))


class GitHubClient:
    """GET-only client for the two environment endpoints."""

    def __init__(self, *, api_url: str, token: str) -> None:
        parsed = urllib.parse.urlsplit(api_url)
        if parsed.scheme not in ("https", "http") or not parsed.hostname:
            raise CheckError(
                f"{API_URL_ENV} = {api_url!r} is not an http(s) URL; unset it for github.com or "
                "give the API base, e.g. https://github.example.com/api/v3"
            )
        if parsed.scheme == "http" and parsed.hostname not in LOOPBACK_HOSTS:
            raise CheckError(
                f"{API_URL_ENV} = {api_url!r} is plain http to another machine, which would send "
                "the token in clear; use https"
            )
        self._base = api_url.rstrip("/")
        self._token = token
        self._opener = urllib.request.build_opener(_SameOriginRedirects())

    def _get(self, path: str) -> Any | None:
        # The scheme was checked in __init__: https, or http to loopback only.
        request = urllib.request.Request(  # noqa: S310
            self._base + path,
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self._token}",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "tpudeploy-bootstrap-check",
            },
        )
        try:
            with self._opener.open(request, timeout=TIMEOUT_SECONDS) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            if exc.code in (401, 403):
                raise CheckError(
                    f"GitHub answered {exc.code} for {path}: the token cannot read this "
                    "repository's environments; use a fine-grained token with read access to "
                    "'Environments' and 'Actions' (or a classic token with repo scope)"
                ) from None
            raise CheckError(f"GitHub answered {exc.code} for {path}; try again later") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CheckError(
                f"cannot reach {self._base} ({reason}); check the network or {API_URL_ENV}"
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise CheckError(
                f"{self._base}{path} did not answer JSON; check {API_URL_ENV}"
            ) from None

    def repository(self, repo: str) -> dict[str, Any] | None:
        data = self._get(f"/repos/{repo}")
        return data if isinstance(data, dict) else None

    def environment(self, repo: str, env: str) -> dict[str, Any] | None:
        data = self._get(f"/repos/{repo}/environments/{urllib.parse.quote(env)}")
        return data if isinstance(data, dict) else None

    def branch_policies(self, repo: str, env: str) -> list[dict[str, Any]]:
        data = self._get(
            f"/repos/{repo}/environments/{urllib.parse.quote(env)}/deployment-branch-policies"
            "?per_page=100"
        )
        policies = data.get("branch_policies") if isinstance(data, dict) else None
        return [p for p in policies or [] if isinstance(p, dict)]


def judge_ids(cfg: BootstrapConfig, repository: dict[str, Any] | None) -> list[str]:
    """gitops.toml's numeric ids against GitHub's answer for the repository (GET /repos/{repo}):
    the federation admits only tokens carrying these ids."""
    if repository is None:
        return [
            f"repository {cfg.github_repository} is not visible to the token (or does not "
            "exist): check github_repository in gitops.toml and the token's repository access"
        ]
    owner = repository.get("owner") if isinstance(repository.get("owner"), dict) else {}
    found = {
        "github_repository_id": repository.get("id"),
        "github_repository_owner_id": (owner or {}).get("id"),
    }
    problems = []
    for key, value in found.items():
        if value != getattr(cfg, key):
            problems.append(
                f"{key} = {getattr(cfg, key)} in gitops.toml, but GitHub says {value} for "
                f"{cfg.github_repository}: set {key} = {value} (the federation admits only "
                "tokens of the repository with these ids), then `make bootstrap` again"
            )
    return problems


def check(cfg: BootstrapConfig, client: GitHubClient) -> list[EnvironmentReport]:
    reports = []
    for env in cfg.environments:
        environment = client.environment(cfg.github_repository, env)
        policies = None
        policy = environment.get("deployment_branch_policy") if environment else None
        if isinstance(policy, dict) and policy.get("custom_branch_policies"):
            policies = client.branch_policies(cfg.github_repository, env)
        reports.append(judge(env, environment, policies, main_branch=cfg.main_branch))
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    """0: every environment protected and the ids right, or no token (settings printed); 1: an
    environment not protected or an id wrong; 2: the check could not run."""
    del argv
    try:
        cfg = load_bootstrap(bootstrap_path()).config
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(github_settings_text(cfg))
    print()
    # Google's side: what a deploy identity could run a node as (docs/security.md).
    print(defaultaccount.warning(cfg.project))
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        print(
            f"NOT CHECKED: {TOKEN_ENV} is not set. Set the above by hand, check the ids with "
            f"`gh api repos/{cfg.github_repository} --jq '.id, .owner.id'` (gitops.toml: "
            f"{cfg.github_repository_id}, {cfg.github_repository_owner_id}), or export a token "
            "(read access to the repository's environments) and run `make bootstrap-check` again."
        )
        return 0
    try:
        client = GitHubClient(
            api_url=os.environ.get(API_URL_ENV, "").strip() or DEFAULT_API_URL, token=token
        )
        id_problems = judge_ids(cfg, client.repository(cfg.github_repository))
        reports = check(cfg, client)
    except CheckError as exc:
        print(f"bootstrap-check: {exc}", file=sys.stderr)
        return 2
    for problem in id_problems:
        print(f"WRONG ID: {problem}")
    if not id_problems:
        print(
            f"ok: {cfg.github_repository} is repository {cfg.github_repository_id} of owner "
            f"{cfg.github_repository_owner_id}, as gitops.toml pins"
        )
    for report in reports:
        if report.protected:
            print(f"ok: environment {report.name} is protected")
        for problem in report.problems:
            print(f"NOT PROTECTED: environment {report.name}: {problem}")
    unprotected = [r.name for r in reports if not r.protected]
    if unprotected:
        print(f"{len(unprotected)} environment(s) not protected: {', '.join(unprotected)}")
    return 1 if unprotected or id_problems else 0


if __name__ == "__main__":
    sys.exit(errors.run(main))
