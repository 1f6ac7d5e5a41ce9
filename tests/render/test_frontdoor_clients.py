"""Many clients at the front door, for real (issue 37): Debian's nginx runs the rendered config of
both platforms (the TPU VM's nginx.conf, the GKE pod's ConfigMap) with a key map written by
tpudeploy/node/keymap.py, in front of a streaming fake vLLM on loopback.

Four configured clients and two that are not: planner (rotated, both keys inside the overlap),
coder, ci (one stream), batch (three requests a minute); reviewer was removed (its key is in no
map) and ghost is in the map but not in the config. Each gets its documented status, and one
client's limit never touches another's.
"""

from __future__ import annotations

import datetime
import http.client
import http.server
import json
import re
import secrets
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.gke.pod_door import ROUTED, loopback_pod_ports
from tests.render.test_proxy import NGINX, start_nginx, stop_nginx
from tpudeploy import frontdoor_log, render, tlscert, usage
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import pod
from tpudeploy.node import keymap

pytestmark = pytest.mark.skipif(
    NGINX is None or not Path(render.PROXY_NJS_MODULE).exists(),
    reason="nginx or its njs module is not installed; CI runs these (.ci/system-packages)",
)

LIMITS = {
    "planner": {"streams": 4, "requests_per_minute": 600},
    "coder": {"streams": 4, "requests_per_minute": 600},
    "ci": {"streams": 1, "requests_per_minute": 600},
    "batch-jobs": {"streams": 2, "requests_per_minute": 3},
}
CONFIG = {
    "project": "test-proj",
    "access": {"clients": list(LIMITS), "limits": LIMITS},
}
# The pod with all its listeners (TLS, metrics, the InferencePool's), as tests/gke runs it.
GKE_CONFIG = {**ROUTED, **CONFIG}
BUNDLE = tlscert.make_bundle("clients")
# What the fake vLLM puts in a completion's text: JSON of a usage object, which a counter that
# read the text instead of the response's own key would take for the real one.
DECOY = '{"usage": {"prompt_tokens": 999, "completion_tokens": 999}} caf\u00e9'


