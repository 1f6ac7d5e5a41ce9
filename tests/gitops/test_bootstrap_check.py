"""`make bootstrap-check` against a loopback fake of GitHub's environments API.

The fake answers like GitHub's REST API (GET /repos/{owner}/{repo}/environments/{name} and
.../deployment-branch-policies) and records every request, so the tests check what the client
sends (the token in the Authorization header only) as well as what it reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tools.rehearsal.fakes.base import serving
from tpudeploy import errors
from tpudeploy import github_environments as ge
from tpudeploy.bootstrap_config import load_bootstrap


def _token() -> str:
    # Built at run time so that no tracked file holds a token-shaped string.
    return "ghp_" + "".join(chr(ord("a") + (i * 7) % 26) for i in range(36))


CFG = load_bootstrap(REPO_ROOT / "gitops.toml", root=REPO_ROOT).config
# Every pipeline deployment's environment (gitops.toml sets none: the default is all of them).
ENVIRONMENTS = CFG.environments
REPO = CFG.github_repository


def protected_env(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "can_admins_bypass": False,
        "protection_rules": [
            {
                "type": "required_reviewers",
                "prevent_self_review": True,
                "reviewers": [{"type": "User", "reviewer": {"login": "lead"}}],
            },
        ],
        "deployment_branch_policy": {"protected_branches": False, "custom_branch_policies": True},
    }


MAIN_POLICIES: list[dict[str, Any]] = [{"name": "main", "type": "branch"}]
MAIN_ONLY: dict[str, Any] = {"total_count": 1, "branch_policies": MAIN_POLICIES}


class FakeGitHub:
    def __init__(self) -> None:
        self.environments: dict[str, dict[str, Any]] = {}
        self.policies: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.status: int | None = None  # force every answer to this status
        # GET /repos/{owner}/{repo}: the ids gitops.toml pins, unless a test changes them.
        self.repository: dict[str, Any] = {
            "id": CFG.github_repository_id,
            "full_name": REPO,
            "owner": {"id": CFG.github_repository_owner_id, "login": REPO.split("/")[0]},
        }
        self.redirect: str | None = None  # answer every request with a 301 to this base URL
        self.moved = False  # /repos/{repo} answers 301 to /repositories/{id} (a renamed repo)


@pytest.fixture
def github() -> Iterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fake.requests.append((self.path, dict(self.headers.items())))
            prefix = f"/repos/{REPO}/environments/"
            body: Any = None
            if fake.status is not None:
                self.send_response(fake.status)
                self.end_headers()
                self.wfile.write(b'{"message": "Bad credentials"}')
                return
            if fake.redirect is not None:
                self.send_response(301)
                self.send_header("Location", fake.redirect + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path == f"/repos/{REPO}" and fake.moved:
                self.send_response(301)
                self.send_header("Location", f"/repositories/{fake.repository['id']}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if (
                self.path == f"/repos/{REPO}"
                or self.path == f"/repositories/{fake.repository['id']}"
            ):
                body = fake.repository
            elif self.path.startswith(prefix):
                rest = self.path[len(prefix) :]
                name, _, tail = rest.partition("/")
                if tail.startswith("deployment-branch-policies"):
                    body = fake.policies.get(name)
                else:
                    body = fake.environments.get(name)
            if body is None:
                self.send_response(404)
                self.end_headers()
                self.wfile.write(b'{"message": "Not Found"}')
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as server:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"


# What `make bootstrap-check` may not inherit: a token, an API URL, Google credentials. No Google
# credentials unless a test gives the Resource Manager fake: nothing leaves loopback.
DROPPED = (ge.TOKEN_ENV, ge.API_URL_ENV, "RESOURCEMANAGER_EMULATOR_HOST")
NO_GOOGLE = {"GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/adc.json", "NO_GCE_CHECK": "true"}


def run_process(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """What `make bootstrap-check` runs, in a process of its own, with a controlled environment."""
    base = {k: v for k, v in os.environ.items() if k not in DROPPED}
    return subprocess.run(
        [sys.executable, "-m", "tpudeploy.github_environments"],
        cwd=REPO_ROOT,
        env={**base, **NO_GOOGLE, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


Run = Callable[[dict[str, str]], subprocess.CompletedProcess[str]]


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Run:
    """The same command in this process (its `__main__` line: errors.run(main)), with the same
    environment: a new Python per call cost ~1 s of CPU, and test_all_protected runs it as one."""

    def run_here(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        for name in DROPPED:
            monkeypatch.delenv(name, raising=False)
        for name, value in {**NO_GOOGLE, **env}.items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        code = errors.run(ge.main)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(["make", "bootstrap-check"], code, out.out, out.err)

    return run_here


def test_all_protected(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    for env in ENVIRONMENTS:
        fake.environments[env] = protected_env(env)
        fake.policies[env] = MAIN_ONLY
    token = _token()
    result = run_process({ge.TOKEN_ENV: token, ge.API_URL_ENV: url})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: environment gemma4-prod is protected" in result.stdout
    assert "ok: environment gemma4-staging is protected" in result.stdout
    assert "NOT PROTECTED" not in result.stdout
    # The token went in the Authorization header of every request, and nowhere else.
    assert fake.requests
    for path, headers in fake.requests:
        assert headers["Authorization"] == f"Bearer {token}"
        assert token not in path
    assert token not in result.stdout + result.stderr


def test_each_unprotected_environment_is_reported(github: tuple[FakeGitHub, str], run: Run) -> None:
    fake, url = github
    for env in ENVIRONMENTS:
        fake.environments[env] = protected_env(env)
        fake.policies[env] = MAIN_ONLY
    staging = protected_env("gemma4-staging")
    staging["protection_rules"] = []  # no reviewers
    staging["deployment_branch_policy"] = None  # any branch
    staging["can_admins_bypass"] = True
    fake.environments["gemma4-staging"] = staging
    # gemma4-prod: protected, but a second branch rule lets `release/*` deploy too
    fake.environments["gemma4-prod"] = protected_env("gemma4-prod")
    fake.policies["gemma4-prod"] = {
        "total_count": 2,
        "branch_policies": [
            {"name": "main", "type": "branch"},
            {"name": "release/*", "type": "branch"},
        ],
    }
    result = run({ge.TOKEN_ENV: _token(), ge.API_URL_ENV: url})
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("NOT PROTECTED")]
    assert any("gemma4-staging: no required reviewers" in ln for ln in lines)
    assert any("gemma4-staging: any branch may deploy" in ln for ln in lines)
    assert any("gemma4-staging: administrators may bypass" in ln for ln in lines)
    assert any(
        "gemma4-prod: deployment branch rules are" in ln and "release/*" in ln for ln in lines
    )
    assert result.stdout.rstrip().endswith(
        "2 environment(s) not protected: gemma4-prod, gemma4-staging"
    )


def test_missing_environment_is_reported(github: tuple[FakeGitHub, str], run: Run) -> None:
    fake, url = github
    fake.environments["gemma4-prod"] = protected_env("gemma4-prod")
    fake.policies["gemma4-prod"] = MAIN_ONLY
    result = run({ge.TOKEN_ENV: _token(), ge.API_URL_ENV: url})
    assert result.returncode == 1
    assert "NOT PROTECTED: environment gemma4-staging: does not exist" in result.stdout


def test_bad_token_is_one_line_and_never_echoed(github: tuple[FakeGitHub, str], run: Run) -> None:
    fake, url = github
    fake.status = 401
    token = _token()
    result = run({ge.TOKEN_ENV: token, ge.API_URL_ENV: url})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("bootstrap-check: GitHub answered 401")
    assert "fine-grained token" in line
    assert token not in result.stdout + result.stderr


def test_unreachable_api_is_one_line(run: Run) -> None:
    # A loopback port nothing listens on (bound, then closed).
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run({ge.TOKEN_ENV: _token(), ge.API_URL_ENV: f"http://127.0.0.1:{port}"})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("bootstrap-check: cannot reach http://127.0.0.1:")


def test_plain_http_to_another_host_is_refused_before_sending_the_token(run: Run) -> None:
    result = run({ge.TOKEN_ENV: _token(), ge.API_URL_ENV: "http://github.example.com/api/v3"})
    assert result.returncode == 2
    assert "plain http to another machine" in result.stderr
    assert "GITHUB_API_URL = 'http://github.example.com/api/v3'" in result.stderr


def test_without_token_prints_the_settings_to_set_by_hand(run: Run) -> None:
    result = run({})
    assert result.returncode == 0
    assert "NOT CHECKED: GITHUB_TOKEN is not set" in result.stdout
    for env in ENVIRONMENTS:
        assert f"environment {env}:" in result.stdout
    assert "Required reviewers" in result.stdout and "branch 'main'" in result.stdout


def test_judge_accepts_only_main_as_the_branch_rule() -> None:
    ok = ge.judge("e", protected_env("e"), MAIN_ONLY["branch_policies"], main_branch="main")
    assert ok.protected
    protected_branches = {
        **protected_env("e"),
        "deployment_branch_policy": {"protected_branches": True, "custom_branch_policies": False},
    }
    report = ge.judge("e", protected_branches, None, main_branch="main")
    assert report.problems == (
        "every protected branch may deploy: use 'Selected branches and tags' with one rule, 'main'",
    )
    tag = [{"name": "main", "type": "tag"}]
    assert not ge.judge("e", protected_env("e"), tag, main_branch="main").protected
    self_review = protected_env("e")
    self_review["protection_rules"][0]["prevent_self_review"] = False
    report = ge.judge("e", self_review, MAIN_ONLY["branch_policies"], main_branch="main")
    assert report.problems == ("self-review allowed: tick 'Prevent self-review'",)


@pytest.fixture
def second_origin() -> Iterator[tuple[list[dict[str, str]], str]]:
    """Another server on loopback (another port: another origin) that records what reaches it."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers.items()))
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as server:
        yield seen, f"http://127.0.0.1:{server.server_address[1]}"


