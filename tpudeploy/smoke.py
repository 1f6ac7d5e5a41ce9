"""`make smoke`: a chat completion and the seed's get_weather/Paris tool call, with the API key."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any, TextIO

from tpudeploy.config import DeployConfig
from tpudeploy.queued_resource import ApiError, QueuedResourceError, TpuApi
from tpudeploy.wait import node_name

ENDPOINT_ENV = "ENDPOINT"
API_KEY_ENV = "VLLM_API_KEY"
TIMEOUT = 120.0

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


class SmokeError(Exception):
    """The endpoint is unreachable, refuses the key, or answers wrong; the message says which."""


def _post(endpoint: str, api_key: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    # Seed: /v1/completions returns "" on -it models, which looks like a broken deploy.
    url = f"{endpoint.rstrip('/')}/v1/chat/completions"
    # resolve_endpoint admits only http(s) URLs.
    request = urllib.request.Request(  # noqa: S310
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
        method="POST",
    )
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310
            raw = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise SmokeError(
                f"{url} refused the API key (401). vLLM reads the key at boot: after "
                "`make api-key` the node needs a restart; or set VLLM_API_KEY to the key it "
                "booted with"
            ) from None
        detail = exc.read()[:300].decode(errors="replace")
        raise SmokeError(f"{url} answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SmokeError(
            f"cannot reach {url} ({reason}). Is the node ready (`make wait`)? Is your address "
            "in [network] allowed_cidrs (the firewall opens the port to nothing else)?"
        ) from None
    latency = time.monotonic() - start
    try:
        return json.loads(raw), latency
    except ValueError:
        raise SmokeError(f"{url} did not answer JSON: {raw[:200]!r}") from None


def _message(answer: dict[str, Any], what: str) -> dict[str, Any]:
    try:
        message: dict[str, Any] = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise SmokeError(f"{what}: no choices[0].message in {json.dumps(answer)[:300]}") from None
    return message


def chat(endpoint: str, api_key: str, model: str) -> tuple[str, float]:
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


def tool_call(endpoint: str, api_key: str, model: str) -> tuple[dict[str, Any], float]:
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
        raise SmokeError(f"get_weather was called without city Paris: {raw}")
    return {"name": "get_weather", "arguments": arguments}, latency


def resolve_endpoint(cfg: DeployConfig, project: str, *, api: TpuApi | None = None) -> str:
    """ENDPOINT (http://ip:port) when set, else the node's external (or internal) IP."""
    explicit = os.environ.get(ENDPOINT_ENV, "").strip()
    if explicit:
        if not explicit.startswith(("http://", "https://")):
            raise SmokeError(f"ENDPOINT={explicit!r} needs a scheme: write http://IP:PORT")
        return explicit
    try:
        node = (api or TpuApi(log=sys.stderr)).get_node(node_name(cfg, project))
    except ApiError as exc:
        raise SmokeError(f"cannot read node {cfg.node_id}: {exc.api_message}") from None
    except QueuedResourceError as exc:  # no credentials
        raise SmokeError(str(exc)) from None
    if node is None:
        raise SmokeError(
            f"node {cfg.node_id} does not exist in {cfg.zone}: `make deploy`, then `make wait`"
        )
    for endpoint in node.get("networkEndpoints") or []:
        ip = (endpoint.get("accessConfig") or {}).get("externalIp") or endpoint.get("ipAddress")
        if ip:
            return f"http://{ip}:{cfg.vllm.port}"
    raise SmokeError(f"node {cfg.node_id} has no IP yet; try `make wait` first")


def resolve_api_key(cfg: DeployConfig, project: str, *, store: Any | None = None) -> str:
    """VLLM_API_KEY when set, else the latest version of <name>-api-key in Secret Manager."""
    key = os.environ.get(API_KEY_ENV, "")
    if key:
        return key
    from tpudeploy.secretstore import SecretStore, SecretStoreError

    try:
        return (store or SecretStore.from_env(project)).access_latest(cfg.api_key_secret_id)
    except SecretStoreError as exc:
        raise SmokeError(str(exc)) from None


def run(endpoint: str, api_key: str, model: str, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    print(f"smoke test against {endpoint} (model {model})", file=out)
    content, chat_latency = chat(endpoint, api_key, model)
    print(f"  chat      {chat_latency * 1000:7.0f} ms  {content!r}", file=out)
    call, tool_latency = tool_call(endpoint, api_key, model)
    print(f"  tool call {tool_latency * 1000:7.0f} ms  {json.dumps(call)}", file=out)
    print("smoke test passed", file=out)
    return 0
