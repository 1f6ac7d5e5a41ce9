"""Secret Manager over HTTPS for `make secret`, `make api-key` and `make smoke`: values travel in
request and response bodies only, never in argv, logs or files."""

from __future__ import annotations

import base64
import getpass
import secrets
from collections.abc import Callable
from typing import Any, TextIO

from tpudeploy.config import DeployConfig
from tpudeploy.config.secretshape import API_KEY_RE, HF_TOKEN_RE
from tpudeploy.errors import UserError
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import SECRET_MANAGER

UNREACHABLE = "cannot reach Secret Manager ({error}); check the network"


class SecretStoreError(UserError):
    """A Secret Manager call that failed; the message says what to do."""


class SecretStore:
    """Two calls of the v1 REST API: addVersion and access the latest version."""

    def __init__(
        self, project: str, *, session: Any, base_url: str = SECRET_MANAGER.base_url
    ) -> None:
        self.project = project
        self.session = session
        self.base_url = base_url.rstrip("/")

    @classmethod
    def from_env(cls, project: str) -> SecretStore:
        """SECRETMANAGER_EMULATOR_HOST=host:port means plain HTTP and no credentials (tests);
        otherwise Application Default Credentials (tpudeploy/gcp/session.py)."""
        session, base_url = gcp_session.session(SECRET_MANAGER, SecretStoreError)
        return cls(project, session=session, base_url=base_url)

    def _secret(self, secret_id: str) -> str:
        return f"{self.base_url}/projects/{self.project}/secrets/{secret_id}"

    def _call(self, method: str, url: str, secret_id: str, **kwargs: Any) -> dict[str, Any]:
        failures = gcp_session.Failures(
            SecretStoreError,
            unreachable=UNREACHABLE,
            missing=(
                f"secret {secret_id} (or a version of it) does not exist in project "
                f"{self.project}: `make deploy-secrets` creates the secret, `make secret` / "
                "`make api-key` add its value"
            ),
            refused=(
                f"Secret Manager refused access to {secret_id} (HTTP {{status}}): "
                "your account needs roles/secretmanager.secretVersionAdder (to store) or "
                "secretAccessor (to read) on it, and fresh credentials "
                "(`gcloud auth application-default login`)"
            ),
            otherwise=f"Secret Manager answered HTTP {{status}} for {secret_id}; try again",
        )
        response = gcp_session.call(self.session, method, url, failures, timeout=30, **kwargs)
        assert response is not None  # no 404 allowed: `missing` says it
        result: dict[str, Any] = response.json()
        return result

    # What version_state answers besides a version's own state (ENABLED, DISABLED, DESTROYED).
    NO_SECRET = "NO_SECRET"  # noqa: S105 - a state name, not a secret
    NO_VERSION = "NO_VERSION"

    def version_state(self, secret_id: str, *, timeout: float = 5.0) -> str:
        """The state of the secret's latest version, as the node's boot will find it, from
        metadata only (never the value): NO_SECRET, NO_VERSION, ENABLED, DISABLED or DESTROYED.
        Raises SecretStoreError when Secret Manager cannot be asked or refuses."""
        failures = gcp_session.Failures(
            SecretStoreError,
            unreachable=UNREACHABLE,
            refused=(
                f"Secret Manager refused to show {secret_id} (HTTP {{status}}): "
                "reading a version's state needs secretmanager.versions.get "
                "(roles/secretmanager.viewer)"
            ),
            otherwise=f"Secret Manager answered HTTP {{status}} for {secret_id}; try again",
        )
        for url, missing in (
            (self._secret(secret_id), self.NO_SECRET),
            (f"{self._secret(secret_id)}/versions/latest", self.NO_VERSION),
        ):
            response = gcp_session.call(
                self.session, "GET", url, failures, timeout=timeout, allow_404=True
            )
            if response is None:
                return missing
        assert response is not None
        return str(response.json().get("state") or "STATE_UNSPECIFIED")

    def add_version(self, secret_id: str, value: str) -> str:
        """Store `value` as the newest version; returns the version's resource name."""
        data = value.encode()
        body = {"payload": {"data": base64.b64encode(data).decode()}}
        url = f"{self._secret(secret_id)}:addVersion"
        return str(self._call("POST", url, secret_id, json=body).get("name", ""))

    def access_latest(self, secret_id: str) -> str:
        url = f"{self._secret(secret_id)}/versions/latest:access"
        payload = self._call("GET", url, secret_id).get("payload", {})
        return base64.b64decode(payload.get("data", "")).decode()


