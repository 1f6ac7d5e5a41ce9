"""Loopback fake of the two Hugging Face Hub calls tpudeploy/hfhub.py makes, answering by the
rules in hfhub_rules.py (each with its source): the auth-check and the model info with blobs.

Tokens are known by value; each grants access to the gated repos its account accepted. A repo is
public, gated ("auto" or "manual") or private to its owners' tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote, urlsplit

from tools.rehearsal.fakes import hfhub_rules as rules
from tools.rehearsal.fakes.base import serving

_REPO = r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)"
_AUTH_CHECK = re.compile(rf"^/api/models/{_REPO}/auth-check$")
_INFO = re.compile(rf"^/api/models/{_REPO}(?:/revision/(?P<revision>[^/]+))?$")


@dataclass
class Repo:
    files: dict[str, int]  # rfilename -> size in bytes
    gated: str | bool = False  # "auto" | "manual" | False (ModelInfo.gated)
    private: bool = False
    revisions: tuple[str, ...] = ("main",)
    lfs_over: int = 10 * 2**20  # files this large are LFS objects (a sibling with "lfs")


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    # token -> the repos its account may read beyond public ones (accepted or owned)
    tokens: dict[str, set[str]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    host: str = ""

    def answer(self, path: str, authorization: str) -> tuple[rules.Rule | None, Any]:
        """(the rule that refused, None) or (None, the JSON body of a 200)."""
        url = urlsplit(path)
        token = authorization.removeprefix("Bearer ").strip() if authorization else ""
        if token and token not in self.tokens:
            return rules.INVALID_TOKEN, None
        granted = self.tokens.get(token, set())
        if m := _AUTH_CHECK.match(url.path):
            repo = self.repos.get(m["repo"])
            if repo is None or (repo.private and m["repo"] not in granted):
                return (rules.NOT_FOUND if token else rules.NO_TOKEN), None
            if repo.gated and m["repo"] not in granted:
                return (rules.GATED_NO_ACCESS if token else rules.NO_TOKEN), None
            return None, {}
        if m := _INFO.match(url.path):
            repo = self.repos.get(m["repo"])
            if repo is None or (repo.private and m["repo"] not in granted):
                return (rules.NOT_FOUND if token else rules.NO_TOKEN), None
            # A gated repo's metadata is answered to any token (rules.METADATA_PUBLIC_FOR_GATED).
            revision = unquote(m["revision"] or "main")
            if revision not in repo.revisions:
                return rules.REVISION_NOT_FOUND, None
            blobs = "blobs=true" in url.query.split("&")
            return None, {
                "id": m["repo"],
                "gated": repo.gated,
                "private": repo.private,
                "siblings": [self._sibling(repo, n, s, blobs) for n, s in repo.files.items()],
            }
        return rules.NOT_FOUND, None

    @staticmethod
    def _sibling(repo: Repo, name: str, size: int, blobs: bool) -> dict[str, Any]:
        if not blobs:
            return {"rfilename": name}  # RepoSibling: sizes only with files_metadata
        out: dict[str, Any] = {"rfilename": name, "blobId": "0" * 40, "size": size}
        if size >= repo.lfs_over:
            out["lfs"] = {"sha256": "0" * 64, "size": size, "pointerSize": 134}
        return out


@contextmanager
def running(hub: FakeHub) -> Iterator[FakeHub]:
    """`hub` served on 127.0.0.1; hub.host is the value for HFHUB_FAKE_HOST."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            auth = self.headers.get("Authorization") or ""
            hub.requests.append({"path": self.path, "authorization": auth})
            rule, body = hub.answer(self.path, auth)
            status = rule.status if rule else 200
            data = json.dumps(body if rule is None else {"error": rule.quote}).encode()
            self.send_response(status)
            if rule and rule.error_code:
                self.send_header("X-Error-Code", rule.error_code)
            if rule and rule.error_message:
                self.send_header("X-Error-Message", rule.error_message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serving(Handler) as server:
        hub.host = f"127.0.0.1:{server.server_address[1]}"
        yield hub
