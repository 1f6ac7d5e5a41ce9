"""Ask the Hugging Face Hub, before any spend, whether a token may download a repo and how much.

Two documented calls of huggingface_hub's own client (the rules, with their sources, are data in
tools/rehearsal/fakes/hfhub_rules.py, which the loopback fake answers from):

- GET /api/models/{repo_id}/auth-check (HfApi.auth_check): 200 when the token may read the
  repo; 403 with X-Error-Code GatedRepo when it is gated and the token's account is not on its
  authorized list; 401 without a (valid) token; 404 RepoNotFound when it does not exist or is
  private to this token; any other 403: the token lacks the permission (a fine-grained token).
- GET /api/models/{repo_id}[/revision/{rev}]?blobs=true (HfApi.model_info(files_metadata=True)):
  each file's size, and `gated` ("auto", "manual" or false).

The token is a str in memory and goes only into the Authorization header of an HTTPS request to
huggingface.co (plain HTTP only to a loopback fake, HFHUB_FAKE_HOST): never argv, a child's
environment, a file or a log line, and never into an error (every message is built without it,
and scrubbed of it besides). Redirects are not followed, so the header never reaches another
host. Standard library only.
"""

from __future__ import annotations

import fnmatch
import http.client
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from tpudeploy.errors import UserError

HUB_HOST: Final = "huggingface.co"
# Not a Google emulator variable (those are tpudeploy/gcp/apis.py's): the loopback fake of the Hub.
FAKE_ENV: Final = "HFHUB_FAKE_HOST"
TIMEOUT_S: Final = 20.0
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
# A repo id as the Hub names one: namespace/name of letters, digits, "-", "_" and ".".
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")

# What a token may do with a repo, from the auth-check's answer.
MAY_DOWNLOAD: Final = "may download"
GATED_NO_ACCESS: Final = "gated, and this token's account has no access"
NOT_FOUND: Final = "not found, or private to this token"
BAD_TOKEN: Final = "the token is not valid"  # noqa: S105 - an answer, not a secret
NO_TOKEN: Final = "no token was sent"  # noqa: S105 - an answer, not a secret
FORBIDDEN: Final = "the token lacks the permission to read it"

# vLLM picks one weights format, the first of these that the repo has (vllm/model_executor/
# model_loader/weight_utils.py, download_weights_from_hf: "depending on what is available we
# download different things ... allow_patterns = [pattern]; break"; default_loader.py: load
# format auto -> ["*.safetensors", "*.bin"], "*.pt" when it falls back to PyTorch files).
WEIGHT_PATTERNS: Final = ("*.safetensors", "*.bin", "*.pt")
# Files that are weights in some format: of these only the chosen format is downloaded. Every
# other file (config, tokenizer, chat template, README) is counted: an upper bound, since vLLM
# and transformers fetch only the config and tokenizer files of them.
_WEIGHT_SUFFIXES: Final = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack",
                           ".onnx", ".ckpt", ".ot", ".tflite", ".npz")  # fmt: skip


class HubError(UserError):
    """The Hub could not be asked, or answered what this client does not know; never holds the
    token."""


@dataclass(frozen=True)
class RepoAnswer:
    """What the Hub answered for one repo and one token."""

    repo: str
    revision: str | None
    access: str  # MAY_DOWNLOAD, GATED_NO_ACCESS, NOT_FOUND, BAD_TOKEN, NO_TOKEN or FORBIDDEN
    answered: str  # what the auth-check said: "HTTP 403 (X-Error-Code GatedRepo)"
    gated: str | bool | None = None  # the model info's `gated`: "auto", "manual", False
    download_bytes: int | None = None  # the files vLLM would fetch, from their sizes
    weights_format: str | None = None

    @property
    def may_download(self) -> bool:
        return self.access == MAY_DOWNLOAD


def download_bytes(siblings: list[dict[str, Any]]) -> tuple[int, str | None]:
    """(bytes, the weights pattern vLLM picks) for the `siblings` of a model info asked with
    blobs=true: the chosen format's files and every file that is no weights file. A file's size
    is its LFS object's when it has one ("lfs": {"size": ...}), else its own "size"."""
    names = [str(s.get("rfilename", "")) for s in siblings]
    chosen = next((p for p in WEIGHT_PATTERNS if fnmatch.filter(names, p)), None)
    total = 0
    for sibling, name in zip(siblings, names, strict=True):
        is_weights = name.lower().endswith(_WEIGHT_SUFFIXES)
        if is_weights and not (chosen and fnmatch.fnmatch(name, chosen)):
            continue
        lfs = sibling.get("lfs") if isinstance(sibling.get("lfs"), dict) else None
        size = (lfs or {}).get("size", sibling.get("size"))
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise HubError(
                f"the Hub listed {name} without its size (asked with blobs=true, which "
                "answers each file's size): cannot measure the download; try again"
            )
        total += size
    return total, chosen


