"""The wake responder: what answers behind the front door while a min_replicas = 0 deployment has
no ready replica. Standard library only: the pod runs this file as it is (python3 of the pinned
slim image, tpudeploy.pins.WAKE_IMAGE), and tests run the same file.

It listens where a replica's vLLM listens (127.0.0.1, [vllm] port), behind the same nginx front
door (TLS, the API key on every path but /health, only /v1/* forwarded), so a request without
the key never reaches it and never wakes anything. For each request that does:

- 503 with `Retry-After` (RFC 9110, section 10.2.3: seconds) and an OpenAI-shaped error naming
  the wait: the rest of the planner's timeline since the wake began (tpudeploy.gke.zero), never
  less than a floor;
- `/metrics`: the gauge `tpudeploy_wake_pending`, 1 from a request until the timeline has run
  once more, else 0. The HPA reads it as an External metric (the only kinds an HPA may use at
  minReplicas 0 are External and Object: GKE's scale-to-zero tutorial), through Managed
  Prometheus and the metrics adapter. It exists with no replica running, which a replica's own
  metrics cannot;
- `/health`: 200 while no replica of the Deployment is ready, 503 once one is, read from the
  Kubernetes API (the Deployment's status.readyReplicas, with the pod's projected token). The
  front door's readiness probe reads it, so the Service sends clients here only while nothing
  else can answer them. When the API cannot be read, it stays ready: a 503 that says "starting"
  is honest, a connection refused is not.
"""

from __future__ import annotations

import json
import math
import ssl
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

METRIC = "tpudeploy_wake_pending"
# Where a projected service account token and the cluster CA are mounted, not a secret itself.
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # noqa: S105
# The Kubernetes API from inside a pod (kubernetes.io, "Accessing the Kubernetes API from a Pod").
API = "https://kubernetes.default.svc"


# The most a 503 asks a client to wait, though the boot takes longer: the clients generated like
# OpenAI's Python SDK sleep a Retry-After only when it is "0 < retry_after <= 60" and otherwise
# fall back to their own backoff of at most 8 s (the generated _base_client's
# _calculate_retry_timeout, read in a stored note on Anthropic's SDK, which shares it; OpenAI's
# own copy was not read). At 60 s such a client, given enough max_retries, retries on time; the
# error's message still names the whole wait left.
MAX_RETRY_AFTER_S = 60


def remaining_s(since_wake_s: float, *, total_s: int) -> int:
    """Seconds of the timeline left `since_wake_s` after the wake began (0 once past it)."""
    return max(0, math.ceil(total_s - max(0.0, since_wake_s)))


def retry_after_s(since_wake_s: float, *, total_s: int, floor_s: int) -> int:
    """What a 503 asks a client to wait: the rest of the timeline, between `floor_s` and
    MAX_RETRY_AFTER_S."""
    return min(MAX_RETRY_AFTER_S, max(floor_s, remaining_s(since_wake_s, total_s=total_s)))


def waking_response(
    since_wake_s: float, *, total_s: int, floor_s: int
) -> tuple[int, dict[str, str], bytes]:
    """503, Retry-After in seconds, and an OpenAI-shaped error body naming the wait."""
    wait = retry_after_s(since_wake_s, total_s=total_s, floor_s=floor_s)
    body = {
        "error": {
            "message": (
                f"no replica is ready: one is starting (a TPU node and a warm boot, about "
                f"{total_s} s from the first request, about "
                f"{remaining_s(since_wake_s, total_s=total_s)} s left); retry after {wait} s"
            ),
            "type": "service_unavailable",
            "param": None,
            "code": "scaled_to_zero",
        }
    }
    headers = {"Retry-After": str(wait), "Content-Type": "application/json"}
    return 503, headers, json.dumps(body).encode("utf-8")


class Wake:
    """The wake's state: when it began, and whether it is still pending."""

    def __init__(self, *, total_s: int, floor_s: int, clock: Callable[[], float]) -> None:
        self.total_s, self.floor_s, self.clock = total_s, floor_s, clock
        self.began: float | None = None
        self.last: float | None = None
        self.lock = threading.Lock()

    def request(self) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            now = self.clock()
            # A wake that ran its course without a replica answering starts again.
            if self.began is None or not self._pending(now):
                self.began = now
            self.last = now
            since = now - self.began
        return waking_response(since, total_s=self.total_s, floor_s=self.floor_s)

    def _pending(self, now: float) -> bool:
        return self.last is not None and now - self.last < self.total_s

    def metrics(self) -> bytes:
        with self.lock:
            value = 1 if self._pending(self.clock()) else 0
        return (
            f"# HELP {METRIC} 1 while a request waits for a replica to start\n"
            f"# TYPE {METRIC} gauge\n{METRIC} {value}\n"
        ).encode()


def api_ready_replicas(namespace: str, deployment: str, token_dir: str = TOKEN_DIR) -> int:
    """status.readyReplicas of the Deployment, read with the pod's token (CA checked)."""
    token = Path(token_dir, "token").read_text(encoding="utf-8").strip()
    context = ssl.create_default_context(cafile=str(Path(token_dir, "ca.crt")))
    # An https URL built from the constant above: never a file: or custom scheme.
    request = urllib.request.Request(  # noqa: S310
        f"{API}/apis/apps/v1/namespaces/{namespace}/deployments/{deployment}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=5, context=context) as response:  # noqa: S310
        status = json.load(response).get("status") or {}
    return int(status.get("readyReplicas") or 0)


def make_handler(wake: Wake, ready: Callable[[], int]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, {"Content-Type": "text/plain; version=0.0.4"}, wake.metrics())
            elif path == "/health":
                try:
                    up = ready()
                except (OSError, ValueError) as exc:
                    print(f"wake: replica status unreadable ({exc}); staying ready", flush=True)
                    up = 0
                self._send(503 if up else 200, {"Content-Type": "text/plain"}, b"")
            else:
                self._send(*wake.request())

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def main(argv: list[str]) -> int:
    """wake.py PORT NAMESPACE DEPLOYMENT TOTAL_S FLOOR_S [GATE_FILE]"""
    port, namespace, deployment, total, floor = argv[:5]
    wake = Wake(total_s=int(total), floor_s=int(floor), clock=time.monotonic)
    handler = make_handler(wake, lambda: api_ready_replicas(namespace, deployment))
    server = ThreadingHTTPServer(("127.0.0.1", int(port)), handler)
    if len(argv) > 5:
        # The front door starts once this gate exists (tpudeploy.gke.cache.frontdoor_command).
        Path(argv[5]).write_text("wake\n", encoding="utf-8")
    print(f"wake: answering on 127.0.0.1:{port} for {namespace}/{deployment}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
