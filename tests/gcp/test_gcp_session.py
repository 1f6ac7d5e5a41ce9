"""tpudeploy/gcp/session.py, the one session factory: the emulator or Application Default
Credentials, the one scope, the credential errors naming their fix, and HTTP failures turned
into the client's own error. Everything here stays on loopback: the token endpoint of the test
keys is a loopback fake, and no call is sent to a googleapis.com URL."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tools.rehearsal.fakes.base import Answer, LoopbackServer
from tpudeploy.errors import CREDENTIALS_FIX, UserError
from tpudeploy.gcp import apis, session
from tpudeploy.names import CLOUD_PLATFORM_SCOPE

FIX = "gcloud auth application-default login"


class ClientError(UserError):
    """A client's own error class, as each API module has one."""


FAILURES = session.Failures(
    ClientError,
    unreachable="cannot reach the API ({error}); check the network",
    otherwise="the API answered HTTP {status} for {name}; try again",
    refused="the API refused {name} (HTTP {status}): ask for roles/x.viewer",
    missing="{name} does not exist: create it",
)


class Google:
    """A token endpoint (POST /token: a token, or invalid_grant once `refuse` is set) and an API
    answering GET /status/NNN with NNN, on one loopback server."""

    def __init__(self) -> None:
        self.refuse = False
        self.server = LoopbackServer(self._route)

    def _route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        if path == "/token":
            if self.refuse:
                return 400, {"error": "invalid_grant", "error_description": "Invalid JWT."}
            return 200, {"access_token": "ya29.loopback", "expires_in": 3600}
        return int(path.rsplit("/", 1)[1]), {"path": path}

    def url(self, path: str) -> str:
        return f"http://{self.server.host}{path}"


@pytest.fixture
def google() -> Iterator[Google]:
    fake = Google()
    with fake.server:
        yield fake


@pytest.fixture
def no_adc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No emulator, no credentials file, no gcloud configuration, no Google machine."""
    for api in apis.ALL:
        monkeypatch.delenv(api.emulator_env, raising=False)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    return tmp_path


def service_account_key(path: Path, token_uri: str) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "session-proj-1",
        "private_key_id": "0" * 40,
        "private_key": pem,
        "client_email": "tester@session-proj-1.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    path.write_text(json.dumps(info))
    return path


@pytest.fixture
def adc(no_adc: Path, google: Google, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A service-account key whose token endpoint is the loopback fake."""
    key = service_account_key(no_adc / "key.json", google.url("/token"))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    return key


# --- emulator or ADC --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "value", "base"),
    [
        (apis.SECRET_MANAGER, "127.0.0.1:8085", "http://127.0.0.1:8085/v1"),
        (apis.SECRET_MANAGER, "http://127.0.0.1:8085/", "http://127.0.0.1:8085/v1"),
        (apis.STORAGE, "127.0.0.1:9023", "http://127.0.0.1:9023"),
        (apis.CONTAINER, " 127.0.0.1:7 ", "http://127.0.0.1:7/v1"),
    ],
)
def test_an_emulator_variable_means_plain_http_and_no_credentials(
    no_adc: Path, monkeypatch: pytest.MonkeyPatch, api: apis.Api, value: str, base: str
) -> None:
    """No credentials are looked for at all: there are none here, and nothing fails."""
    monkeypatch.setenv(api.emulator_env, value)
    found, url = session.session(api, ClientError)
    assert type(found) is requests.Session
    assert url == base
    assert "authorization" not in {k.lower() for k in found.headers}
    assert session.access_token(found, ClientError) == session.EMULATOR_TOKEN


def test_without_an_emulator_the_session_carries_adc_with_the_one_scope(
    adc: Path, google: Google
) -> None:
    from google.auth.transport.requests import AuthorizedSession

    found, url = session.session(apis.SECRET_MANAGER, ClientError)
    assert isinstance(found, AuthorizedSession)
    assert url == "https://secretmanager.googleapis.com/v1"
    assert list(found.credentials.scopes) == [CLOUD_PLATFORM_SCOPE]
    # The token comes from the (loopback) token endpoint and rides on every call.
    session.call(found, "GET", google.url("/status/200"), FAILURES, timeout=5)
    (call,) = [r for r in google.server.requests if r["path"] == "/status/200"]
    assert call["headers"]["authorization"] == "Bearer ya29.loopback"
    assert session.access_token(found, ClientError) == "ya29.loopback"