class StreamingVllm(http.server.ThreadingHTTPServer):
    """vLLM's OpenAI server as the front door sees it: chat completions whole or streamed
    (server-sent events; with stream_options.include_usage, a last event with `usage`). The
    body's `events` and `delay` say how many content events and how far apart. Usage is
    counted as vLLM does: the prompt's words stand for its tokens, each event for one."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.finished: list[int] = []  # events fully written, per finished stream
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StreamingVllm

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._json({"object": "list", "data": [{"id": "m"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.bodies.append(body)
        prompt = " ".join(m["content"] for m in body.get("messages", []))
        events, delay = int(body.get("events", 3)), float(body.get("delay", 0))
        usage = {
            "prompt_tokens": len(prompt.split()),
            "total_tokens": len(prompt.split()) + events,
            "completion_tokens": events,
            "prompt_tokens_details": None,
        }
        if not body.get("stream"):
            self._json({"choices": [{"message": {"content": DECOY * events}}], "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        include = body.get("stream_options", {}).get("include_usage")
        for i in range(events):
            chunk: dict[str, Any] = {"choices": [{"delta": {"content": f"{i} {DECOY}"}}]}
            if include:
                chunk["usage"] = None
            raw = f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()
            # Cut inside the two bytes of the "é": nginx gets them in two reads.
            cut = raw.index("é".encode()) + 1
            self._chunk(raw[:cut])
            time.sleep(0.02)
            self._chunk(raw[cut:])
            time.sleep(delay)
        if include:
            self._chunk(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.server.finished.append(events)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _json(self, obj: Any) -> None:
        out = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def _key() -> str:
    return secrets.token_urlsafe(32)


@dataclass
class Door:
    platform: str
    cfg: DeployConfig
    vllm: StreamingVllm
    port: int
    context: ssl.SSLContext
    conf: Path  # the nginx.conf nginx runs (loopback ports)
    prefix: Path
    log: Path
    keys: dict[str, str] = field(default_factory=dict)
    # Requests answered through request(): each gets one access-log line.
    answered: int = 0

    def request(
        self, key: str | None, body: Any = None, path: str = "/v1/chat/completions"
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=30)
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        try:
            conn.request(
                "POST" if body is not None else "GET",
                path,
                None if body is None else json.dumps(body),
                headers,
            )
            response = conn.getresponse()
            answer = response.status, dict(response.getheaders()), response.read()
            self.answered += 1
            return answer
        finally:
            conn.close()

    def log_lines(self) -> list[dict[str, object]]:
        """Every line so far, once there is one per answered request: nginx writes a request's
        line after its last byte is sent, so the client can read the answer first."""
        deadline = time.monotonic() + 10
        while True:
            lines = self.log.read_text().splitlines()
            if len(lines) >= self.answered or time.monotonic() > deadline:
                return [frontdoor_log.parse_line(line) for line in lines]
            time.sleep(0.02)

    def reload(self) -> None:
        """What the key poller does when the map changes: `nginx -s reload`, not a restart."""
        assert NGINX is not None
        subprocess.run(
            [NGINX, "-p", f"{self.prefix}/", "-c", str(self.conf), "-e", "stderr", "-s", "reload"],
            check=True,
            capture_output=True,
            timeout=30,
        )


def _chat(words: str = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": words}], **extra}


def _write_keys(conf_dir: Path, keys: dict[str, str], now: datetime.datetime) -> None:
    """The map as the node's poller writes it: planner rotated (its old key until an hour from
    now), ghost's key although ghost is no configured client; reviewer's key nowhere."""
    payloads = {
        "planner": f"{keys['planner']}\n{keys['planner-old']} "
        f"{(now + datetime.timedelta(hours=1)).strftime(keymap.UNTIL_FORMAT)}\n",
        "coder": keys["coder"],
        "ci": keys["ci"],
        "batch-jobs": keys["batch-jobs"],
        "ghost": keys["ghost"],
    }
    path = conf_dir / "api_keys.conf"
    path.unlink(missing_ok=True)
    keymap.write_if_changed(str(path), keymap.render(payloads, now))


def _tpuvm_conf(cfg: DeployConfig, root: Path, sockets: Path) -> Path:
    (root / "nginx.conf").write_text(render.render_proxy_config(cfg))
    (root / render.PROXY_USAGE_JS).write_text(render.usage_js_source())
    return root / "nginx.conf"


def _gke_conf(cfg: DeployConfig, root: Path, sockets: Path) -> Path:
    """The pod's nginx.conf from its ConfigMap, the usage counter where the ConfigMap is
    mounted (here root), the metrics and pool listeners moved to free loopback ports."""
    files = pod.scripts(cfg)
    (root / pod.USAGE_JS).write_text(files[pod.USAGE_JS])
    text = files[pod.NGINX_CONF].replace(pod.SCRIPTS_DIR, str(root))
    text, _, _ = loopback_pod_ports(text, lambda path: sockets / Path(path).name)
    (root / "nginx.conf").write_text(text)
    return root / "nginx.conf"


@pytest.fixture(scope="module", params=["tpuvm", "gke"])
def door(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Door]:
    platform = request.param
    root = tmp_path_factory.mktemp(f"clients-{platform}")
    vllm = StreamingVllm()
    cfg = parse_config(
        {**(GKE_CONFIG if platform == "gke" else CONFIG), "vllm": {"port": vllm.port}}
    )
    sockets = Path(tempfile.mkdtemp(prefix="clients-"))
    sockets.chmod(0o711)
    conf = (_gke_conf if platform == "gke" else _tpuvm_conf)(cfg, root, sockets)
    (root / "tls.crt").write_text(BUNDLE.cert_pem)
    (root / "tls.key").write_text(BUNDLE.key_pem)
    keys = {
        name: _key()
        for name in ("planner", "planner-old", "coder", "ci", "batch-jobs", "ghost", "reviewer")
    }
    _write_keys(root, keys, datetime.datetime.now(datetime.UTC))
    # The access log to a file the test reads (the product writes it to stdout).
    text = conf.read_text()
    assert text.count("access_log /dev/stdout usage;") == 1
    log = root / "access.log"
    conf.write_text(text.replace("access_log /dev/stdout usage;", f"access_log {log} usage;"))
    proc, port = start_nginx(conf, root / "prefix", sockets)
    prefix = next(p for p in (root / "prefix").iterdir() if (p / "nginx.pid").exists())
    context = ssl.create_default_context(cafile=str(root / "tls.crt"))
    context.check_hostname = False
    try:
        yield Door(
            platform, cfg, vllm, port, context, root / "nginx.loopback.conf", prefix, log, keys
        )
    finally:
        stop_nginx(proc)
        vllm.shutdown()
        shutil.rmtree(sockets, ignore_errors=True)


def test_each_key_is_served_as_its_client_and_only_a_configured_one(door: Door) -> None:
    """Rotated inside its overlap, both of planner's keys work; reviewer (revoked: in no map)
    and ghost (in the map, not in [access] clients) get 401, as does a key that shares a served
    key's id but not the rest of it."""
    k = door.keys
    for key in (k["planner"], k["planner-old"], k["coder"]):
        status, _, body = door.request(key, _chat())
        assert status == 200 and json.loads(body)["choices"], key[:4]
    forged = k["coder"][:11] + _key()[11:]
    before = len(door.vllm.bodies)
    refused: tuple[str | None, ...] = (k["reviewer"], k["ghost"], forged, None)
    for denied in refused:
        status, _, body = door.request(denied, _chat())
        assert (status, json.loads(body)) == (401, {"error": "missing or wrong API key"})
    assert len(door.vllm.bodies) == before
    lines = door.log_lines()[-7:]
    assert [line["client"] for line in lines] == ["planner", "planner", "coder", "-", "-", "-", "-"]