def test_a_redirect_to_another_origin_never_gets_the_token(
    github: tuple[FakeGitHub, str], second_origin: tuple[list[dict[str, str]], str], run: Run
) -> None:
    """Issue 22, item 8: urllib follows a redirect with every header, Authorization included, to
    any host and scheme. The API's answer may send us elsewhere; the token must not follow."""
    fake, url = github
    seen, elsewhere = second_origin
    fake.redirect = elsewhere
    token = _token()
    result = run({ge.TOKEN_ENV: token, ge.API_URL_ENV: url})
    assert not [h for h in seen if "Authorization" in h or "authorization" in h], seen
    assert not seen  # refused before any request went there
    assert result.returncode == 2, result.stdout + result.stderr
    assert "another origin; the token is never sent there" in result.stderr
    assert elsewhere in result.stderr and token not in result.stdout + result.stderr


def test_a_redirect_within_the_api_is_followed_with_the_token(
    github: tuple[FakeGitHub, str], run: Run
) -> None:
    """GitHub answers a renamed repository with 301 to /repositories/{id} on the same origin."""
    fake, url = github
    for env in ENVIRONMENTS:
        fake.environments[env] = protected_env(env)
        fake.policies[env] = MAIN_ONLY
    fake.moved = True
    token = _token()
    result = run({ge.TOKEN_ENV: token, ge.API_URL_ENV: url})
    assert result.returncode == 0, result.stdout + result.stderr
    moved = [h for p, h in fake.requests if p.startswith("/repositories/")]
    assert moved and moved[0]["Authorization"] == f"Bearer {token}"
    assert ge.origin("https://api.github.com/x") == ge.origin("https://api.github.com:443/y")
    assert ge.origin("https://api.github.com/x") != ge.origin("http://api.github.com/x")
    assert ge.origin("https://api.github.com/x") != ge.origin("https://evil.example/x")


