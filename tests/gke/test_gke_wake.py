"""The wake responder (tpudeploy/gke/wake.py) behind the pod's real front door: Debian's nginx on
the files the pod's init script writes (tests/gke/pod_door.py, as tests/gke/test_gke_frontdoor.py
runs it), with the responder where vLLM would listen. Only listen lines change (127.0.0.1, free
ports)."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer

import pytest

from tests.gke.pod_door import KEY, PodDoor
from tests.render.test_proxy import NGINX
from tpudeploy.gke import wake, zero

pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed; CI runs these")


@dataclass
class Setup:
    tls: int
    metrics: int
    context: ssl.SSLContext
    clock: list[float]
    ready: list[int]


@pytest.fixture(scope="module")
def door(pod_door: Callable[[int], PodDoor]) -> Iterator[Setup]:
    clock, ready = [0.0], [0]
    state = wake.Wake(
        total_s=zero.first_request_s(), floor_s=zero.MIN_RETRY_AFTER_S, clock=lambda: clock[0]
    )
    backend = ThreadingHTTPServer(("127.0.0.1", 0), wake.make_handler(state, lambda: ready[0]))
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    try:
        running = pod_door(backend.server_address[1])
        yield Setup(running.tls_port, running.metrics_port, running.context, clock, ready)
    finally:
        backend.shutdown()


def _call(
    s: Setup, method: str, path: str, *, key: str | None = KEY
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", s.tls, context=s.context, timeout=10)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = b'{"model": "m", "messages": []}' if method == "POST" else None
    if body:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    out = response.status, dict(response.headers), response.read()
    conn.close()
    return out


def _pending(s: Setup) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", s.metrics, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    (line,) = [x for x in text.splitlines() if x.startswith(wake.METRIC + " ")]
    return int(line.split()[1])


def test_the_wake_answers_through_the_front_door_and_is_counted(door: Setup) -> None:
    door.clock[0] = 1000.0
    # Without the key nginx refuses it: nothing reaches the responder, nothing wakes.
    status, _, _ = _call(door, "POST", "/v1/chat/completions", key=None)
    assert status == 401 and _pending(door) == 0
    status, headers, body = _call(door, "POST", "/v1/chat/completions")
    assert status == 503, body
    assert headers["Retry-After"] == "60"
    error = json.loads(body)["error"]
    assert error["code"] == "scaled_to_zero"
    assert f"about {zero.first_request_s()} s left); retry after 60 s" in error["message"]
    assert _pending(door) == 1
    # A retry near the end is told the rest of the timeline, not a whole minute again.
    door.clock[0] += zero.first_request_s() - 30
    _, headers, body = _call(door, "POST", "/v1/chat/completions")
    assert headers["Retry-After"] == "30" and b"about 30 s left" in body
    # No request for a whole timeline: the wake is over, and the HPA's metric says so.
    assert _pending(door) == 1
    door.clock[0] += zero.first_request_s()
    assert _pending(door) == 0


def test_the_responder_is_ready_only_while_no_replica_is(door: Setup) -> None:
    door.ready[0] = 0
    assert _call(door, "GET", "/health", key=None)[0] == 200
    door.ready[0] = 1
    assert _call(door, "GET", "/health", key=None)[0] == 503
    door.ready[0] = 0


def test_an_unreadable_replica_status_keeps_the_honest_503() -> None:
    def broken() -> int:
        raise OSError("connection refused")

    state = wake.Wake(total_s=60, floor_s=15, clock=lambda: 0.0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), wake.make_handler(state, broken))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        server.shutdown()
