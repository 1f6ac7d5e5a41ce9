"""The access log's one field list (tpudeploy/frontdoor_log.py): the nginx format made from it
and the reader `make usage` uses. tests/render/test_frontdoor_clients.py parses lines the real
nginx wrote with the same reader."""

from __future__ import annotations

import json

import pytest

from tpudeploy import frontdoor_log
from tpudeploy.frontdoor_log import FIELD_NAMES, AccessLogError, parse_line


def _line(**changes: object) -> str:
    """A line as nginx writes it for a streamed request with usage, then `changes`."""
    values: dict[str, object] = {
        "time": "2026-12-03T06:00:00+00:00",
        "client": "planner",
        "remote_addr": "127.0.0.1",
        "method": "POST",
        "path": "/v1/chat/completions",
        "status": 200,
        "request_time": 1.504,
        "upstream_response_time": "1.503",
        "bytes_sent": 632,
        "bytes_received": 302,
        "prompt_tokens": 12,
        "completion_tokens": 7,
    }
    values.update(changes)
    return json.dumps(values)


def test_the_format_writes_each_field_once_in_order_text_quoted_numbers_bare() -> None:
    fmt = frontdoor_log.log_format()
    assert "'" not in fmt  # it sits in nginx's single quotes
    # Filled with sample values the way nginx substitutes them, it is one JSON object.
    sample = {"text": "x", "number": "1.5", "count": "null"}
    filled = fmt
    for f in frontdoor_log.ACCESS_LOG_FIELDS:
        filled = filled.replace(f.variable, sample[f.kind], 1)
    assert tuple(json.loads(filled)) == FIELD_NAMES
    assert len(set(FIELD_NAMES)) == len(FIELD_NAMES)
    assert {f.kind for f in frontdoor_log.ACCESS_LOG_FIELDS} <= set(frontdoor_log.KINDS)


def test_a_line_parses_to_typed_values() -> None:
    got = parse_line(_line())
    assert got["client"] == "planner" and got["status"] == 200
    assert got["upstream_response_time"] == pytest.approx(1.503)
    assert (got["prompt_tokens"], got["completion_tokens"]) == (12, 7)


def test_no_upstream_and_no_usage_are_none() -> None:
    got = parse_line(
        _line(status=429, upstream_response_time="", prompt_tokens=None, completion_tokens=None)
    )
    assert got["upstream_response_time"] is None
    assert got["prompt_tokens"] is None and got["completion_tokens"] is None
    # Two tries of the upstream are summed.
    assert parse_line(_line(upstream_response_time="0.5, 0.25"))["upstream_response_time"] == 0.75


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('127.0.0.1 [03/Dec/2026:06:00:00 +0000] "GET /v1/models" 200 10 0.001', "not a JSON"),
        (_line()[:-10], "not a JSON"),
        (json.dumps({"time": "x"}), "are not the front door's"),
        (_line(status="200"), "field status is not a number"),
        (_line(prompt_tokens="12"), "field prompt_tokens is not a count"),
        (_line(completion_tokens=True), "field completion_tokens is not a count"),
        (_line(client=None), "field client is not a text"),
        (_line(upstream_response_time="soon"), "upstream_response_time is not seconds"),
    ],
)
def test_any_other_line_is_refused_without_quoting_it(line: str, fragment: str) -> None:
    with pytest.raises(AccessLogError, match=fragment) as err:
        parse_line(line)
    assert "planner" not in str(err.value) and "soon" not in str(err.value)