def test_adc_is_asked_for_cloud_platform_alone(
    no_adc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one scope policy: IAM, not the OAuth scope, decides what a call may do."""
    import google.auth

    asked: list[Any] = []
    found = object()

    def default(**kwargs: Any) -> tuple[object, str]:
        asked.append(kwargs)
        return found, "p"

    monkeypatch.setattr(google.auth, "default", default)
    assert session.credentials(ClientError) is found
    assert asked == [{"scopes": [CLOUD_PLATFORM_SCOPE]}]


# --- the credential check ---------------------------------------------------------------------


def test_no_credentials_is_the_clients_error_naming_the_fix(no_adc: Path) -> None:
    with pytest.raises(ClientError) as caught:
        session.session(apis.RESOURCE_MANAGER, ClientError)
    assert str(caught.value).startswith("no Google Cloud credentials")
    assert FIX in str(caught.value) and CREDENTIALS_FIX in str(caught.value)


def test_a_credentials_path_that_is_no_file_is_said_before_google_auth_is_asked(
    no_adc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(no_adc / "absent.json"))
    with pytest.raises(ClientError, match="is not a file: fix the path, or unset it and run"):
        session.credentials(ClientError, from_disk_first=True)
    # Without the disk check, google.auth's own refusal, in the one message.
    with pytest.raises(ClientError, match="no Google Cloud credentials") as caught:
        session.credentials(ClientError)
    assert FIX in str(caught.value)


def test_refused_credentials_are_the_clients_error_naming_the_fix(
    adc: Path, google: Google
) -> None:
    """An expired or revoked key: the token endpoint answers invalid_grant."""
    google.refuse = True
    found, _ = session.session(apis.STORAGE, ClientError)
    with pytest.raises(ClientError, match="Google refused your credentials") as caught:
        session.call(found, "GET", google.url("/status/200"), FAILURES, timeout=5)
    assert FIX in str(caught.value)
    assert not [r for r in google.server.requests if r["path"] == "/status/200"]
    with pytest.raises(ClientError, match="Google refused your credentials"):
        session.access_token(found, ClientError)


def test_an_unreachable_token_service_is_the_clients_error(
    no_adc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = service_account_key(no_adc / "key.json", "http://127.0.0.1:9/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    found, _ = session.session(apis.STORAGE, ClientError)
    with pytest.raises(ClientError, match="cannot reach Google's token service"):
        session.access_token(found, ClientError)


# --- HTTP failures ----------------------------------------------------------------------------


def _failures(name: str) -> session.Failures:
    """FAILURES for one named thing, as a client builds them (braces in the name stay)."""
    return session.Failures(
        ClientError,
        unreachable=FAILURES.unreachable,
        otherwise=FAILURES.otherwise.replace("{name}", name),
        refused=FAILURES.refused.replace("{name}", name),
        missing=FAILURES.missing.replace("{name}", name),
    )


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "the API refused s{1} (HTTP 401): ask for roles/x.viewer"),
        (403, "the API refused s{1} (HTTP 403): ask for roles/x.viewer"),
        (404, "s{1} does not exist: create it"),
        (500, "the API answered HTTP 500 for s{1}; try again"),
        (429, "the API answered HTTP 429 for s{1}; try again"),
    ],
)
def test_an_http_failure_is_the_clients_error_with_its_fix(
    google: Google, status: int, message: str
) -> None:
    with pytest.raises(ClientError) as caught:
        session.call(
            requests.Session(), "GET", google.url(f"/status/{status}"), _failures("s{1}"), timeout=5
        )
    assert str(caught.value) == message


def test_what_the_caller_accepts_is_answered(google: Google) -> None:
    plain = requests.Session()
    ok = session.call(plain, "GET", google.url("/status/200"), FAILURES, timeout=5)
    assert ok is not None and ok.json() == {"path": "/status/200"}
    assert (
        session.call(plain, "GET", google.url("/status/404"), FAILURES, timeout=5, allow_404=True)
        is None
    )
    accepted = session.call(
        plain, "DELETE", google.url("/status/204"), FAILURES, timeout=5, ok=(200, 204)
    )
    assert accepted is not None and accepted.status_code == 204
    with pytest.raises(ClientError, match="HTTP 204"):
        session.call(plain, "DELETE", google.url("/status/204"), FAILURES, timeout=5)


def test_without_a_message_of_its_own_a_refusal_or_absence_is_the_general_one(
    google: Google,
) -> None:
    general = session.Failures(ClientError, unreachable="down ({error})", otherwise="HTTP {status}")
    for status in (403, 404):
        with pytest.raises(ClientError, match=f"^HTTP {status}$"):
            session.call(
                requests.Session(), "GET", google.url(f"/status/{status}"), general, timeout=5
            )


def test_an_unreachable_api_is_the_clients_error_naming_the_network() -> None:
    with pytest.raises(ClientError) as caught:
        session.call(requests.Session(), "GET", "http://127.0.0.1:9/v1/x", FAILURES, timeout=5)
    assert str(caught.value) == "cannot reach the API (ConnectionError); check the network"


def test_a_bug_in_the_caller_is_not_dressed_as_an_api_failure() -> None:
    with pytest.raises(TypeError):
        session.call(requests.Session(), "GET", "http://127.0.0.1:9/", FAILURES, timeout=5, nope=1)


# --- one home ---------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
GCP = ROOT / "tpudeploy" / "gcp"
EMULATOR_VARIABLE = re.compile(r"[A-Z][A-Z0-9_]*_EMULATOR_HOST")


def _outside_gcp() -> list[Path]:
    """The product's and the tools' modules, tpudeploy/gcp's aside (the tests set the
    variables by name, as a user would)."""
    return [
        path
        for folder in ("tpudeploy", "stacks", "tools")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not path.is_relative_to(GCP)
    ]


def _credential_lookups(path: Path) -> list[str]:
    """google.auth.default() called, or google.auth's default / AuthorizedSession imported."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "default"
            and ast.unparse(node.value) == "google.auth"
        ):
            found.append(f"{path.name}:{node.lineno}: google.auth.default")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("google.auth"):
            for alias in node.names:
                if alias.name in ("default", "AuthorizedSession"):
                    found.append(f"{path.name}:{node.lineno}: imports {alias.name}")
    return found


