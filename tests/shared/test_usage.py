"""`make usage` (tpudeploy/usage.py): per-client requests, errors, latency, tokens, and shares of
the chips' cost that add up to what the chips cost in the window."""

from __future__ import annotations

import datetime
import json
import random

import pytest

from tpudeploy import usage
from tpudeploy.frontdoor_log import FIELD_NAMES

NOW = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.UTC)
SINCE = NOW - datetime.timedelta(hours=24)


def _line(
    client: str,
    status: int,
    seconds: float,
    *,
    at: datetime.datetime,
    out: int | None,
    path: str = "/v1/chat/completions",
) -> str:
    """A line as the front door writes it (frontdoor_log.log_format: its fields, in order)."""
    values = {
        "time": at.isoformat(),
        "client": client,
        "remote_addr": "127.0.0.1",
        "method": "POST",
        "path": path,
        "status": status,
        "request_time": seconds,
        "upstream_response_time": "" if status in (401, 429) else f"{seconds:.3f}",
        "bytes_sent": 900,
        "bytes_received": 400,
        "prompt_tokens": None if out is None else 100,
        "completion_tokens": out,
    }
    assert tuple(values) == FIELD_NAMES
    return json.dumps(values)


def test_cost_shares_add_up_to_the_chips_cost_by_busy_seconds() -> None:
    rng = random.Random(7)  # noqa: S311 - a reproducible synthetic log
    lines, busy = [], {"planner": 0.0, "coder": 0.0}
    for i in range(200):
        client = "planner" if i % 3 else "coder"
        seconds = round(rng.uniform(0.5, 9.0), 3)
        busy[client] += seconds
        at = SINCE + datetime.timedelta(minutes=5 * i + 1)
        lines.append(_line(client, 200, seconds, at=at, out=rng.randint(10, 500)))
    # Started 6 h ago: the window's chip-hours are 6 x 1 chip, not 24.
    started = NOW - datetime.timedelta(hours=6)
    replica = usage.ReplicaLog("node", started, lines, chips=1)
    found = usage.tally([replica], since=SINCE, now=NOW, rate=1.2)
    assert found.chip_hours == pytest.approx(6.0)
    assert found.cost == pytest.approx(7.2)
    shares = {c.client: found.share(c) * found.cost for c in found.clients}
    assert sum(shares.values()) == pytest.approx(found.cost)
    total = sum(busy.values())
    assert shares["coder"] == pytest.approx(found.cost * busy["coder"] / total)


def test_errors_429s_the_window_and_requests_without_a_key() -> None:
    at = NOW - datetime.timedelta(minutes=10)
    lines = [
        _line("ci", 200, 1.0, at=at, out=10),
        _line("ci", 429, 0.001, at=at, out=None),
        _line("ci", 500, 2.0, at=at, out=None),
        _line("-", 401, 0.001, at=at, out=None),
        _line("-", 200, 0.002, at=at, out=None, path="/health"),  # a readiness check
        _line("ci", 200, 3.0, at=SINCE - datetime.timedelta(seconds=1), out=10),  # before
        "2026/12/03 11:00:00 [error] 7#7: upstream timed out",  # nginx's error log
        "{not json",
    ]
    replica = usage.ReplicaLog("r", SINCE - datetime.timedelta(days=3), lines, chips=2)
    found = usage.tally([replica], since=SINCE, now=NOW, rate=1.0)
    rows = {c.client: c for c in found.clients}
    assert set(rows) == {"ci", usage.NO_KEY}
    assert (rows["ci"].requests, rows["ci"].errors, rows["ci"].limited) == (3, 2, 1)
    assert (rows["ci"].output_tokens, rows["ci"].with_usage) == (10, 1)
    assert found.unparsed == 2 and found.chip_hours == pytest.approx(48.0)
    text = usage.report(found, pricing="spot")
    assert "2 (1 x 429)" in text and "10 (1/3)" in text and "2 log line(s)" in text


def test_one_client_only_and_an_idle_window() -> None:
    at = NOW - datetime.timedelta(minutes=1)
    lines = [_line("a", 200, 1.0, at=at, out=5), _line("b", 200, 1.0, at=at, out=5)]
    replica = usage.ReplicaLog("r", SINCE, lines, chips=1)
    only = usage.tally([replica], since=SINCE, now=NOW, rate=1.0, client="b")
    assert [c.client for c in only.clients] == ["b"]
    idle = usage.tally([usage.ReplicaLog("r", SINCE, [], 1)], since=SINCE, now=NOW, rate=0.5)
    assert "no request in the window: the $12.00 was idle time" in usage.report(idle, pricing="x")


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert usage.percentile(values, 50) == 50.0
    assert usage.percentile(values, 95) == 95.0
    assert usage.percentile([3.0], 95) == 3.0


def test_the_command_prices_the_window_and_refuses_a_bad_window_or_client() -> None:
    import io

    from tpudeploy.planner import price_table
    from tpudeploy.platform import parse_config

    cfg = parse_config({"access": {"clients": ["planner", "ci"]}}, source="test")
    asked: list[int] = []

    def read_logs(seconds: int) -> list[usage.ReplicaLog]:
        asked.append(seconds)
        now = datetime.datetime.now(datetime.UTC)
        start = now - datetime.timedelta(hours=2)
        at = now - datetime.timedelta(minutes=1)
        return [usage.ReplicaLog("n", start, [_line("ci", 200, 2.0, at=at, out=40)], 1)]

    out = io.StringIO()
    assert (
        usage.command(cfg, since="1h", client="", model="spot", read_logs=read_logs, out=out) == 0
    )
    assert asked == [3600]
    rate = price_table(cfg).rate("spot")
    text = out.getvalue()
    assert f"1.00 chip-hours x ${rate:.4f} (spot $/chip-hour, us-west4)" in text
    assert "| ci " in text and "100.0%" in text
    with pytest.raises(usage.UsageError, match="SINCE"):
        usage.command(cfg, since="soon", client="", model="spot", read_logs=read_logs, out=out)
    with pytest.raises(usage.UsageError, match=r"CLIENT='coder' is not one of .*'planner', 'ci'"):
        usage.command(cfg, since="1h", client="coder", model="spot", read_logs=read_logs, out=out)