def test_wrong_repository_ids_are_reported(github: tuple[FakeGitHub, str], run: Run) -> None:
    """Issue 21, defect 6: the ids the federation pins are compared with GitHub's own."""
    fake, url = github
    for env in ENVIRONMENTS:
        fake.environments[env] = protected_env(env)
        fake.policies[env] = MAIN_ONLY
    fake.repository = {**fake.repository, "id": 555, "owner": {"id": 666}}
    result = run({ge.TOKEN_ENV: _token(), ge.API_URL_ENV: url})
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("WRONG ID")]
    assert len(lines) == 2, result.stdout
    assert (
        f"github_repository_id = {CFG.github_repository_id} in gitops.toml, but GitHub says 555"
        in lines[0]
    )
    assert "set github_repository_owner_id = 666" in lines[1]


def test_the_compute_default_account_with_editor_is_a_warning(run: Run) -> None:
    """Issue 22, item 10: a deploy identity can create a TPU node with no service account,
    which then runs as the Compute Engine default account; with Editor that is a warning."""
    from tools.rehearsal.fakes.iamrules import PROJECT_NUMBER
    from tools.rehearsal.fakes.resourcemanager import FakeResourceManager

    with FakeResourceManager() as rm:
        default = f"serviceAccount:{PROJECT_NUMBER}-compute@developer.gserviceaccount.com"
        policy = rm.inventory.policy("cloudresourcemanager", f"projects/{CFG.project}")
        policy.append({"role": "roles/editor", "members": [default]})
        result = run({"RESOURCEMANAGER_EMULATOR_HOST": rm.host})
        assert result.returncode == 0, result.stderr
        (line,) = [ln for ln in result.stdout.splitlines() if "default account" in ln]
        assert line.startswith("WARNING: the Compute Engine default account")
        assert "holds roles/editor" in line and "remove-iam-policy-binding" in line
        policy.clear()
        result = run({"RESOURCEMANAGER_EMULATOR_HOST": rm.host})
        (line,) = [ln for ln in result.stdout.splitlines() if "default account" in ln]
        assert line.startswith("ok: the Compute Engine default account")
    # Without credentials: said, never a failure, and nothing is sent anywhere.
    result = run({})
    assert result.returncode == 0
    assert "NOT CHECKED: the Compute Engine default account's roles" in result.stdout