def _base() -> tuple[str, int, bool]:
    """(host, port, https) of the Hub, or of its loopback fake (HFHUB_FAKE_HOST)."""
    value = os.environ.get(FAKE_ENV, "").strip().removeprefix("http://").rstrip("/")
    if not value:
        return HUB_HOST, 443, True
    host, _, port = value.rpartition(":")
    if host not in _LOOPBACK or not port.isdigit():
        # Plain HTTP carries the token in clear: only to this machine's own fake.
        raise HubError(
            f"{FAKE_ENV}={value} is not a loopback host:port (127.0.0.1:PORT); the token "
            f"would travel unencrypted. Unset it to ask {HUB_HOST}"
        )
    return host.strip("[]"), int(port), False


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "[token]") if token else text


def _get(path: str, token: str) -> tuple[int, dict[str, str], bytes]:
    host, port, https = _base()
    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection(host, port, timeout=TIMEOUT_S)
        if https
        else http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    )
    headers = {"Accept": "application/json", "User-Agent": "tpudeploy"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        raw = response.read()
    except OSError as exc:
        raise HubError(
            _scrub(f"cannot reach {host} ({type(exc).__name__}: {exc}); check the network", token)
        ) from None
    finally:
        conn.close()
    found = {k.lower(): v for k, v in response.getheaders()}
    return response.status, found, raw


def _said(status: int, headers: dict[str, str]) -> str:
    extra = [f"X-Error-Code {headers['x-error-code']}"] if headers.get("x-error-code") else []
    if headers.get("x-error-message"):
        extra.append(f"X-Error-Message {headers['x-error-message']!r}")
    return f"HTTP {status}" + (f" ({'; '.join(extra)})" if extra else "")


def _access(status: int, headers: dict[str, str], token: str) -> str | None:
    """The auth-check's answer as an access value; None for one this client does not know."""
    code = headers.get("x-error-code", "")
    if status == 200:
        return MAY_DOWNLOAD
    if code == "GatedRepo":
        return GATED_NO_ACCESS
    if status == 401 and headers.get("x-error-message") == (
        "Invalid credentials in Authorization header"
    ):
        return BAD_TOKEN
    if status == 401 and not token:
        return NO_TOKEN
    if code == "RepoNotFound" or status in (401, 404):
        return NOT_FOUND
    if status == 403:
        # Any other 403: huggingface_hub's words for it, "Make sure your token has the correct
        # permissions" (a fine-grained token without read access to this repo).
        return FORBIDDEN
    return None


def check_repo(repo: str, token: str, revision: str | None = None) -> RepoAnswer:
    """Whether `token` may download `repo` (at `revision`, if pinned) and, when the repo exists,
    its download size. HubError when the Hub cannot be asked or answers something unknown."""
    if not _REPO_RE.match(repo):
        raise HubError(f"{repo!r} is not a Hugging Face repo id (namespace/name)")
    status, headers, _ = _get(f"/api/models/{repo}/auth-check", token)
    answered = _said(status, headers)
    access = _access(status, headers, token)
    if access is None:
        raise HubError(
            _scrub(f"the Hub answered {answered} to the access check of {repo}; try again", token)
        )
    if access not in (MAY_DOWNLOAD, GATED_NO_ACCESS):
        return RepoAnswer(repo, revision, access, answered)
    path = f"/api/models/{repo}" + (f"/revision/{quote(revision, safe='')}" if revision else "")
    status, headers, raw = _get(f"{path}?blobs=true", token)
    if status != 200:
        what = _said(status, headers)
        if headers.get("x-error-code") == "RevisionNotFound":
            # The Hub's X-Error-Message is quoted back: scrubbed like every other message.
            raise HubError(
                _scrub(f"{repo} has no revision {revision!r} (the Hub answered {what})", token)
            )
        raise HubError(_scrub(f"the Hub answered {what} to {repo}'s file list; try again", token))
    try:
        info = json.loads(raw)
        siblings = info["siblings"]
        assert isinstance(siblings, list)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise HubError(f"the Hub's model info of {repo} has no file list; try again") from None
    size, chosen = download_bytes(siblings)
    return RepoAnswer(repo, revision, access, answered, info.get("gated"), size, chosen)