def _emulator_variables(path: Path) -> list[str]:
    """String constants naming an *_EMULATOR_HOST variable (docstrings aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        f"{path.name}:{node.lineno}: {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and id(node) not in docstrings
        and isinstance(node.value, str)
        and EMULATOR_VARIABLE.fullmatch(node.value.strip())
    ]


def test_only_tpudeploy_gcp_looks_up_google_credentials() -> None:
    modules = _outside_gcp()
    assert len(modules) > 100  # the walk found the packages
    found = [hit for path in modules for hit in _credential_lookups(path)]
    assert not found, "take a session or credentials from tpudeploy.gcp.session:\n" + "\n".join(
        found
    )
    assert _credential_lookups(GCP / "session.py")  # and the scan sees the one that does


def test_each_emulator_variable_is_defined_once_in_tpudeploy_gcp() -> None:
    found = [hit for path in _outside_gcp() for hit in _emulator_variables(path)]
    assert not found, "name the API from tpudeploy.gcp.apis instead:\n" + "\n".join(found)
    defined = [hit for path in sorted(GCP.glob("*.py")) for hit in _emulator_variables(path)]
    assert len(defined) == len(apis.ALL) and all(h.startswith("apis.py:") for h in defined)
    variables = [api.emulator_env for api in apis.ALL]
    assert len(set(variables)) == len(variables)
    assert len({api.name for api in apis.ALL}) == len(apis.ALL)


def test_the_scans_find_a_planted_copy(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        '"""Reads FOO_EMULATOR_HOST (a docstring: fine)."""\n'
        "import google.auth\n"
        "from google.auth.transport.requests import AuthorizedSession\n"
        'EMULATOR_ENV = "FOO_EMULATOR_HOST"\n'
        "credentials, _ = google.auth.default()\n"
    )
    assert len(_credential_lookups(planted)) == 2
    assert _emulator_variables(planted) == ["planted.py:4: FOO_EMULATOR_HOST"]
