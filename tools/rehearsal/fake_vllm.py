"""A small OpenAI-compatible server in place of the vLLM container (standard library only).

Started by the stand-in `docker run` with the container's own command line
(`vllm serve MODEL --port P ...`) and environment. Like vLLM: it needs the Hugging Face token
(HF_TOKEN_PATH, the file the node mounts, or HF_TOKEN) to "download" the gated weights (and,
given --hf-token-sha256, the right one), binds 127.0.0.1 only once loaded, answers /health, and
guards /v1 with VLLM_API_KEY only when that is set (behind the node's proxy it is not). The chat
answers follow the request as far as `make accept` needs (the image's colours, a needle, the
usage's prompt tokens, vLLM's 400 past --max-model-len): the rehearsal proves the deployment's
wiring (the front door passes what accept sends), not the model. A streamed chat completion
(`"stream": true`) comes as server-sent events, one token every STREAM_SECONDS_PER_TOKEN, ending
`data: [DONE]`: slow on purpose, so the rehearsal can rotate keys and reload nginx while it runs.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import re
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _parse(argv: list[str]) -> tuple[argparse.Namespace, str, int, int]:
    own = argparse.ArgumentParser(prog="fake_vllm")
    own.add_argument("--hf-token-sha256", default="")
    args, rest = own.parse_known_args(argv)
    if rest[:2] != ["vllm", "serve"] or len(rest) < 3:
        sys.exit(f"fake vllm: expected `vllm serve MODEL ...`, got {rest[:3]}")
    model = rest[2]
    port = 8000
    if "--port" in rest:
        port = int(rest[rest.index("--port") + 1])
    # vLLM's default is the model's own length; the node always passes --max-model-len.
    max_model_len = 131_072
    if "--max-model-len" in rest:
        max_model_len = int(rest[rest.index("--max-model-len") + 1])
    return args, model, port, max_model_len


# Characters per prompt token this fake counts (usage.prompt_tokens): not the 4.0 `make accept`
# assumes, so the rehearsal shows it measures the server's own ratio, as it must Gemma's.
CHARS_PER_TOKEN = 3.7
IMAGE_TOKENS = 256


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _png_halves(url: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The first row's leftmost and rightmost pixels of an 8-bit RGB PNG whose first row is
    unfiltered (what `make accept` draws): standard library only, as the container has."""
    png = base64.b64decode(url.split(",", 1)[1])
    width = struct.unpack(">I", png[16:20])[0]
    data, at = b"", 8
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at : at + 8])
        if kind == b"IDAT":
            data += png[at + 8 : at + 8 + length]
        at += 12 + length
    row = zlib.decompress(data)[1 : 1 + 3 * width]
    return tuple(row[:3]), tuple(row[-3:])


# The colours `make accept` draws from (tpudeploy/acceptprobes.py PALETTE, restated: this file
# runs as the container's script, standard library only), by nearest RGB: the fake "sees" the
# image it was sent.
COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 170, 50),
    "blue": (30, 60, 220),
    "yellow": (245, 220, 30),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
}


def _colour(rgb: tuple[int, ...]) -> str:
    return min(
        COLOURS, key=lambda n: sum((a - b) ** 2 for a, b in zip(COLOURS[n], rgb, strict=True))
    )


def _content(body: dict[str, Any], question: str) -> str:
    for message in body.get("messages", []):
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                left, right = _png_halves(part["image_url"]["url"])
                return f"left: {_colour(left)}, right: {_colour(right)}"
    needle = re.search(r"secret code for the archive is (\d{6})", question)
    if needle:
        return needle.group(1)
    if question.startswith("Describe a lighthouse"):
        return "The lamp turns slowly over a dark sea."
    return "Hi there, nice to meet you!"


def _answer(model: str, body: dict[str, Any]) -> dict[str, Any]:
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    question = " ".join(_text(m) for m in messages)
    message: dict[str, Any] = {"role": "assistant", "content": _content(body, question)}
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
        "usage": {"prompt_tokens": prompt_tokens(body), "completion_tokens": 8},
    }


