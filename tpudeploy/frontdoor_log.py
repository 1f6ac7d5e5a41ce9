"""The front door's access log: one JSON object per request, its fields defined once, here.

templates/nginx.conf.j2 renders its `log_format` from ACCESS_LOG_FIELDS (render.py), and
whatever reads the log for usage per client (`make usage`) parses a line with parse_line, so the
writer and the reader cannot drift apart. Standard library only.

What a line never holds: the key, any header, the query string, the prompt or the completion.
The client is the name the key map gives the presented key ("-" when no key matched); the path
is nginx's normalised $uri. The token counts come from the response's own `usage` object, read
by templates/frontdoor_usage.js as the body passes: a non-streamed completion always carries
it; a stream only when the client asked for it (`stream_options: {"include_usage": true}`).
Without it, both counts are null and the request is counted by its number, duration and bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# How a value is written between the JSON punctuation of the format:
#   text    a JSON string (nginx's escape=json escapes whatever the variable holds)
#   number  a bare JSON number: nginx always has one for it
#   count   a bare JSON integer or null: the njs filter sets it, else its js_var default, null
KINDS = ("text", "number", "count")


@dataclass(frozen=True, slots=True)
class LogField:
    name: str
    variable: str
    kind: str
    meaning: str


ACCESS_LOG_FIELDS: tuple[LogField, ...] = (
    LogField("time", "$time_iso8601", "text", "when the request ended (ISO 8601, the node's UTC)"),
    LogField("client", "$api_client_log", "text", "the [access] client, '-' without a valid key"),
    LogField("remote_addr", "$remote_addr", "text", "the client's address (PROXY protocol)"),
    LogField("method", "$request_method", "text", "the HTTP method"),
    LogField("path", "$uri", "text", "the normalised path, never the query string"),
    LogField("status", "$status", "number", "the status sent (429: over a limit)"),
    LogField("request_time", "$request_time", "number", "seconds from first byte to last"),
    LogField(
        "upstream_response_time",
        "$upstream_response_time",
        "text",
        "seconds vLLM took, '' when nginx answered itself (401, 404, 429)",
    ),
    LogField("bytes_sent", "$bytes_sent", "number", "bytes sent to the client, headers included"),
    LogField(
        "bytes_received", "$request_length", "number", "bytes of the request line, headers, body"
    ),
    LogField(
        "prompt_tokens", "$usage_prompt_tokens", "count", "the response's usage.prompt_tokens"
    ),
    LogField(
        "completion_tokens",
        "$usage_completion_tokens",
        "count",
        "the response's usage.completion_tokens (output tokens)",
    ),
)

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in ACCESS_LOG_FIELDS)


def log_format() -> str:
    """The body of nginx's `log_format ... escape=json '...'` (no single quote in it)."""
    parts = []
    for field in ACCESS_LOG_FIELDS:
        value = f'"{field.variable}"' if field.kind == "text" else field.variable
        parts.append(f'"{field.name}":{value}')
    return "{" + ",".join(parts) + "}"


class AccessLogError(ValueError):
    """A line that is not one the front door writes; the message quotes no value of it."""


def parse_line(line: str) -> dict[str, object]:
    """One access log line as {field: value}: text as str, numbers as float (status as int),
    counts as int or None, upstream_response_time as float or None (nginx answered itself).
    Raises AccessLogError for anything else (another format, a truncated line)."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise AccessLogError(f"not a JSON line ({exc.msg} at column {exc.colno})") from None
    if not isinstance(raw, dict) or tuple(raw) != FIELD_NAMES:
        keys = list(raw) if isinstance(raw, dict) else type(raw).__name__
        raise AccessLogError(f"fields {keys} are not the front door's {list(FIELD_NAMES)}")
    out: dict[str, object] = {}
    for field in ACCESS_LOG_FIELDS:
        value = raw[field.name]
        ok = (
            isinstance(value, str)
            if field.kind == "text"
            else (isinstance(value, int | float) and not isinstance(value, bool))
            if field.kind == "number"
            else (value is None or (isinstance(value, int) and not isinstance(value, bool)))
        )
        if not ok:
            raise AccessLogError(f"field {field.name} is not a {field.kind}")
        out[field.name] = value
    out["status"] = int(raw["status"])
    out["upstream_response_time"] = _seconds(raw["upstream_response_time"])
    return out


def _seconds(text: str) -> float | None:
    """nginx's $upstream_response_time: '' without an upstream, else one time per upstream tried
    ('0.004, 0.120'; one server here, so one): their sum."""
    if text in ("", "-"):
        return None
    try:
        return sum(float(part) for part in text.split(",") if part.strip() not in ("", "-"))
    except ValueError:
        raise AccessLogError("field upstream_response_time is not seconds") from None
