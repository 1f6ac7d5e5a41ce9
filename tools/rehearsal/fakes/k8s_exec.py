"""The exec subresource of the ops fake's API server (tools/rehearsal/fakes/k8s_ops.py), over a
WebSocket as the real one serves it, for `make bench` on GKE (tpudeploy.gke.podexec).

What the real API server and kubelet refuse, this refuses the same way (EXEC_RULES, with where
each is written down). A command runs as a local process with the environment the test gives
the pod's container (`FakeKubernetes.exec_env[(pod, container)]`): nothing leaves loopback.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import struct
import subprocess
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

EXEC_RULES: dict[str, str] = {
    # The handshake: GET with Upgrade: websocket, Sec-WebSocket-Key; the answer 101 with
    # Sec-WebSocket-Accept = base64(SHA-1(key + the RFC's GUID)); client frames are masked.
    "WebSocket handshake and framing": "https://www.rfc-editor.org/rfc/rfc6455#section-4.2",
    # The channel subprotocols: v4.channel.k8s.io prefixes each binary message with its channel
    # (0 stdin, 1 stdout, 2 stderr, 3 error) and ends with a metav1.Status on channel 3.
    # A client that offers protocols the server has none of is refused.
    "subprotocols": "k8s.io/apiserver/pkg/util/wsstream/conn.go (handshake, protocols)",
    # The exit status: Success, or Failure with reason NonZeroExitCode and a cause ExitCode N.
    "exit status": "k8s.io/client-go/tools/remotecommand/v4.go (errorDecoderV4)",
    # PodExecOptions: command (repeated, required), container, stdin, stdout, stderr, tty.
    "PodExecOptions": "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#get-connect-exec-pod-v1-core",
    # No such pod: 404 NotFound; a container not in the pod: 400 BadRequest "container X is not
    # valid for pod Y"; a pod that does not run: 400 BadRequest, before any upgrade.
    "pod and container checks": (
        "k8s.io/kubernetes/pkg/registry/core/pod/strategy.go (ExecLocation)"
    ),
}
_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOLS = ("v4.channel.k8s.io",)
STDIN, STDOUT, STDERR, ERROR = 0, 1, 2, 3


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()  # noqa: S324


def _frame(opcode: int, payload: bytes) -> bytes:
    """A server frame: FIN, the opcode, unmasked (RFC 6455 5.1: servers never mask)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def _read_frame(rfile: Any) -> tuple[int, bytes] | None:
    """One client frame (opcode, unmasked payload); None at EOF or on an unmasked frame, which
    a server must treat as a protocol error (RFC 6455 5.1)."""
    head = rfile.read(2)
    if len(head) < 2:
        return None
    opcode, length = head[0] & 0x0F, head[1] & 0x7F
    if not head[1] & 0x80:
        return None
    if length == 126:
        (length,) = struct.unpack("!H", rfile.read(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", rfile.read(8))
    mask = rfile.read(4)
    data = rfile.read(length)
    return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def exec_status(returncode: int) -> dict[str, Any]:
    if returncode == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: exit status {returncode}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(returncode)}]},
    }


def _plain(handler: BaseHTTPRequestHandler, code: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def serve_exec(
    handler: BaseHTTPRequestHandler,
    *,
    find_pod: Callable[[str, str], dict[str, Any] | None],
    env_for: Callable[[str, str], dict[str, str]],
    status: Callable[[int, str, str], tuple[int, dict[str, Any]]],
    record: Callable[[dict[str, Any]], None],
) -> None:
    """Serve GET /api/v1/namespaces/NS/pods/POD/exec?... on `handler`'s connection."""
    parts = urlsplit(handler.path)
    segments = parts.path.split("/")
    # ['', 'api', 'v1', 'namespaces', NS, 'pods', POD, 'exec']
    if len(segments) != 8 or segments[1:4] != ["api", "v1", "namespaces"] or segments[5] != "pods":
        _plain(handler, *status(404, "NotFound", "the server could not find the resource"))
        return
    ns, name = segments[4], segments[6]
    query = parse_qs(parts.query)
    command = query.get("command") or []
    container = (query.get("container") or [""])[0]
    asked: dict[str, Any] = {"pod": name, "container": container, "command": command}
    record(asked)
    if not command:
        _plain(handler, *status(400, "BadRequest", "you must specify at least 1 command"))
        return
    pod = find_pod(ns, name)
    if pod is None:
        _plain(handler, *status(404, "NotFound", f'pods "{name}" not found'))
        return
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    if not container and len(names) == 1:
        container = str(names[0])
    if container not in names:
        _plain(
            handler,
            *status(400, "BadRequest", f"container {container} is not valid for pod {name}"),
        )
        return
    states = {
        c.get("name"): c.get("state") or {}
        for c in (pod.get("status") or {}).get("containerStatuses") or []
    }
    if (pod.get("status") or {}).get("phase") != "Running" or "running" not in states.get(
        container, {}
    ):
        _plain(
            handler,
            *status(
                400,
                "BadRequest",
                f'unable to upgrade connection: container not found ("{container}")',
            ),
        )
        return
    offered = [p.strip() for p in (handler.headers.get("Sec-WebSocket-Protocol") or "").split(",")]
    offered = [p for p in offered if p]
    chosen = next((p for p in offered if p in PROTOCOLS), "")
    if offered and not chosen:
        _plain(
            handler,
            *status(400, "BadRequest", f"requested protocol(s) are not supported: {offered}"),
        )
        return
    key = handler.headers.get("Sec-WebSocket-Key") or ""
    handler.send_response(101, "Switching Protocols")
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept_key(key))
    if chosen:
        handler.send_header("Sec-WebSocket-Protocol", chosen)
    handler.end_headers()
    handler.close_connection = True
    wants_stdin = (query.get("stdin") or ["false"])[0] == "true"
    asked["ran"] = True
    proc = subprocess.Popen(
        command,
        env=env_for(name, container),
        stdin=subprocess.PIPE if wants_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lock = threading.Lock()

    def send(channel: int, data: bytes) -> None:
        with lock:
            handler.wfile.write(_frame(0x2, bytes([channel]) + data))
            handler.wfile.flush()

    def pump_stdin() -> None:
        while (frame := _read_frame(handler.rfile)) is not None:
            opcode, data = frame
            if opcode == 0x8:  # close
                break
            if opcode == 0x9:  # ping
                with lock:
                    handler.wfile.write(_frame(0xA, data))
                    handler.wfile.flush()
            elif opcode == 0x2 and data and data[0] == STDIN and proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.write(data[1:])
                    proc.stdin.flush()
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    def pump(stream: Any, channel: int) -> None:
        while chunk := stream.read1(65536):
            send(channel, chunk)

    reader = threading.Thread(target=pump_stdin, daemon=True)
    reader.start()
    pumps = [
        threading.Thread(target=pump, args=(proc.stdout, STDOUT), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, STDERR), daemon=True),
    ]
    for t in pumps:
        t.start()
    returncode = proc.wait()
    for t in pumps:
        t.join()
    if chosen:
        send(ERROR, json.dumps(exec_status(returncode)).encode())
    with lock:
        handler.wfile.write(_frame(0x8, struct.pack("!H", 1000)))
        handler.wfile.flush()
    reader.join(timeout=5)