def read_token(stdin: TextIO, *, prompt: str) -> str:
    """A hidden prompt on a terminal, else all of stdin (`gcloud secrets ... | make secret`)."""
    value = getpass.getpass(prompt) if stdin.isatty() else stdin.read()
    return value.strip()


# Whoever is root on the node can read the token (it must, to download the checkpoint; README,
# security): give it only what the download needs (issue 22).
READ_ONLY_ADVICE = (
    "use a read-only token: a fine-grained token (huggingface.co/settings/tokens) whose only "
    "permission is read access to {model} (or to the public gated repos you can access), or a "
    "Read token; never a Write token. Root on the node (roles/compute.osAdminLogin) can read it"
)


def store_hf_token(
    cfg: DeployConfig,
    store: SecretStore | Callable[[], SecretStore],
    stdin: TextIO,
    out: TextIO,
) -> int:
    """Read and check the token, then store it. `store` may be a factory: credentials are then
    looked for only once there is a well-formed token to store (reading stdin comes first)."""
    advice = READ_ONLY_ADVICE.format(model=cfg.vllm.model)
    if stdin.isatty():
        print(advice[0].upper() + advice[1:], file=out)
    token = read_token(stdin, prompt="Hugging Face token (input hidden): ")
    if not token:
        print(
            'error: no token given. Pipe it in (`printf %s "$TOKEN" | make secret` from a '
            "password manager, not your shell history) or type it at the hidden prompt",
            file=out,
        )
        return 2
    if any(c.isspace() for c in token):
        print("error: the token contains whitespace; paste only the token (hf_...)", file=out)
        return 2
    if not HF_TOKEN_RE.match(token):
        # The node refuses the same values at boot (templates/startup.sh.j2): say so now.
        print(
            "error: that is not a Hugging Face access token (hf_ and at least 30 letters and "
            "digits); the node would refuse it at boot. Copy it from "
            "huggingface.co/settings/tokens",
            file=out,
        )
        return 2
    if not isinstance(store, SecretStore):
        store = store()
    version = store.add_version(cfg.hf_token_secret_id, token)
    print(
        f"stored the Hugging Face token as {version or 'a new version'} of "
        f"{cfg.hf_token_secret_id}; the node reads it at its next boot. Reminder: {advice}",
        file=out,
    )
    return 0


def store_new_api_key(cfg: DeployConfig, store: SecretStore, out: TextIO) -> int:
    # 32 random bytes, URL-safe: 43 characters, nothing to quote in a header.
    key = secrets.token_urlsafe(32)
    assert API_KEY_RE.match(key)  # the format the node accepts at boot
    version = store.add_version(cfg.api_key_secret_id, key)
    print(
        f"stored a new vLLM API key as {version or 'a new version'} of {cfg.api_key_secret_id}.\n"
        "Read it back (it is not printed here):\n"
        f"  gcloud secrets versions access latest --secret={cfg.api_key_secret_id} "
        f"--project={store.project}\n"
        "The node's TLS proxy reads the key at boot and checks it on every path but /health: a "
        "running node keeps the old key until its startup script runs again (a restart).\n"
        "Clients reach the proxy through `make tunnel` or from [network] allowed_cidrs; "
        "`make endpoint` prints the certificate to pin.",
        file=out,
    )
    return 0
