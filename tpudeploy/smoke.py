"""`make smoke`: the front door locked, then a chat completion and the build log's get_weather/Paris
tool call with the API key, over TLS pinned to the node's certificate."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tpudeploy.config import DeployConfig
from tpudeploy.config.secretshape import API_KEY_RE
from tpudeploy.endpoint import Endpoint, FrontDoorError, connect
from tpudeploy.errors import UserError
from tpudeploy.terminal import printable

API_KEY_ENV = "VLLM_API_KEY"
TIMEOUT = 120.0
# Paths the proxy must refuse without the key: vLLM's own --api-key never covered the last
# three (DESIGN), and /invocations serves chat completions.
LOCKED = (("GET", "/v1/models"), ("POST", "/invocations"), ("GET", "/metrics"))

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


class SmokeError(UserError):
    """The endpoint is unreachable, untrusted, open, refuses the key, or answers wrong."""


# A client over its [access] limits gets 429 with Retry-After (templates/nginx.conf.j2): the
# checks wait as an agent should, at most this many times and this long each, then report it.
LIMIT_RETRIES = 3
LIMIT_WAIT_MAX_S = 30


def _request(
    endpoint: Endpoint,
    method: str,
    path: str,
    body: Any = None,
    api_key: str = "",
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, bytes, float]:
    """(status, body, seconds) of one request on a fresh pinned connection; a 429 with a
    Retry-After the front door's limits give is waited out and retried (LIMIT_RETRIES)."""
    for _ in range(LIMIT_RETRIES):
        status, raw, seconds, retry_after = _once(endpoint, method, path, body, api_key)
        if status != 429 or retry_after is None or retry_after > LIMIT_WAIT_MAX_S:
            return status, raw, seconds
        print(
            f"  {path}: 429, this client is over its [access] limits; retrying after "
            f"{retry_after} s (Retry-After)",
            flush=True,
        )
        sleep(retry_after)
    status, raw, seconds, _ = _once(endpoint, method, path, body, api_key)
    return status, raw, seconds


def _once(
    endpoint: Endpoint, method: str, path: str, body: Any, api_key: str
) -> tuple[int, bytes, float, int | None]:
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    start = time.monotonic()
    try:
        conn = connect(endpoint, timeout=TIMEOUT)
    except FrontDoorError as exc:
        raise SmokeError(str(exc)) from None
    try:
        payload = json.dumps(body) if body is not None else None
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        raw = response.read()
    except OSError as exc:
        raise SmokeError(f"{endpoint.url}{path}: the connection failed ({exc})") from None
    finally:
        conn.close()
    retry = (response.getheader("Retry-After") or "").strip()
    return response.status, raw, time.monotonic() - start, int(retry) if retry.isdigit() else None


def check_front_door(endpoint: Endpoint) -> list[str]:
    """/health answers without the key; every path in LOCKED refuses without it (401)."""
    status, _, _ = _request(endpoint, "GET", "/health")
    if status != 200:
        raise SmokeError(f"{endpoint.url}/health answered {status}, not 200: is it up? `make wait`")
    refused = []
    for method, path in LOCKED:
        status, _, _ = _request(endpoint, method, path, body={} if method == "POST" else None)
        if status != 401:
            raise SmokeError(
                f"{method} {endpoint.url}{path} answered {status} without the API key, not 401: "
                "the front door is open. Check the proxy on the node "
                "(sudo docker logs tpudeploy-proxy) before sending anything else"
            )
        refused.append(path)
    return refused


