"""The GKE pod's front door for real: its init script (templates/pod_frontdoor.sh.j2) run under
sh on an API key file, then Debian's nginx on the files it wrote, in front of a fake vLLM.

Only listen lines change (127.0.0.1 and free ports), so nothing is reachable off this machine.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.boot_sandbox import key_map_entries
from tests.conftest import REPO_ROOT
from tests.gke.pod_door import BUNDLE, KEY, ROUTED, PodDoor
from tests.gke.pod_door import prep as _prep
from tests.render.test_proxy import NGINX, PATHS, FakeVllm
from tpudeploy import facts, render, tlscert
from tpudeploy.config import parse_config
from tpudeploy.gke import pod

pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed; CI runs these")


@dataclass
class Door(PodDoor):
    """The front door running in front of a fake vLLM."""

    vllm: FakeVllm


@pytest.fixture(scope="module")
def door(pod_door: Callable[[int], PodDoor]) -> Iterator[Door]:
    with FakeVllm() as vllm:
        running = pod_door(vllm.port)
        yield Door(**vars(running), vllm=vllm)


def _get(door: Door, path: str, *, tls: bool, key: str | None = None) -> int:
    if tls:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", door.tls_port, context=door.context, timeout=10
        )
    else:
        conn = http.client.HTTPConnection("127.0.0.1", door.metrics_port, timeout=10)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    conn.request("GET", path, headers=headers)
    status = conn.getresponse().status
    conn.close()
    return status


def test_the_key_file_becomes_a_digest_and_never_a_copy(door: Door) -> None:
    for path in door.out.iterdir():
        assert KEY[:12] not in path.read_text(errors="replace"), path.name
    # The key map's line (tpudeploy/node/keymap.py): the key's 11-character id, the client the
    # single key secret belongs to, the digest.
    assert key_map_entries((door.out / "api_keys.conf").read_text()) == [_digest_line(KEY)]
    assert re.fullmatch(r'"k{11}" "default [A-Za-z0-9_-]{22}";\n', _digest_line(KEY))


def test_metrics_listener_serves_vllm_metrics_and_nothing_else(door: Door) -> None:
    before = len(door.vllm.paths())
    assert _get(door, "/metrics", tls=False) == 200
    assert door.vllm.paths()[before:] == ["/metrics"]
    for path in ("/v1/models", "/invocations", "/tokenize", "/metrics/../v1/models", "/"):
        assert _get(door, path, tls=False) == 404, path
    # dot segments resolve before matching: /health/../metrics is /metrics, and only that goes on
    assert _get(door, "/health/../metrics", tls=False) == 200
    assert door.vllm.paths()[before:] == ["/metrics", "/metrics"]


def _worker_fds(prefix: Path) -> list[str]:
    """The link targets of every descriptor nginx's workers hold open."""
    master = int((prefix / "nginx.pid").read_text())
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) != master:
                continue
            out += [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:
            continue
    return out


def _held_body_bytes(prefix: Path) -> int:
    """What nginx holds of request bodies in temp files under its -p prefix (the pod's /tmp).
    nginx unlinks a body's temp file as soon as it opens it, so the bytes are found through
    its workers' open descriptors, as the memory-backed volume counts them."""
    master = int((prefix / "nginx.pid").read_text())
    temp = str(prefix / "client_body_temp")
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) != master:
                continue
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd).startswith(temp):
                    total += fd.stat().st_size
        except OSError:
            continue
    return total


