"""Secret Manager over HTTPS for `make secret`, `make api-key` and `make smoke`: values travel in
request and response bodies only, never in argv, logs or files."""

from __future__ import annotations

import base64
import datetime
import getpass
import secrets
import sys
from collections.abc import Callable
from typing import Any, TextIO

from tpudeploy.config import DeployConfig
from tpudeploy.config.access import client_secret_id, overlap_seconds
from tpudeploy.config.secretshape import API_KEY_RE, HF_TOKEN_RE
from tpudeploy.durations import DurationError
from tpudeploy.errors import UserError
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import SECRET_MANAGER
from tpudeploy.node import keymap

UNREACHABLE = "cannot reach Secret Manager ({error}); check the network"


class SecretStoreError(UserError):
    """A Secret Manager call that failed; the message says what to do."""


class SecretStore:
    """Calls of the v1 REST API: addVersion, access, a version's state, the version list and
    versions:disable (rotation)."""

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
        return self.access(secret_id, "latest")

    def access_current_key(self, secret_id: str) -> str:
        """A client's current key: the first line of its latest version (after `make api-key
        ROTATE=1` the second line is the previous key and when it stops, tpudeploy/node/keymap)."""
        lines = self.access_latest(secret_id).strip().splitlines()
        return lines[0].strip() if lines else ""

    def access(self, secret_id: str, version: str) -> str:
        """A version's payload; `version` is its number or "latest"."""
        url = f"{self._secret(secret_id)}/versions/{version}:access"
        payload = self._call("GET", url, secret_id).get("payload", {})
        return base64.b64decode(payload.get("data", "")).decode()

    def versions(self, secret_id: str) -> list[tuple[str, str]]:
        """[(version number, state)] newest first, metadata only (projects.secrets.versions.list:
        "This call does not return secret data"; secretmanager.versions.list on the secret)."""
        out: list[tuple[str, str]] = []
        token = ""
        while True:
            params = {"pageSize": "100", **({"pageToken": token} if token else {})}
            url = f"{self._secret(secret_id)}/versions"
            page = self._call("GET", url, secret_id, params=params)
            for version in page.get("versions") or []:
                out.append((str(version["name"]).rsplit("/", 1)[-1], str(version.get("state"))))
            token = str(page.get("nextPageToken") or "")
            if not token:
                break
        # Version ids count up from 1 ("SecretVersion IDs in a Secret start at 1 and are
        # incremented for each subsequent version"): sort on them, whatever the page order.
        return sorted(out, key=lambda v: int(v[0]) if v[0].isdigit() else 0, reverse=True)

    def disable(self, secret_id: str, version: str) -> None:
        """projects.secrets.versions.disable: the version can no longer be accessed (reversible
        with :enable), so no node or pod reads a rotated-out payload again."""
        self._call(
            "POST", f"{self._secret(secret_id)}/versions/{version}:disable", secret_id, json={}
        )


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
    *,
    check: Callable[[str], list[str]] | None = None,
) -> int:
    """Read and check the token, then store it. `store` may be a factory: credentials are then
    looked for only once there is a well-formed token to store (reading stdin comes first).
    `check(token)`: lines to print once it is stored (what Hugging Face says of the repos the
    deployment downloads: warnings, never a failure, the token is stored either way)."""
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
    for line in check(token) if check else []:
        print(line, file=out)
    return 0


def _client(cfg: DeployConfig, client: str | None) -> str:
    clients = list(cfg.access.clients)
    if client is None or client == "":
        return clients[0]
    if client not in clients:
        raise SecretStoreError(
            f"CLIENT={client} is not a client of this deployment: [access] clients is "
            f"{clients}. Add it to clients in the config and run `make deploy-secrets` (its "
            "secret is declared there), or pick one of those"
        )
    return client


def _overlap_seconds(cfg: DeployConfig, overlap: str | None) -> int:
    if overlap is None or overlap == "":
        return cfg.access.rotation_overlap_seconds
    try:
        return overlap_seconds(overlap.strip(), name="OVERLAP")
    except DurationError as exc:
        raise SecretStoreError(f"{exc} (or OVERLAP=0 to stop the old key now)") from None