# The pace of a streamed answer: one token every 0.2 s (the chip streams Gemma's tokens in
# milliseconds; slow here so one stream outlives a key rotation and two nginx reloads), and at
# most STREAM_MAX_TOKENS of them (max_tokens, else STREAM_DEFAULT_TOKENS).
STREAM_SECONDS_PER_TOKEN = 0.2
STREAM_DEFAULT_TOKENS = 16
STREAM_MAX_TOKENS = 600


def stream_events(model: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks of a streamed chat completion, as vLLM's OpenAI server sends them: the role,
    one token per chunk cycling through the answer's words, the finish reason, and the usage
    when the client asked for it (stream_options.include_usage: choices empty)."""
    words = str(_answer(model, body)["choices"][0]["message"].get("content") or "ok").split()
    tokens = min(STREAM_MAX_TOKENS, max(1, int(body.get("max_tokens") or STREAM_DEFAULT_TOKENS)))

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-rehearsal-stream",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": words[i % len(words)] + " "}) for i in range(tokens)]
    events.append(chunk({}, "stop"))
    options = body.get("stream_options") or {}
    if isinstance(options, dict) and options.get("include_usage"):
        events.append(
            {
                "id": "chatcmpl-rehearsal-stream",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": prompt_tokens(body),
                    "completion_tokens": tokens,
                    "total_tokens": prompt_tokens(body) + tokens,
                },
            }
        )
    return events


def prompt_tokens(body: dict[str, Any]) -> int:
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    images = sum(
        1
        for m in messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if isinstance(p, dict) and p.get("type") == "image_url"
    )
    chars = sum(len(_text(m)) for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + IMAGE_TOKENS * images


def too_long(body: dict[str, Any], max_model_len: int) -> dict[str, Any] | None:
    """vLLM's refusal before any prefill (vllm/entrypoints/openai/serving_engine.py): 400."""
    tokens = prompt_tokens(body)
    if tokens + int(body.get("max_tokens") or 0) <= max_model_len:
        return None
    return {
        "error": {
            "message": f"This model's maximum context length is {max_model_len} tokens. However, "
            f"your request has {tokens} input tokens. Please reduce the length of the input "
            "messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }


def main(argv: list[str]) -> int:
    args, model, port, max_model_len = _parse(argv)
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
    # vLLM's own request counters on /metrics (names: tpudeploy/gke/vllm_metrics.json), which
    # the idle stop's watcher reads on loopback: requests in flight and finished ones.
    counts = {"running": 0, "finished": 0}
    lock = threading.Lock()

    def metrics() -> str:
        with lock:
            running, finished = counts["running"], counts["finished"]
        labels = f'engine="0",model_name="{model}"'
        return (
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{{{labels}}} {running}.0\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{{{labels}}} 0.0\n"
            "# TYPE vllm:request_success_total counter\n"
            f'vllm:request_success_total{{{labels},finished_reason="stop"}} {finished}.0\n'
        )

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

        def _stream(self, body: dict[str, Any]) -> None:
            # HTTP/1.0 without a Content-Length: the body ends when the connection closes, as
            # the proxy (proxy_buffering off) passes each event on when it arrives.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for event in stream_events(model, body):
                if event["choices"] and event["choices"][0]["delta"].get("content"):
                    time.sleep(STREAM_SECONDS_PER_TOKEN)
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _authorized(self) -> bool:
            # vLLM's --api-key guards /v1 routes only; /health stays open.
            return not api_key or self.headers.get("Authorization") == f"Bearer {api_key}"

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/metrics":
                data = metrics().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
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
            elif (refusal := too_long(body, max_model_len)) is not None:
                self._send(400, refusal)
            else:
                # Counted as vLLM does: running while the engine works on it, finished once
                # the engine is done (before the last byte reaches the client).
                with lock:
                    counts["running"] += 1
                answer: dict[str, Any] | None = None
                try:
                    if body.get("stream"):
                        self._stream(body)
                    else:
                        answer = _answer(model, body)
                finally:
                    with lock:
                        counts["running"] -= 1
                        counts["finished"] += 1
                if answer is not None:
                    self._send(200, answer)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"INFO: Application startup complete. Serving {model} on 127.0.0.1:{port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
