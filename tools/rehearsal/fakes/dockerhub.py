"""Docker Hub's tag endpoint on loopback: a tag points at one digest until a "new release" moves
it. The rules, as data with their source:

- GET /v2/namespaces/{namespace}/repositories/{repository}/tags/{tag}: "Returns details for a
  specific tag in the specified repository"
  (https://docs.docker.com/reference/api/hub/latest/operations/GetRepositoryTag.md); the body's
  `digest` is `sha256:<64 hex>`.
- An unknown tag: 404 with `{"message": ...}` (the same page's 404 "Not Found", schema `error`).
- Public repositories are read without a token (the page's security block lists bearerAuth as
  one alternative; the stored page does not say it is required for public reads: that rests on
  the issue's reading and on `docker pull` working anonymously).
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

SOURCE = "https://docs.docker.com/reference/api/hub/latest/operations/GetRepositoryTag.md"
TAG_PATH = re.compile(
    r"^/v2/namespaces/(?P<namespace>[^/]+)/repositories/(?P<repository>[^/]+)/tags/(?P<tag>[^/]+)$"
)
DIGEST = re.compile(r"^[0-9a-f]{64}$")


class FakeDockerHub:
    """`with FakeDockerHub() as hub: hub.publish("vllm/vllm-tpu", "nightly", digest)`; its
    `url` is the base the watch reads (UPSTREAM_REGISTRY_URL)."""

    def __init__(self) -> None:
        self.tags: dict[tuple[str, str], dict[str, str]] = {}
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hub.requests.append(self.path)
                m = TAG_PATH.fullmatch(self.path)
                entry = (
                    hub.tags.get((f"{m['namespace']}/{m['repository']}", m["tag"])) if m else None
                )
                if entry is None:
                    self._answer(404, {"errinfo": None, "message": "not found"})
                else:
                    self._answer(200, entry)

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def publish(self, repository: str, tag: str, digest: str, when: str = "2026-12-01") -> None:
        """A release: `repository:tag` now points at `digest` (64 hex digits)."""
        assert DIGEST.fullmatch(digest), digest
        self.tags[(repository, tag)] = {
            "name": tag,
            "digest": f"sha256:{digest}",
            "last_updated": f"{when}T00:00:00Z",
        }

    def __enter__(self) -> FakeDockerHub:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
