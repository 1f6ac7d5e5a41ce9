"""A small OpenAI-compatible server in place of the vLLM container (standard library only).

Started by the stand-in `docker run` with the container's own command line
(`vllm serve MODEL --port P ...`) and environment. Like vLLM: it needs the Hugging Face token
(HF_TOKEN_PATH, the file the node mounts, or HF_TOKEN) to "download" the gated weights (and,
given --hf-token-sha256, the right one), binds 127.0.0.1 only once loaded, answers /health, and
guards /v1 with VLLM_API_KEY only when that is set (behind the node's proxy it is not). The chat
answers are canned: the rehearsal proves the deployment's wiring, not the model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _parse(argv: list[str]) -> tuple[argparse.Namespace, str, int]:
    own = argparse.ArgumentParser(prog="fake_vllm")
    own.add_argument("--hf-token-sha256", default="")
    args, rest = own.parse_known_args(argv)
    if rest[:2] != ["vllm", "serve"] or len(rest) < 3:
        sys.exit(f"fake vllm: expected `vllm serve MODEL ...`, got {rest[:3]}")
    model = rest[2]
    port = 8000
    if "--port" in rest:
        port = int(rest[rest.index("--port") + 1])
    return args, model, port


def _answer(model: str, body: dict[str, Any]) -> dict[str, Any]:
    question = " ".join(
        str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict)
    )
    message: dict[str, Any] = {"role": "assistant", "content": "Hi there, nice to meet you!"}
    tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    city = re.search(r"weather in (\w+)", question, re.IGNORECASE)
    if "get_weather" in tools and city:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call-rehearsal-1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": json.dumps({"city": city.group(1)}),
                    },
                }
            ],
        }
    return {
        "id": "chatcmpl-rehearsal",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def main(argv: list[str]) -> int:
    args, model, port = _parse(argv)
    token = os.environ.get("HF_TOKEN", "")
    path = os.environ.get("HF_TOKEN_PATH", "")
    if not token and path and os.path.isfile(path):
        with open(path) as handle:
            token = handle.read().strip()
    if not token:
        print(f"401 Client Error: {model} is a gated repo and HF_TOKEN is empty", flush=True)
        return 1
    if args.hf_token_sha256 and hashlib.sha256(token.encode()).hexdigest() != args.hf_token_sha256:
        print(f"401 Client Error: HF_TOKEN may not read {model} (not the stored token)", flush=True)
        return 1
    api_key = os.environ.get("VLLM_API_KEY", "")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *a: Any) -> None:
            pass

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            # vLLM's --api-key guards /v1 routes only; /health stays open.
            return not api_key or self.headers.get("Authorization") == f"Bearer {api_key}"

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models" and self._authorized():
                self._send(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
            elif self.path.startswith("/v1/"):
                self._send(401, {"error": "Unauthorized"})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(400, {"error": "invalid JSON"})
                return
            if not self.path.startswith("/v1/"):
                self._send(404, {"detail": "Not Found"})
            elif not self._authorized():
                self._send(401, {"error": "Unauthorized"})
            elif self.path != "/v1/chat/completions":
                # The seed: /v1/completions answers "" on -it models; this fake only chats.
                self._send(404, {"detail": "Not Found"})
            elif body.get("model") != model:
                self._send(404, {"error": f"The model `{body.get('model')}` does not exist."})
            else:
                self._send(200, _answer(model, body))

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"INFO: Application startup complete. Serving {model} on 127.0.0.1:{port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
