"""A command in one container of a running pod, through the Kubernetes API's exec subresource
over a WebSocket, as `kubectl exec -i` does, with the user's own Google token
(tpudeploy.gcp.container): no kubectl, no kubeconfig.

The protocol is the API server's (k8s.io/apimachinery/pkg/util/remotecommand and
k8s.io/apiserver/pkg/util/wsstream; the rules the loopback fake enforces are
tools/rehearsal/fakes/k8s_ops.EXEC_RULES): GET .../pods/POD/exec?command=...&container=...
upgraded to a WebSocket with the subprotocol v4.channel.k8s.io; every binary message starts with
its channel (0 stdin, 1 stdout, 2 stderr, 3 the exit Status); the command's status arrives on
channel 3 as a metav1.Status, exit code N as reason NonZeroExitCode with the cause ExitCode N.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tpudeploy.gcp.container import KubeError
from tpudeploy.gke.kube import KubeApi

PROTOCOL = "v4.channel.k8s.io"
STDIN, STDOUT, STDERR, ERROR = 0, 1, 2, 3
# What a command that never ends costs: a bench cell at 64 clients and 8,192 tokens runs minutes;
# this bounds a hung one, not a slow one.
DEFAULT_TIMEOUT_S = 4 * 3600.0


@dataclass(frozen=True)
class PodExecResult:
    returncode: int
    stdout: bytes
    stderr: bytes


def exec_path(namespace: str, pod: str, container: str, argv: Sequence[str]) -> str:
    """The exec subresource's path and query: each word of argv one `command` parameter (the
    API server's PodExecOptions). Public: the words land in the API server's audit log."""
    query = [("command", word) for word in argv]
    query += [("container", container), ("stdin", "true"), ("stdout", "true")]
    query += [("stderr", "true")]
    return f"/api/v1/namespaces/{namespace}/pods/{pod}/exec?{urllib.parse.urlencode(query)}"


def exit_code(status: dict[str, Any]) -> int:
    """0 for Success; N from a NonZeroExitCode Status's ExitCode cause; else an error."""
    if status.get("status") == "Success":
        return 0
    causes = (status.get("details") or {}).get("causes") or []
    if status.get("reason") == "NonZeroExitCode":
        for cause in causes:
            if cause.get("reason") == "ExitCode" and str(cause.get("message", "")).isdigit():
                return int(cause["message"])
    raise KubeError(
        f"the command did not run in the pod: {status.get('message') or status}; check the pod "
        "(`make status`) and try again"
    )


def _handshake_error(path: str, status: int, message: str) -> KubeError:
    """The API server refuses before the upgrade with a Status the WebSocket client does not
    read: say what each code means here (k8s_exec.EXEC_RULES)."""
    where = path.split("?", 1)[0]
    if status in (401, 403):
        return KubeError(
            f"the cluster's API refused exec on {where} (HTTP {status}): your account needs "
            "container.pods.exec (roles/container.developer) on the project, and fresh "
            "credentials (`gcloud auth application-default login`)"
        )
    if status == 404:
        return KubeError(f"no such pod for exec ({where}): it was replaced; run `make status`")
    if status == 400:
        return KubeError(
            f"the cluster's API refused exec on {where} (HTTP 400): the container is not "
            "running in that pod (or not in it); run `make status`, then try again"
        )
    return KubeError(f"the cluster's API refused exec on {where} (HTTP {status}: {message})")


async def _exec(
    api: KubeApi, path: str, stdin: bytes, timeout: float
) -> tuple[bytes, bytes, dict[str, Any] | None]:
    import aiohttp

    url = api.access.url.replace("https://", "wss://", 1) + path
    out, err = bytearray(), bytearray()
    status: dict[str, Any] | None = None
    async with aiohttp.ClientSession() as session:
        try:
            ws = await session.ws_connect(
                url,
                protocols=(PROTOCOL,),
                headers={"Authorization": f"Bearer {api.access.token}"},
                ssl=api._context,
                heartbeat=30.0,
                max_msg_size=0,
            )
        except aiohttp.WSServerHandshakeError as exc:
            raise _handshake_error(path, exc.status, exc.message) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise KubeError(
                f"cannot reach the cluster's control plane at {api.access.url} "
                f"({type(exc).__name__}): its authorized networks are [network] allowed_cidrs"
            ) from None
        async with ws:
            if ws.protocol != PROTOCOL:
                raise KubeError(
                    f"the cluster's API answered exec with subprotocol {ws.protocol!r}, not "
                    f"{PROTOCOL}: no exit status would come back; this API server is too old"
                )
            if stdin:
                await ws.send_bytes(bytes([STDIN]) + stdin)
            async with asyncio.timeout(timeout):
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                        continue
                    channel, data = message.data[0], message.data[1:]
                    if channel == STDOUT:
                        out += data
                    elif channel == STDERR:
                        err += data
                    elif channel == ERROR and data:
                        status = json.loads(data)
    return bytes(out), bytes(err), status


def exec_in_pod(
    api: KubeApi,
    namespace: str,
    pod: str,
    container: str,
    argv: Sequence[str],
    *,
    stdin: bytes = b"",
    timeout: float = DEFAULT_TIMEOUT_S,
) -> PodExecResult:
    """Run argv in the container, feeding `stdin` (never an argument: it may hold a key)."""
    path = exec_path(namespace, pod, container, argv)
    try:
        out, err, status = asyncio.run(_exec(api, path, stdin, timeout))
    except TimeoutError:
        raise KubeError(
            f"exec in pod {pod} ran past {timeout:.0f} s; the command may still run there"
        ) from None
    if status is None:
        raise KubeError(
            f"exec in pod {pod} ended without an exit status (the connection dropped, or the "
            "container restarted); run `make status` and try again"
        )
    return PodExecResult(exit_code(status), out, err)