def _post(endpoint: Endpoint, api_key: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    # Seed: /v1/completions returns "" on -it models, which looks like a broken deploy.
    path = "/v1/chat/completions"
    status, raw, latency = _request(endpoint, "POST", path, body, api_key)
    if status == 401:
        raise SmokeError(
            f"{endpoint.url}{path} refused the API key (401). The node reads the key at boot: "
            "after `make api-key` rerun its startup script or restart it; or set VLLM_API_KEY to "
            "the key it booted with"
        )
    if status != 200:
        detail = printable(raw[:300].decode(errors="replace"))
        raise SmokeError(f"{endpoint.url}{path} answered HTTP {status}: {detail}")
    try:
        return json.loads(raw), latency
    except ValueError:
        raise SmokeError(f"{endpoint.url}{path} did not answer JSON: {raw[:200]!r}") from None


def _message(answer: dict[str, Any], what: str) -> dict[str, Any]:
    try:
        message: dict[str, Any] = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise SmokeError(f"{what}: no choices[0].message in {json.dumps(answer)[:300]}") from None
    return message


def chat(endpoint: Endpoint, api_key: str, model: str) -> tuple[str, float]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hi in five words."}],
        "max_tokens": 64,
    }
    answer, latency = _post(endpoint, api_key, body)
    content = (_message(answer, "chat completion").get("content") or "").strip()
    if not content:
        raise SmokeError(
            "chat completion came back with empty content: the model answered nothing. "
            "Look at the server log (`sudo docker logs vllm-gemma4` on the node)"
        )
    return content, latency


def tool_call(endpoint: Endpoint, api_key: str, model: str) -> tuple[dict[str, Any], float]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "What is the weather in Paris right now?"}],
        "tools": [WEATHER_TOOL],
        "tool_choice": "auto",
        "max_tokens": 256,
    }
    answer, latency = _post(endpoint, api_key, body)
    calls = _message(answer, "tool call").get("tool_calls") or []
    named = [c for c in calls if (c.get("function") or {}).get("name") == "get_weather"]
    if not named:
        raise SmokeError(
            "the model made no get_weather tool call (got "
            f"{[c.get('function', {}).get('name') for c in calls] or 'none'}): check that vLLM "
            "runs with --enable-auto-tool-choice --tool-call-parser gemma4"
        )
    raw = named[0]["function"].get("arguments", "")
    try:
        arguments = json.loads(raw)
    except (TypeError, ValueError):
        raise SmokeError(f"get_weather arguments are not JSON: {raw!r}") from None
    if not isinstance(arguments, dict) or "paris" not in str(arguments.get("city", "")).lower():
        raise SmokeError(f"get_weather was called without city Paris: {printable(raw)}")
    return {"name": "get_weather", "arguments": arguments}, latency


def resolve_api_key(cfg: DeployConfig, project: str, *, store: Any | None = None) -> str:
    """VLLM_API_KEY when set, else the first [access] client's current key in Secret Manager
    (the first line of its latest version)."""
    key = os.environ.get(API_KEY_ENV, "")
    where = API_KEY_ENV
    if not key:
        from tpudeploy.gcp.secretmanager import SecretStore, SecretStoreError

        try:
            key = (store or SecretStore.from_env(project)).access_current_key(cfg.api_key_secret_id)
        except SecretStoreError as exc:
            raise SmokeError(str(exc)) from None
        where = f"the latest version of secret {cfg.api_key_secret_id}"
    if not API_KEY_RE.match(key):
        # Never the value: its length says enough.
        raise SmokeError(
            f"{where} is not a key `make api-key` made ({len(key)} characters; a generated key "
            "is 43 URL-safe characters, 256 random bits): run `make api-key` for a new one, "
            f"or unset {API_KEY_ENV} to read the stored key"
        )
    return key


def run(endpoint: Endpoint, api_key: str, model: str, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    print(f"smoke test against {endpoint.url} (model {model}, certificate pinned)", file=out)
    refused = check_front_door(endpoint)
    print(f"  front door /health open, {' '.join(refused)} refused without the key", file=out)
    content, chat_latency = chat(endpoint, api_key, model)
    print(f"  chat      {chat_latency * 1000:7.0f} ms  {printable(repr(content))}", file=out)
    call, tool_latency = tool_call(endpoint, api_key, model)
    print(f"  tool call {tool_latency * 1000:7.0f} ms  {json.dumps(call)}", file=out)
    print("smoke test passed", file=out)
    return 0
