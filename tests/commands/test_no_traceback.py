"""No traceback anywhere a user can reach: every command ends in one line with the fix.

Each subcommand runs as the Makefile runs it (`python -m tpudeploy <command>`), first with no
credentials at all (no GOOGLE_APPLICATION_CREDENTIALS, no gcloud configuration, no metadata
server), then with credentials Google refuses (a service-account key whose token endpoint, on
loopback, answers invalid_grant as it does for a revoked or expired key). Nothing leaves the
machine: the token endpoint is the only server contacted, and it is on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests import cli_fork
from tools.rehearsal.fakes.base import serving
from tpudeploy import errors

PROJECT = "no-trace-proj-1"
TOKEN = "hf_" + "NoTracebackTestToken0123456789"
# Every subcommand that talks to Google, with what it needs on stdin and in the environment.
COMMANDS: dict[str, tuple[list[str], str, dict[str, str]]] = {
    "status": (["status"], "", {}),
    "wait": (["wait", "--timeout", "1", "--interval", "0.1"], "", {}),
    "smoke": (["smoke"], "", {"ENDPOINT": "https://127.0.0.1:9"}),
    "secret": (["secret"], TOKEN, {}),
    "api-key": (["api-key"], "", {}),
    "recover": (["recover"], "", {}),
    "cleanup": (["cleanup", "--timeout", "5"], "", {}),
    "endpoint": (["endpoint"], "", {}),
    "state-init": (["state-init"], "", {}),
}


class RefusingTokenEndpoint:
    """OAuth 2.0 token endpoint on loopback that refuses every grant (a revoked key)."""

    def __init__(self) -> None:
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests += 1
                body = json.dumps(
                    {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
                ).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._handler = Handler
        self._stack = ExitStack()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/token"

    def __enter__(self) -> RefusingTokenEndpoint:
        self.server = self._stack.enter_context(serving(self._handler))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def refusing() -> Iterator[RefusingTokenEndpoint]:
    with RefusingTokenEndpoint() as endpoint:
        yield endpoint


def service_account_key(path: Path, token_uri: str) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": PROJECT,
                "private_key_id": "0" * 40,
                "private_key": pem,
                "client_email": f"revoked@{PROJECT}.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": token_uri,
            }
        )
    )
    return path


def run(
    tmp_path: Path,
    args: list[str],
    stdin: str,
    extra: dict[str, str],
    credentials: Path | None,
    *,
    config_text: str = "",
) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "deploy.toml"
    config.write_text(f'project = "{PROJECT}"\n{config_text}')
    drop = (
        "GOOGLE_APPLICATION_CREDENTIALS",
        "TPU_EMULATOR_HOST",
        "SECRETMANAGER_EMULATOR_HOST",
        "CONTAINER_EMULATOR_HOST",
        "ENDPOINT",
        "TLS_SHA256",
        "VLLM_API_KEY",
        errors.DEBUG_ENV,
    )
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        DEPLOY_CONFIG=str(config),
        CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
        NO_GCE_CHECK="true",
        # If anything probed the metadata server it would meet a closed loopback port.
        GCE_METADATA_HOST="127.0.0.1:9",
        GCE_METADATA_IP="127.0.0.1:9",
        **extra,
    )
    if credentials is not None:
        env["GOOGLE_APPLICATION_CREDENTIALS"] = str(credentials)
    return cli_fork.run(
        [*args],
        env=env,
        input=stdin,
        timeout=120,
    )


def assert_one_line_with_the_fix(result: subprocess.CompletedProcess[str], fix: str) -> None:
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    errors_seen = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors_seen) == 1, result.stderr
    assert errors_seen[0].startswith("error: "), errors_seen
    assert fix in errors_seen[0], errors_seen


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_credentials_is_one_line_with_the_fix(tmp_path: Path, command: str) -> None:
    args, stdin, extra = COMMANDS[command]
    result = run(tmp_path, args, stdin, extra, credentials=None)
    assert_one_line_with_the_fix(result, "gcloud auth application-default login")
    assert "no Google Cloud credentials" in result.stderr


def test_usage_on_a_tpu_vm_without_a_gcloud_login_is_one_line_with_the_fix(
    tmp_path: Path,
) -> None:
    # The TPU VM's log is read over gcloud's IAP SSH (as make tunnel), so gcloud's own login,
    # not application-default credentials, is what it needs.
    result = run(tmp_path, ["usage", "--since", "1h"], "", {}, credentials=None)
    fix = "gcloud auth login" if shutil.which("gcloud") else "install the Google Cloud CLI"
    assert_one_line_with_the_fix(result, fix)


@pytest.mark.parametrize("command", ["status", "wait", "secret", "api-key", "endpoint"])
def test_refused_credentials_are_one_line_with_the_fix(
    tmp_path: Path, refusing: RefusingTokenEndpoint, command: str
) -> None:
    key = service_account_key(tmp_path / "key.json", refusing.url)
    before = refusing.requests
    args, stdin, extra = COMMANDS[command]
    result = run(tmp_path, args, stdin, extra, credentials=key)
    assert refusing.requests > before  # the refusal came from the (loopback) token endpoint
    assert_one_line_with_the_fix(result, "gcloud auth application-default login")


# The same commands on GKE go through tpudeploy.platform.Gke (the cluster's API, issue 25).
GKE_COMMANDS = ["status", "wait", "smoke", "endpoint", "tls-cert"]


@pytest.mark.parametrize("command", GKE_COMMANDS)
def test_on_gke_no_credentials_is_the_same_one_line(tmp_path: Path, command: str) -> None:
    args, stdin, extra = COMMANDS.get(command, ([command], "", {}))
    result = run(tmp_path, args, stdin, extra, credentials=None, config_text='platform = "gke"\n')
    assert_one_line_with_the_fix(result, "gcloud auth application-default login")
    assert "no Google Cloud credentials" in result.stderr


def test_on_gke_refused_credentials_are_one_line(
    tmp_path: Path, refusing: RefusingTokenEndpoint
) -> None:
    """One command: wait, status and endpoint get their token from the same call
    (tpudeploy.gcp.container.cluster_access)."""
    key = service_account_key(tmp_path / "key.json", refusing.url)
    before = refusing.requests
    args, stdin, extra = COMMANDS["status"]
    result = run(tmp_path, args, stdin, extra, credentials=key, config_text='platform = "gke"\n')
    assert refusing.requests > before
    assert_one_line_with_the_fix(result, "gcloud auth application-default login")


def test_a_region_without_prices_is_one_line_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "deploy.toml").write_text('zone = "europe-west4-b"\nprovisioning = "spot"\n')
    result = cli_fork.run(
        ["cost"],
        env={**os.environ, "DEPLOY_CONFIG": str(tmp_path / "deploy.toml")},
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: no prices for region europe-west4")
    assert "[prices.europe-west4] spot = " in line


def test_an_unexpected_failure_is_one_line_and_debug_shows_the_traceback() -> None:
    def broken() -> int:
        raise RuntimeError("a bug")

    err = __import__("io").StringIO()
    assert errors.run(broken, err=err) == 1
    assert err.getvalue().startswith("error: unexpected RuntimeError: a bug.")
    assert f"{errors.DEBUG_ENV}=1" in err.getvalue()
    os.environ[errors.DEBUG_ENV] = "1"
    try:
        with pytest.raises(RuntimeError):
            errors.run(broken)
    finally:
        del os.environ[errors.DEBUG_ENV]
