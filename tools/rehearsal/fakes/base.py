"""A ThreadingHTTPServer on 127.0.0.1 that records each request and answers through one route
function: the shape every loopback fake of a Google API here shares (tests and rehearsal)."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

Answer = tuple[int, Any]
Route = Callable[[str, str, Any, dict[str, str]], Answer]

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    412: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def api_error(status: int, message: str) -> Answer:
    """The JSON error body every Google REST API answers with."""
    return status, {
        "error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status)}
    }


# serve_forever polls for shutdown every 0.5 s by default: every test's teardown would wait that
# long. 10 ms keeps it short.
SHUTDOWN_POLL_S = 0.01


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """A ThreadingHTTPServer on a free 127.0.0.1 port answering with `handler`, in a thread of
    its own, shut down on exit: for a test's fake of a service that is not a Google API."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class LoopbackServer:
    """Routes every request to `route(method, path_with_query, body, headers)`.

    A JSON request body arrives parsed, any other body as bytes; an answer payload of bytes is
    sent as is, anything else as JSON. `requests` keeps what was asked, in order.
    """

    def __init__(self, route: Route, *, tls: tuple[Path, Path] | None = None) -> None:
        """`tls`: (certificate, key) files to serve HTTPS with, as the node's proxy does."""
        self.requests: list[dict[str, Any]] = []
        self._route = route
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True
        )

    @property
    def host(self) -> str:
        """host:port, the value for the *_EMULATOR_HOST variables."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    # Go's HTTP client streams an upload of unknown length chunked (Terraform's
                    # gcs backend writing state): HTTP/1.1's chunked coding, RFC 9112 7.1.
                    raw = _read_chunked(self.rfile)
                body: Any = raw or None
                kind = self.headers.get("Content-Type") or "json"
                # JSON unless the client said otherwise (curl --data-binary says form data).
                if raw and ("json" in kind or "form-urlencoded" in kind):
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        body = raw
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake._lock:
                    fake.requests.append(
                        {
                            "method": self.command,
                            "path": self.path,
                            "body": body,
                            "headers": headers,
                        }
                    )
                    status, payload = fake._route(self.command, self.path, body, headers)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                kind = (
                    "application/octet-stream" if isinstance(payload, bytes) else "application/json"
                )
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve
            do_PUT = _serve
            do_PATCH = _serve
            do_DELETE = _serve

        return Handler


def _read_chunked(stream: Any) -> bytes:
    """A chunked request body: hex size lines, each chunk, a zero-size chunk, trailers."""
    data = b""
    while True:
        size = int(stream.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while stream.readline() not in (b"\r\n", b"\n", b""):
                pass
            return data
        data += stream.read(size)
        stream.readline()