def test_a_client_over_its_stream_cap_gets_429_while_another_is_served(door: Door) -> None:
    """ci may hold one request in flight: a second gets 429 with Retry-After and an OpenAI-shaped
    body naming the limit and the client; planner is served meanwhile; ci again once it ends."""
    out: dict[str, Any] = {}
    slow = threading.Thread(
        target=lambda: out.update(
            r=door.request(door.keys["ci"], _chat(stream=True, events=4, delay=0.4))
        )
    )
    slow.start()
    try:
        deadline = time.monotonic() + 10
        while len(door.vllm.bodies) == 0 or not door.vllm.bodies[-1].get("stream"):
            assert time.monotonic() < deadline, "the stream did not reach vLLM"
            time.sleep(0.02)
        status, headers, body = door.request(door.keys["ci"], _chat())
        assert status == 429, body
        assert headers["Retry-After"] == str(render.PROXY_STREAMS_RETRY_AFTER_S)
        error = json.loads(body)["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["code"] == "streams" and error["type"] == "rate_limit_exceeded"
        assert "client ci " in error["message"] and " 1 requests in flight" in error["message"]
        assert door.request(door.keys["planner"], _chat())[0] == 200
    finally:
        slow.join(timeout=30)
    assert out["r"][0] == 200 and out["r"][2].endswith(b"data: [DONE]\n\n")
    assert door.request(door.keys["ci"], _chat())[0] == 200


def test_make_smoke_and_accept_wait_out_a_429_as_its_retry_after_says(door: Door) -> None:
    """The checks' request path (tpudeploy/smoke.py _request, which make accept shares) is an
    agent over its limit: ci holds its one stream, so the check's request gets 429 with
    Retry-After 1; it waits that long and retries, and is served once the stream has ended."""
    from tpudeploy import smoke
    from tpudeploy.endpoint import Endpoint

    endpoint = Endpoint(
        f"https://127.0.0.1:{door.port}", tlscert.fingerprints(BUNDLE.cert_pem)["sha256"]
    )
    slow = threading.Thread(
        target=lambda: door.request(door.keys["ci"], _chat(stream=True, events=4, delay=0.4))
    )
    slow.start()
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    try:
        deadline = time.monotonic() + 10
        while len(door.vllm.bodies) == 0 or not door.vllm.bodies[-1].get("stream"):
            assert time.monotonic() < deadline, "the stream did not reach vLLM"
            time.sleep(0.02)
        status, body, _ = smoke._request(
            endpoint,
            "POST",
            "/v1/chat/completions",
            _chat(),
            door.keys["ci"],
            sleep=sleep,
        )
    finally:
        slow.join(timeout=30)
    assert status == 200, body
    assert waits and set(waits) == {render.PROXY_STREAMS_RETRY_AFTER_S}


def test_a_client_over_its_rate_gets_429_with_its_retry_after(door: Door) -> None:
    """batch-jobs starts three requests a minute, two at once (burst = its streams): the fourth in a
    row is refused with Retry-After 20 (nginx's leaky bucket admits one every 60/3 s); coder is
    not."""
    statuses = [door.request(door.keys["batch-jobs"], _chat()) for _ in range(4)]
    assert [s for s, _, _ in statuses[:3]] == [200, 200, 200]
    status, headers, body = statuses[3]
    assert status == 429 and headers["Retry-After"] == "20"
    error = json.loads(body)["error"]
    assert error["code"] == "requests_per_minute"
    assert "client batch-jobs " in error["message"] and "3 requests per minute" in error["message"]
    assert door.request(door.keys["coder"], _chat())[0] == 200
    assert [line["status"] for line in door.log_lines()[-5:]] == [200, 200, 200, 429, 200]


def test_each_line_counts_the_tokens_the_response_reports_and_holds_no_secret(
    door: Door,
) -> None:
    """Non-streamed: the body's usage. Streamed with include_usage: the last event's. Streamed
    without: no counts (null), the request still counted by duration and bytes. The decoy in the
    completion's text (a usage object, and a character cut between two reads) changes nothing."""
    k = door.keys["coder"]
    whole = door.request(k, _chat("one two three four five", events=2))
    streamed = door.request(
        k, _chat("one two three", stream=True, events=3, stream_options={"include_usage": True})
    )
    bare = door.request(k, _chat("one two", stream=True, events=2))
    assert [r[0] for r in (whole, streamed, bare)] == [200, 200, 200]
    # The client got vLLM's bytes unchanged, the split character whole.
    assert streamed[2].count("caf\u00e9".encode()) == 3
    assert json.loads(whole[2])["choices"][0]["message"]["content"] == DECOY * 2
    lines = door.log_lines()[-3:]
    counts = [(line["prompt_tokens"], line["completion_tokens"]) for line in lines]
    assert counts == [(5, 2), (3, 3), (None, None)]
    for line in lines:
        assert line["client"] == "coder" and line["method"] == "POST"
        assert line["path"] == "/v1/chat/completions"
        assert (
            isinstance(line["request_time"], float) and line["upstream_response_time"] is not None
        )
        assert int(line["bytes_received"]) > 0 and int(line["bytes_sent"]) > 0  # type: ignore[call-overload]
    text = door.log.read_text()
    for key in door.keys.values():
        assert key[:11] not in text
    for secret in ("Authorization", "Bearer", "one two", "caf", "usage"):
        assert secret not in text, secret
    # `make usage` reads what nginx really wrote: the three requests above, 2 + 3 output tokens
    # from the two that carried usage (tpudeploy/usage.py).
    now = datetime.datetime.now(datetime.UTC)
    since = now - datetime.timedelta(hours=1)
    replica = usage.ReplicaLog("door", since, text.splitlines()[-3:], 1)
    (coder,) = usage.tally([replica], since=since, now=now, rate=1.0).clients
    assert (coder.client, coder.requests, coder.output_tokens, coder.with_usage) == (
        "coder",
        3,
        5,
        2,
    )


def test_a_reload_with_a_new_key_map_lets_a_running_stream_finish(door: Door) -> None:
    """The poller's path (a changed api_keys.conf, then `nginx -s reload`): coder's stream
    started on the old key runs to its end; after the reload coder's new key works and the old
    one is refused."""
    old, new = door.keys["coder"], _key()
    out: dict[str, Any] = {}
    slow = threading.Thread(
        target=lambda: out.update(r=door.request(old, _chat(stream=True, events=5, delay=0.4)))
    )
    finished = len(door.vllm.finished)
    slow.start()
    try:
        time.sleep(0.5)
        door.keys["coder"] = new
        _write_keys(door.conf.parent, door.keys, datetime.datetime.now(datetime.UTC))
        door.reload()
        # The old worker stops accepting once the new ones run; until then either may answer.
        deadline = time.monotonic() + 15
        while (door.request(new, _chat())[0], door.request(old, _chat())[0]) != (200, 401):
            assert time.monotonic() < deadline, "the reload did not take"
            time.sleep(0.1)
        assert slow.is_alive(), "the stream ended before the reload was proven"
    finally:
        slow.join(timeout=30)
    status, _, body = out["r"]
    assert status == 200
    assert body.count(b"data: {") == 5 and body.endswith(b"data: [DONE]\n\n")
    # vLLM wrote its last byte (the fake notes it just after the client may have read it).
    deadline = time.monotonic() + 5
    while door.vllm.finished[finished:] != [5]:
        assert time.monotonic() < deadline, door.vllm.finished[finished:]
        time.sleep(0.02)


def test_the_rendered_log_format_is_the_field_list() -> None:
    """The one list (tpudeploy/frontdoor_log.py) is what nginx is told to write, in order."""
    conf = render.render_proxy_config(parse_config(CONFIG))
    (fmt,) = re.findall(r"log_format usage escape=json '([^']*)';", conf)
    names = re.findall(r'"([a-z_]+)":', fmt)
    assert tuple(names) == frontdoor_log.FIELD_NAMES
    for f in frontdoor_log.ACCESS_LOG_FIELDS:
        assert f"{f.variable}" in fmt
    # The count variables are the njs filter's, declared with a null default.
    for f in frontdoor_log.ACCESS_LOG_FIELDS:
        if f.kind == "count":
            assert f"js_var {f.variable} null;" in conf
    assert f"js_import usage from {render.PROXY_USAGE_JS};" in conf