def test_the_metrics_port_buffers_no_request_body(door: Door) -> None:
    """Issue 36: the metrics listener took a body of up to client_max_body_size (64m) with no
    key and buffered it in the pod's memory-backed /tmp until the client finished or the body
    timeout ended it: four held connections kept 252 MB under a 256Mi limit. Like /health, the
    metrics port now takes GET only and no body, refused at the header, before a byte is read."""
    chunk, sent = b"x" * 65536, 4 * 1024 * 1024
    held = []
    before = len(door.vllm.requests)
    try:
        for path in ("/metrics", "/metrics", "/", "/v1/models"):
            s = socket.create_connection(("127.0.0.1", door.metrics_port), timeout=10)
            held.append(s)
            s.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {2 * sent}\r\n\r\n".encode()
            )
            try:
                for _ in range(sent // len(chunk)):
                    s.sendall(chunk)
            except OSError:
                pass  # refused and closed before the body: what the fix does
        time.sleep(0.5)
        assert _held_body_bytes(door.prefix) == 0
        for s in held:
            s.settimeout(5)
            try:
                head = s.recv(64)
            except OSError:
                head = b""
            assert head[:12] in (b"HTTP/1.1 413", b"HTTP/1.1 405", b"HTTP/1.1 403", b""), head
    finally:
        for s in held:
            s.close()
    # Any other method is refused even without a body; GET still serves the scrape.
    conn = http.client.HTTPConnection("127.0.0.1", door.metrics_port, timeout=10)
    conn.request("POST", "/metrics")
    assert conn.getresponse().status == 403
    conn.close()
    assert len(door.vllm.requests) == before
    assert _get(door, "/metrics", tls=False) == 200


def test_the_api_still_needs_the_key_on_the_tls_port(door: Door) -> None:
    assert _get(door, "/v1/models", tls=True) == 401
    assert _get(door, "/v1/models", tls=True, key=KEY) == 200
    assert _get(door, "/health", tls=True) == 200
    assert _get(door, "/metrics", tls=True) == 401


def test_an_empty_key_file_stops_the_pod_with_the_fix(tmp_path: Path) -> None:
    result, out = _prep(tmp_path, "", 8000)
    assert result.returncode != 0
    assert "make api-key" in result.stderr
    assert not (out / "api_keys.conf").exists()


@pytest.mark.parametrize(
    "key",
    ["abc", "k" * 42, "k" * 44, "k" * 42 + "+", "k" * 20 + " " + "k" * 22, f"{'k' * 43}\nextra"],
    ids=["abc", "short", "long", "plus", "space", "two-lines"],
)
def test_a_key_not_shaped_like_make_api_keys_stops_the_pod(tmp_path: Path, key: str) -> None:
    """Issue 36: the pod served any non-empty key ("abc" was), where the TPU VM's boot refuses
    one not shaped like `make api-key`'s (secretshape.API_KEY_ERE, 43 URL-safe characters): the
    digest comparison is safe only for a key that random. The same format, the same fix."""
    result, out = _prep(tmp_path, key, 8000)
    assert result.returncode != 0
    assert "make api-key" in result.stderr and "43" in result.stderr
    assert key not in result.stderr
    assert not (out / "api_keys.conf").exists()


def _digest_line(key: str) -> str:
    import base64

    digest = base64.urlsafe_b64encode(hashlib.md5(f"Bearer {key}".encode()).digest())  # noqa: S324
    return f'"{key[:11]}" "default {digest.decode().rstrip("=")}";\n'


def _reload(door: Door) -> None:
    assert NGINX is not None
    conf = door.out / "nginx.loopback.conf"
    subprocess.run(
        [NGINX, "-p", f"{door.prefix}/", "-c", str(conf), "-e", "stderr", "-s", "reload"],
        check=True,
        capture_output=True,
        timeout=30,
    )


def test_nginx_refuses_a_key_of_another_shape_even_with_its_digest(door: Door) -> None:
    """The shared key check (templates/frontdoor_key_check.conf.j2, both platforms) admits a
    header only if it is shaped like `make api-key`'s key as well as matching the digest: with
    the id and digest of a 42-character key plus "+" stored (as if the init check were
    bypassed), that header is refused, and so is "Bearer abc"."""
    conf = door.out / "api_keys.conf"
    stored = conf.read_text()
    conf.chmod(0o644)
    misshapen = "k" * 42 + "+"
    try:
        conf.write_text(_digest_line(misshapen))
        _reload(door)
        deadline = time.monotonic() + 10
        while _pool(door, "GET", "/v1/models", f"Bearer {KEY}")[0] != 401:
            assert time.monotonic() < deadline, "the reload did not take"
            time.sleep(0.1)
        assert _pool(door, "GET", "/v1/models", f"Bearer {misshapen}")[0] == 401
        assert _get(door, "/v1/models", tls=True, key=misshapen) == 401
        assert _pool(door, "GET", "/v1/models", "Bearer abc")[0] == 401
    finally:
        conf.write_text(stored)
        _reload(door)
        deadline = time.monotonic() + 10
        while _pool(door, "GET", "/v1/models", f"Bearer {KEY}")[0] != 200:
            assert time.monotonic() < deadline, "the reload back did not take"
            time.sleep(0.1)


def test_a_key_with_a_trailing_newline_is_the_key_as_on_the_tpu_vm(tmp_path: Path) -> None:
    """The VM reads the version through $(...), which drops trailing newlines: so does the pod,
    and the digest is of "Bearer <key>" alone."""
    result, out = _prep(tmp_path, KEY + "\n", 8000)
    assert result.returncode == 0, result.stderr
    assert key_map_entries((out / "api_keys.conf").read_text()) == [_digest_line(KEY)]


def test_every_replica_serves_the_one_stored_certificate(door: Door, tmp_path: Path) -> None:
    """Issue 25: each pod made its own self-signed certificate, so a client pinning one
    fingerprint was refused by every other replica behind the load balancer. Now two replicas'
    init containers write the certificate of the secret's bundle, byte for byte."""
    second, out2 = _prep(tmp_path, KEY, 8000)
    assert second.returncode == 0, second.stderr
    assert (door.out / "tls.crt").read_text() == BUNDLE.cert_pem
    assert (out2 / "tls.crt").read_text() == BUNDLE.cert_pem
    assert (out2 / "tls.key").read_text() == BUNDLE.key_pem
    assert (out2 / "tls.key").stat().st_mode & 0o777 == 0o440
    # nginx serves it: the running front door's certificate is the stored one's fingerprint.
    conn = http.client.HTTPSConnection("127.0.0.1", door.tls_port, context=door.context)
    conn.connect()
    assert conn.sock is not None
    served = conn.sock.getpeercert(binary_form=True) or b""
    conn.close()
    assert hashlib.sha256(served).hexdigest() == tlscert.fingerprints(BUNDLE.cert_pem)["sha256"]


@pytest.mark.parametrize(
    "bundle",
    ["", BUNDLE.cert_pem, BUNDLE.text + BUNDLE.cert_pem],
    ids=["empty", "no-key", "two-certificates"],
)
def test_a_missing_or_malformed_certificate_stops_the_pod_with_the_fix(
    tmp_path: Path, bundle: str
) -> None:
    result, out = _prep(tmp_path, KEY, 8000, bundle=bundle)
    assert result.returncode != 0
    assert "make tls-cert" in result.stderr
    assert BUNDLE.key_pem not in result.stderr
    assert not (out / "tls.key").exists() or not (out / "tls.key").read_text()


def _local_nginx_version() -> str:
    assert NGINX is not None
    said = subprocess.run([NGINX, "-v"], capture_output=True, text=True, check=True).stderr
    match = re.search(r"nginx/(\d+\.\d+\.\d+)", said)
    assert match, said
    return match[1]


def test_the_front_door_refuses_an_nginx_that_is_not_the_pinned_version(tmp_path: Path) -> None:
    """Issue 36: the pod never checked which nginx its image runs, where the TPU VM's boot
    does (templates/startup.sh.j2 check_proxy_version): a retagged image would put an unvetted
    TLS front door in the pod. Under sh with the real nginx on PATH: the pinned version starts
    what follows, any other stops the container with both versions and the fix."""
    assert NGINX is not None
    local = _local_nginx_version()
    env = {"PATH": f"{Path(NGINX).parent}:/usr/bin:/bin"}
    then = ["/bin/sh", "-c", "echo started"]
    same = parse_config({**ROUTED, "proxy": {"image": f"nginx:{local}"}})
    ok = subprocess.run(
        pod.nginx_version_checked(same, then), capture_output=True, text=True, env=env, timeout=30
    )
    assert (ok.returncode, ok.stdout) == (0, "started\n"), ok.stderr
    other = "1.30.4" if local != "1.30.4" else "1.29.8"
    pinned = parse_config({**ROUTED, "proxy": {"image": f"nginx:{other}"}})
    bad = subprocess.run(
        pod.nginx_version_checked(pinned, then), capture_output=True, text=True, env=env, timeout=30
    )
    assert bad.returncode != 0 and bad.stdout == ""
    assert f"nginx/{local}" in bad.stderr and f"not nginx/{other}" in bad.stderr
    assert "[proxy] image" in bad.stderr
    missing = subprocess.run(
        pod.nginx_version_checked(pinned, then),
        capture_output=True,
        text=True,
        env={"PATH": str(tmp_path)},
        timeout=30,
    )
    assert missing.returncode != 0 and "could not run nginx -v" in missing.stderr


# ---- the InferencePool's plain listener ([routing] gateway) ------------------------------------


def _pool(
    door: Door,
    method: str,
    path: str,
    key: str | None = None,
    body: object = None,
    source: str = "127.0.0.1",
) -> tuple[int, bytes]:
    """One plain-HTTP request to the pool port from SOURCE, the path sent exactly as given."""
    conn = http.client.HTTPConnection(
        "127.0.0.1", door.pool_port, timeout=10, source_address=(source, 0)
    )
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = key
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("key", [None, "", f"Bearer {KEY[:-1]}x", f"bearer {KEY}", KEY], ids=str)
def test_the_pool_port_refuses_every_path_without_the_key_and_forwards_nothing(
    door: Door, key: str | None
) -> None:
    """Issue 26: the InferencePool reaches each replica over plain HTTP, and whatever the
    picker chooses, the key is checked there as on the TLS port (the same paths as the node's
    front door, tests/render/test_proxy.py)."""
    before = len(door.vllm.requests)
    for method, path in PATHS:
        status, body = _pool(door, method, path, key, {} if method == "POST" else None)
        assert status == 401, (method, path, status)
        assert json.loads(body) == {"error": "missing or wrong API key"}
    assert len(door.vllm.requests) == before


def test_the_pool_port_forwards_v1_with_the_key_and_strips_it(door: Door) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    status, raw = _pool(door, "POST", "/v1/chat/completions", f"Bearer {KEY}", body)
    assert status == 200 and json.loads(raw)["choices"][0]["message"]["content"]
    forwarded = door.vllm.requests[-1]
    assert forwarded["path"] == "/v1/chat/completions" and forwarded["body"] == body
    assert "authorization" not in forwarded["headers"]
    before = len(door.vllm.requests)
    for path in ("/metrics", "/invocations", "/v1/../metrics", "/v1/%2e%2e/metrics", "//metrics"):
        assert _pool(door, "GET", path, f"Bearer {KEY}")[0] == 404, path
    assert len(door.vllm.requests) == before


def test_the_load_balancers_health_check_reaches_vllms_health_only(door: Door) -> None:
    """The HealthCheckPolicy's /health on the pool port: open, bodiless, vLLM's own."""
    status, raw = _pool(door, "GET", "/health")
    assert status == 200 and json.loads(raw) == {"served": "/health"}
    assert door.vllm.paths()[-1] == "/health"
    before = len(door.vllm.requests)
    assert _pool(door, "POST", "/health", None, {"prompt": "x"})[0] == 413
    assert _pool(door, "POST", "/health")[0] == 403
    assert len(door.vllm.requests) == before
    assert _pool(door, "GET", "/health", f"Bearer {KEY}")[0] == 200
    assert "authorization" not in door.vllm.requests[-1]["headers"]


def test_the_pool_port_and_the_tls_port_share_one_count_per_address(door: Door) -> None:
    """Issue 22's count holds on the new ports too, in the same zone: an address's connections
    to the TLS, pool and metrics ports add up (the metrics listener had no count at all, so a
    half-sent header there could fill the worker the API shares). The pool port's allowance is
    the planner's (a few load balancer proxies carry every stream a replica gets); the TLS and
    metrics ports keep their own."""
    tls_allowance = render.PROXY_CONNECTIONS_PER_ADDRESS
    pool_allowance = pod.pool_connections_per_address(parse_config(ROUTED))
    assert pool_allowance > tls_allowance  # this config's [load] plans more streams
    held: list[socket.socket] = []

    def refused(port: int) -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as extra:
            extra.settimeout(2)
            try:
                return extra.recv(1) == b""  # closed at once, without a byte
            except TimeoutError:
                return False  # held open: admitted, waiting for its header

    try:
        for _ in range(tls_allowance):
            held.append(socket.create_connection(("127.0.0.1", door.pool_port), timeout=5))
        # nginx counts a connection when it accepts it, in order on one port: an answer on one
        # more pool connection means every one before it is counted (the kernel's handshake
        # alone says nothing about the other ports' count).
        sync = socket.create_connection(("127.0.0.1", door.pool_port), timeout=5)
        held.append(sync)
        sync.sendall(b"GET /health/x HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sync.recv(12).startswith(b"HTTP/1.1 ")
        assert refused(door.tls_port)  # the TLS port's share is used up by the pool port's
        assert refused(door.metrics_port)  # and the metrics port's: one count for all three
        while len(held) < pool_allowance:
            held.append(socket.create_connection(("127.0.0.1", door.pool_port), timeout=5))
        assert refused(door.pool_port)
        # Another address (the loopback range: 127.0.0.2 is this host) still gets in.
        assert _pool(door, "GET", "/v1/models", f"Bearer {KEY}", source="127.0.0.2")[0] == 200
    finally:
        for s in held:
            s.close()


# What one unauthenticated connection holds of the worker: its own, and both ends of the relay's
# hop to the listener behind it; the upstream to vLLM opens only after a keyed header.
UNKEYED_CONNECTIONS = 3


def addresses_to_fill(allowance: int) -> int:
    """How many client addresses, each holding `allowance` half-sent headers, fill the worker."""
    return math.ceil(render.PROXY_WORKER_CONNECTIONS / (UNKEYED_CONNECTIONS * allowance))


def test_an_unkeyed_connection_holds_three_of_the_workers(door: Door) -> None:
    """Measured on the real nginx: each half-sent header held on the pool port adds three
    sockets to the worker, never a fourth (no upstream to vLLM without the key). So filling the
    8,192-connection worker takes ceil(8192 / (3 x allowance)) addresses: 22 at the TLS port's
    128 (docs/security.md said about 16, counting a fourth), 9 at the pool port's 306 for short
    agent turns (the issue's figure), 3 at the ceiling; docs/security.md says so."""

    def settled_sockets() -> int:
        """The worker's socket count once it stops moving (earlier tests' connections close)."""
        last, same, deadline = -1, 0, time.monotonic() + 15
        while same < 3 and time.monotonic() < deadline:
            now = sum(1 for f in _worker_fds(door.prefix) if f.startswith("socket:"))
            same = same + 1 if now == last else 0
            last = now
            time.sleep(0.2)
        return last

    before = settled_sockets()
    held = []
    try:
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", door.pool_port), timeout=5)
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")  # never finished
            held.append(s)
        grown = settled_sockets() - before
        # Three each, not four: 120 against 160.
        assert abs(grown - 40 * UNKEYED_CONNECTIONS) <= 3, grown
    finally:
        for s in held:
            s.close()
    pool = pod.pool_connections_per_address(parse_config(ROUTED))
    figures = {
        addresses_to_fill(render.PROXY_CONNECTIONS_PER_ADDRESS): "22",
        addresses_to_fill(pool): "9",
        addresses_to_fill(render.PROXY_WORKER_CONNECTIONS // 8): "3",
    }
    assert list(figures.values()) == [str(k) for k in figures]
    docs = " ".join((REPO_ROOT / "docs" / "security.md").read_text(encoding="utf-8").split())
    assert "takes 22 addresses" in docs and "about 16 addresses" not in docs
    assert f"allowance ({pool} for short agent turns) it takes 9" in docs


@pytest.mark.xfail(
    strict=True,
    reason="UNFINISHED: nginx:1.30.4 is pinned by tag. Public files found offline pin three "
    "different digests for it (5cf90903deda..., 09cc2702709e..., d5792f71a949...; the tag is "
    "rebuilt on new Debian bases), and which is the current multi-arch index cannot be told "
    "without the registry; set facts.PROXY_IMAGE to nginx:1.30.4@sha256:<`crane digest "
    "nginx:1.30.4`>",
)
def test_the_front_door_image_is_pinned_by_digest() -> None:
    assert "@sha256:" in facts.PROXY_IMAGE
    assert "@sha256:" in parse_config({"platform": "gke"}).proxy.image


def test_the_pool_allowance_follows_the_planner_within_the_worker() -> None:
    tls = render.PROXY_CONNECTIONS_PER_ADDRESS
    ceiling = render.PROXY_WORKER_CONNECTIONS // 8
    default = parse_config({**ROUTED, "load": {}})  # 32,768 tokens: few streams per replica
    assert pod.pool_connections_per_address(default) == tls
    tiny = parse_config({**ROUTED, "load": {"expected_context": 128}})
    assert pod.pool_connections_per_address(tiny) == ceiling
    text = pod.scripts(parse_config(ROUTED))[pod.NGINX_CONF]
    assert f"limit_conn per_address {pod.pool_connections_per_address(parse_config(ROUTED))};" in (
        text
    )
    assert f"limit_conn per_address {tls};" in text


def test_without_routing_the_front_door_has_no_pool_listener() -> None:
    cfg = parse_config({"platform": "gke"})
    text = pod.scripts(cfg)[pod.NGINX_CONF]
    assert f"listen {pod.POOL_PORT};" not in text and render.PROXY_POOL_SOCKET not in text
    routed = pod.scripts(parse_config(ROUTED))[pod.NGINX_CONF]
    assert f"listen {pod.POOL_PORT};" in routed
