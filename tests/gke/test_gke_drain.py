"""A replica's drain on the real nginx: the pod's front door (its init script, its nginx config,
its own nginx command line, its pid file on the pod's /tmp) in front of a streaming fake vLLM,
and the preStop hook run as the kubelet runs it, `sleep` shimmed on PATH so that its waits are
recorded instead of slept. What the budget must fit: GKE's share of spot's 30 s notice.

Only listen lines change (127.0.0.1 and free ports); the pod's /tmp and /etc/tpudeploy-proxy
become two test directories, in the command lines as in the config.
"""

from __future__ import annotations

import http.client
import json
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.gke.pod_door import KEY, loopback_pod_ports
from tests.gke.pod_door import prep as _prep
from tests.render.test_proxy import NGINX, free_port, loopback_config, stop_nginx
from tpudeploy import facts, render
from tpudeploy.config import parse_config
from tpudeploy.gke import pod, routing

pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed; CI runs these")
CFG = parse_config({"platform": "gke"})
# The fake's pace: a chunk every TICK_S until the test releases the stream.
TICK_S = 0.02
FIRST_CHUNKS = 3


class StreamingVllm(ThreadingHTTPServer):
    """vLLM's streamed chat completion as the OpenAI API shapes it: server-sent events in a
    chunked HTTP/1.1 body, `data: [DONE]` last. It streams until `release` is set."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.release = threading.Event()
        self.sent_all = threading.Event()
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def close(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


def _event(index: int, finish: str | None = None) -> bytes:
    delta = {} if finish else {"content": f"tok{index} "}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk = {"id": "chatcmpl-drain", "object": "chat.completion.chunk", "choices": [choice]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StreamingVllm

    def log_message(self, format: str, *args: object) -> None:
        return

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            index = 0
            while index < FIRST_CHUNKS or not self.server.release.is_set():
                self._chunk(_event(index))
                index += 1
                time.sleep(TICK_S)
                if index > 2000:  # never longer than ~40 s, whatever a test forgot
                    break
            self._chunk(_event(index, finish="stop"))
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
            self.server.sent_all.set()
        except OSError:
            pass  # the front door went away: what the client sees is the test's question


@dataclass
class Layout:
    """The pod's directories moved under the test's, and the shims on its PATH."""

    pod_tmp: Path  # the pod's /tmp (an emptyDir of the front door's container)
    frontdoor: Path  # the pod's /etc/tpudeploy-proxy
    shims: Path
    log: Path  # what the shimmed sleep (and the nginx wrapper) were asked to do, in order

    def in_layout(self, word: str) -> str:
        """A word of a pod command line with the pod's directories moved to the test's."""
        for pod_dir, here in ((pod.TMP_DIR, self.pod_tmp), (pod.FRONTDOOR_DIR, self.frontdoor)):
            if word == pod_dir or word.startswith(pod_dir + "/"):
                return str(here) + word[len(pod_dir) :]
        return word

    def command(self, argv: list[str]) -> list[str]:
        """A pod command line in the test's layout; a `sh -c` script word by word."""
        if argv[:2] == ["/bin/sh", "-c"]:
            script = "; ".join(
                shlex.join(self.command(shlex.split(part))) for part in argv[2].split("; ")
            )
            return [*argv[:2], script]
        return [self.in_layout(word) for word in argv]

    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.shims}:/usr/sbin:/usr/bin:/sbin:/bin", "DRAIN_LOG": str(self.log)}

    def run_hook(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """A preStop exec hook as the kubelet runs it in the container: argv, no shell around
        it, the image's PATH (here with the recording sleep first)."""
        return subprocess.run(
            self.command(argv), env=self.env(), capture_output=True, text=True, timeout=20
        )

    def recorded(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@dataclass
class PodDoor(Layout):
    proc: subprocess.Popen[str]
    tls_port: int
    context: ssl.SSLContext
    vllm: StreamingVllm
    conf_text: str


_SLEEP_SHIM = '#!/bin/sh\necho "sleep $*" >>"$DRAIN_LOG"\n'
# The real nginx, its arguments logged first: the quit the hook sends is nginx's own.
_NGINX_SHIM = '#!/bin/sh\necho "nginx $*" >>"$DRAIN_LOG"\nexec {nginx} "$@"\n'


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except ConnectionRefusedError:
        return False


@dataclass
class Prepared:
    """Once per module: the init script's files, the shims and the fake vLLM."""

    vllm: StreamingVllm
    frontdoor: Path
    conf_text: str  # the rendered nginx.conf as the init script copied it
    shims: Path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prepared]:
    # A host nginx's pid file is where a hook that misses the pod's would send its signal.
    for host_pid in ("/run/nginx.pid", "/var/run/nginx.pid"):
        if Path(host_pid).exists():
            pytest.skip(f"{host_pid} exists: a host nginx runs, which a wrong quit would stop")
    tmp = tmp_path_factory.mktemp("pod-drain")
    vllm = StreamingVllm()
    try:
        result, out = _prep(tmp, KEY, vllm.port)
        assert result.returncode == 0, result.stderr
        shims = tmp / "shims"
        shims.mkdir()
        (shims / "sleep").write_text(_SLEEP_SHIM)
        assert NGINX is not None
        (shims / "nginx").write_text(_NGINX_SHIM.format(nginx=shlex.quote(NGINX)))
        for shim in shims.iterdir():
            shim.chmod(0o755)
        yield Prepared(vllm, out, (out / pod.NGINX_CONF).read_text(), shims)
    finally:
        vllm.close()


@pytest.fixture
def layout(prepared: Prepared, tmp_path: Path) -> Iterator[Layout]:
    # The pod's /tmp: nginx's unprivileged worker reaches the TLS socket in it, so it must be
    # traversable (the emptyDir is the container's own).
    pod_tmp = Path(tempfile.mkdtemp(prefix="pod-tmp-"))
    pod_tmp.chmod(0o711)
    try:
        yield Layout(pod_tmp, prepared.frontdoor, prepared.shims, tmp_path / "drain.log")
    finally:
        shutil.rmtree(pod_tmp, ignore_errors=True)


@pytest.fixture
def door(prepared: Prepared, layout: Layout) -> Iterator[PodDoor]:
    prepared.vllm.release.clear()
    prepared.vllm.sent_all.clear()
    text, _, _ = loopback_pod_ports(prepared.conf_text, lambda p: Path(layout.in_layout(p)))
    tls_port = free_port()
    socket_path = layout.in_layout(render.PROXY_TLS_SOCKET)
    # At the path the pod's -c names: the hook's quit parses this file to find the pid file.
    conf = loopback_config(text, tls_port, Path(socket_path))
    (layout.frontdoor / pod.NGINX_CONF).write_text(conf)
    # The front door's own command line (after the cache gate's exec), in the test's layout.
    proc = subprocess.Popen(
        layout.command(pod.nginx_command()),
        env=layout.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15
        while not _accepts(tls_port):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "nginx did not start"
            time.sleep(0.02)
        layout.log.unlink(missing_ok=True)
        context = ssl.create_default_context(cafile=str(layout.frontdoor / "tls.crt"))
        context.check_hostname = False
        yield PodDoor(
            **vars(layout),
            proc=proc,
            tls_port=tls_port,
            context=context,
            vllm=prepared.vllm,
            conf_text=prepared.conf_text,
        )
    finally:
        stop_nginx(proc)


def _start_stream(door: PodDoor) -> tuple[http.client.HTTPSConnection, http.client.HTTPResponse]:
    """A streamed chat completion through the front door, its first events read."""
    conn = http.client.HTTPSConnection("127.0.0.1", door.tls_port, context=door.context, timeout=10)
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    conn.request(
        "POST",
        "/v1/chat/completions",
        body=json.dumps(body),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    assert response.status == 200
    # Chunked to the client, so the end of the body is a chunk of its own: a cut is visible.
    assert response.getheader("Transfer-Encoding") == "chunked"
    assert response.readline().startswith(b"data: {")
    return conn, response


def test_the_pid_file_is_on_the_pods_tmp_where_the_quit_looks(door: PodDoor) -> None:
    """The running front door wrote its pid under the pod's /tmp (the rendered config's `pid`
    against nginx's -p): where the hook's quit, with the same -p and -c, reads it."""
    (pid,) = re.findall(r"^pid (\S+);$", door.conf_text, re.MULTILINE)
    # Relative: under the -p prefix, the pod's /tmp emptyDir (the root filesystem is read-only).
    assert not pid.startswith("/")
    assert (door.pod_tmp / pid).read_text().strip() == str(door.proc.pid)


def test_a_stream_in_flight_finishes_after_the_quit_and_new_connections_are_refused(
    door: PodDoor,
) -> None:
    conn, response = _start_stream(door)
    # A client's idle keep-alive connection (a load balancer keeps some): after the quit nginx
    # closes it, so the client's next request opens a connection to another replica.
    idle = http.client.HTTPSConnection("127.0.0.1", door.tls_port, context=door.context, timeout=5)
    idle.request("GET", "/health")
    assert idle.getresponse().read() == b""
    started = time.monotonic()
    hook = door.run_hook(pod.frontdoor_pre_stop())
    # The hook's status is its last sleep's: nginx's own complaint is the signal that failed.
    assert hook.returncode == 0 and "[error]" not in hook.stderr, hook.stderr
    # nginx's master got the quit: its port closes (the pod takes no new request) ...
    deadline = time.monotonic() + 3
    while _accepts(door.tls_port):
        assert time.monotonic() < deadline, "the front door still accepts after the quit"
        time.sleep(0.02)
    assert idle.sock is not None
    assert idle.sock.recv(1) == b"", "the idle keep-alive connection was left open"
    idle.close()
    assert door.proc.poll() is None, "nginx exited with a request in flight"
    # ... while the stream already in flight goes on to its end, intact.
    door.vllm.release.set()
    rest = response.read()
    assert rest.endswith(b"data: [DONE]\n\n")
    assert b'"finish_reason": "stop"' in rest
    conn.close()
    # With nothing left in flight, nginx exits by itself, well inside the drain window.
    assert door.proc.wait(timeout=pod.drain_window_s()) == 0
    assert time.monotonic() - started < pod.drain_window_s()
    # The hook slept what the budget says, and quit in between, with the pod's own -p and -c.
    assert door.recorded() == [
        f"sleep {pod.ENDPOINT_REMOVAL_S}",
        "nginx " + shlex.join(door.command(pod.nginx_signal("quit"))[1:]),
        f"sleep {pod.drain_window_s()}",
    ]


def test_a_stream_still_running_when_the_grace_ends_is_cut_visibly(door: PodDoor) -> None:
    """At the end of the hook the kubelet sends SIGTERM to the container's process (nginx, which
    the cache gate execs): nginx's fast shutdown closes the stream mid-body. The client has had
    a 200 and some events, then the connection ends before the chunked body's last chunk:
    http.client raises IncompleteRead (an OpenAI client, on httpx, a RemoteProtocolError);
    no `finish_reason` and no `data: [DONE]` arrive, so it never reads as a whole answer."""
    conn, response = _start_stream(door)
    hook = door.run_hook(pod.frontdoor_pre_stop())
    assert hook.returncode == 0, hook.stderr
    time.sleep(5 * TICK_S)
    assert door.proc.poll() is None and not door.vllm.sent_all.is_set()
    door.proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    door.proc.wait(timeout=pod.STOP_MARGIN_S)
    # SIGKILL comes STOP_MARGIN_S after the hook: nginx is gone well before.
    assert time.monotonic() - stopped < pod.STOP_MARGIN_S
    with pytest.raises(http.client.IncompleteRead) as cut:
        response.read()
    events = [e for e in cut.value.partial.split(b"\n\n") if e.strip()]
    assert events and all(e.strip().startswith(b"data: {") for e in events)
    assert b"[DONE]" not in cut.value.partial
    assert b'"finish_reason": "stop"' not in cut.value.partial
    conn.close()


def test_vllms_hook_ends_with_the_front_doors(layout: Layout) -> None:
    """vLLM serves what the front door still forwards until the front door's hook ends, and is
    signalled with it, inside the grace."""
    assert layout.run_hook(pod.vllm_pre_stop()).returncode == 0
    (line,) = layout.recorded()
    assert line == f"sleep {pod.ENDPOINT_REMOVAL_S + pod.drain_window_s()}"


def test_the_budget_fits_gkes_share_of_the_spot_notice() -> None:
    grace = pod.termination_grace_s()
    assert pod.drain_window_s() > 0
    assert pod.ENDPOINT_REMOVAL_S + pod.drain_window_s() + pod.STOP_MARGIN_S <= grace
    # GKE gives non-system pods the first 15 s of the 30 s notice; a longer grace is ignored.
    assert grace <= facts.GKE_SPOT_POD_SHUTDOWN_S < facts.SPOT_NOTICE_S
    # The load balancer stops waiting for a leaving replica's connections before the pod is
    # killed, never after (the Gateway's GCPBackendPolicy).
    draining = routing.backend_policy(CFG)["spec"]["default"]["connectionDraining"]
    assert 0 < draining["drainingTimeoutSec"] <= grace
