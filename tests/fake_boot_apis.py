"""Loopback fakes for the boot path: TPU v2alpha1 guest attributes/node, Secret Manager, an OpenAI
chat endpoint. Same shape as tests/fake_tpu_api.py: a ThreadingHTTPServer on 127.0.0.1 whose
answers are scripted and whose requests are recorded."""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, Any]


class LoopbackServer:
    def __init__(self, route: Callable[[str, str, Any, dict[str, str]], Answer]) -> None:
        self.requests: list[dict[str, Any]] = []
        self._route = route
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
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
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve

        return Handler


def api_error(status: int, message: str) -> Answer:
    names = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
    return status, {"error": {"code": status, "message": message, "status": names.get(status)}}


class FakeTpu(LoopbackServer):
    """Node get + getGuestAttributes; `phases` is what successive polls show (last one sticks).
    A phase of None means "no guest attribute yet" (404); "no-node" makes the node itself 404."""

    def __init__(self, phases: list[tuple[str | None, str]], ip: str = "127.0.0.1") -> None:
        self.phases = list(phases)
        self.ip = ip
        super().__init__(self.route)

    def route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        m = re.fullmatch(
            r"/v2alpha1/(projects/[^/]+/locations/[^/]+/nodes/[^/:?]+)(:getGuestAttributes)?(\?.*)?",
            path,
        )
        if not m:
            return api_error(404, f"no route {method} {path}")
        phase, reason = self.phases[0]
        if m.group(2):
            if len(self.phases) > 1:
                self.phases.pop(0)
            if phase in (None, "no-node"):
                return api_error(404, "guest attributes not found")
            items = [{"namespace": "tpudeploy", "key": "phase", "value": phase}]
            if reason:
                items.append({"namespace": "tpudeploy", "key": "reason", "value": reason})
            return 200, {
                "guestAttributes": [{"queryPath": "tpudeploy/", "queryValue": {"items": items}}]
            }
        if phase == "no-node":
            return api_error(404, f"Resource '{m.group(1)}' was not found")
        return 200, {
            "name": m.group(1),
            "state": "READY",
            "networkEndpoints": [
                {"ipAddress": "10.182.0.2", "accessConfig": {"externalIp": self.ip}}
            ],
        }


class FakeSecretManager(LoopbackServer):
    def __init__(self, secrets: dict[str, list[str]]) -> None:
        self.secrets = secrets  # secret id -> versions (values); missing id = 404
        super().__init__(self.route)

    def route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        m = re.fullmatch(
            r"/v1/projects/([^/]+)/secrets/([^/:]+)(:addVersion|/versions/latest:access)", path
        )
        if not m or m.group(2) not in self.secrets:
            return api_error(404, f"Secret [{path}] not found or has no versions.")
        project, secret_id, verb = m.groups()
        versions = self.secrets[secret_id]
        if verb == ":addVersion" and method == "POST":
            versions.append(base64.b64decode(body["payload"]["data"]).decode())
            return 200, {"name": f"projects/{project}/secrets/{secret_id}/versions/{len(versions)}"}
        if verb.endswith(":access") and method == "GET":
            if not versions:
                return api_error(404, "no versions")
            data = base64.b64encode(versions[-1].encode()).decode()
            return 200, {
                "name": f"projects/{project}/secrets/{secret_id}/versions/{len(versions)}",
                "payload": {"data": data},
            }
        return api_error(404, "no route")


def chat_answer(
    content: str | None = None, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def weather_call(arguments: str = '{"city": "Paris"}', name: str = "get_weather") -> dict[str, Any]:
    return {"id": "call-1", "type": "function", "function": {"name": name, "arguments": arguments}}


class FakeVllm(LoopbackServer):
    """/v1/chat/completions guarded by a Bearer key, like vLLM with VLLM_API_KEY set."""

    def __init__(self, api_key: str, chat: Any = None, tool: Any = None) -> None:
        self.api_key = api_key
        self.chat = chat if chat is not None else chat_answer("Hi there, nice to meet you!")
        self.tool = tool if tool is not None else chat_answer(None, [weather_call()])
        super().__init__(self.route)

    def route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        if path != "/v1/chat/completions" or method != "POST":
            return 404, {"detail": "Not Found"}
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"error": "Unauthorized"}
        return 200, self.tool if body.get("tools") else self.chat