def rotation_payload(
    new_key: str, old_payload: str, client: str, until: datetime.datetime | None
) -> str:
    """The new version: the new key, then the old version's CURRENT key with when it stops (an
    older previous line is dropped: at most two keys per client). No until: the new key alone."""
    if until is None:
        return new_key
    try:
        (old_key, _), *_ = keymap.parse_payload(client, old_payload)
    except keymap.KeyMapError:
        return new_key  # nothing servable to carry over (the node refuses it anyway)
    return f"{new_key}\n{old_key} {until.strftime(keymap.UNTIL_FORMAT)}"


def store_new_api_key(
    cfg: DeployConfig,
    store: SecretStore,
    out: TextIO,
    *,
    client: str | None = None,
    rotate: bool = False,
    overlap: str | None = None,
    show: bool = False,
    now: datetime.datetime | None = None,
) -> int:
    """`make api-key CLIENT=name [ROTATE=1] [OVERLAP=30m] [SHOW=1]`: the client's first key, or
    with ROTATE=1 a new key while the current one keeps working for the overlap. The key travels
    in the request body only; it is printed only with SHOW=1."""
    name = _client(cfg, client)
    secret_id = client_secret_id(cfg.name, name)
    seconds = _overlap_seconds(cfg, overlap)
    enabled = [v for v, state in store.versions(secret_id) if state == "ENABLED"]
    if enabled and not rotate:
        print(
            f"error: client {name} already has a key (version {enabled[0]} of {secret_id}). "
            f"`make api-key CLIENT={name} ROTATE=1` rotates it: the old key keeps working for "
            f"the configured overlap ({cfg.access.rotation_overlap}; OVERLAP=30m for another); "
            f"`make api-key CLIENT={name} ROTATE=1 OVERLAP=0` stops the old key now (a leaked "
            "key)",
            file=sys.stderr,  # a refusal, like every other: stdout is for what was done
        )
        return 2
    # 32 random bytes, URL-safe: 43 characters, nothing to quote in a header.
    key = secrets.token_urlsafe(32)
    assert API_KEY_RE.match(key)  # the format the node accepts at boot
    now = now or datetime.datetime.now(datetime.UTC)
    until = now.replace(microsecond=0) + datetime.timedelta(seconds=seconds) if seconds else None
    payload = key
    if enabled:
        payload = rotation_payload(key, store.access(secret_id, enabled[0]), name, until)
    version = store.add_version(secret_id, payload)
    # Every earlier version off: the new one carries the old key while it is still valid, and
    # an earlier payload (with keys rotated out before) is never read again.
    for old in enabled:
        store.disable(secret_id, old)
    where = f"--secret={secret_id} --project={store.project}"
    lines = [f"stored a new key for client {name} as {version or 'a new version'} of {secret_id}."]
    if enabled and "\n" in payload:
        assert until is not None
        lines.append(
            f"The old key keeps working until {until.strftime('%Y-%m-%d %H:%M:%S')} UTC "
            f"({seconds // 60} min): move {name}'s agents to the new key before then."
        )
    elif enabled:
        lines.append("The old key stops now (OVERLAP=0): its agents get 401 until they move.")
    if enabled:
        lines.append(f"Disabled the earlier version(s) {', '.join(enabled)} of {secret_id}.")
    lines.append(
        "Read the new key (it is not printed here; the first line is the key):\n"
        f"  gcloud secrets versions access latest {where} | head -n1"
    )
    if show:
        lines.append(f"The new key (SHOW=1): {key}")
    lines.append(
        "The front door picks it up within a minute, without dropping a connection (TPU VM: "
        "the node polls every 30 s; GKE: the Secret Manager add-on's rotation, then the pod's "
        "loop); it checks the key on every path but /health. `make endpoint` prints the "
        "certificate to pin."
    )
    print("\n".join(lines), file=out)
    return 0
