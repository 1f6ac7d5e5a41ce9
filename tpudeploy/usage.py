"""`make usage`: each client's requests, errors, latency, output tokens and share of the chips'
cost in a window, from the front door's access log (templates/nginx.conf.j2, one JSON line per
request; its fields and reader are tpudeploy/frontdoor_log.py's). Only requests to the API
(/v1) count: /health checks and metric scrapes carry no key and take no model time.

Cost: the chips cost what they cost whether or not a request runs, so the window's whole
chip-hours are shared out, by each client's busy seconds (the sum of its requests' durations:
every request has one, token counts only when the response carried `usage`). The clients' shares
add up to the chips' cost; with no request in the window it is reported as idle. Where the log
comes from (a node's proxy container, GKE's replicas) is the platform's (Platform.access_logs).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from tpudeploy import frontdoor_log
from tpudeploy.config import DeployConfig
from tpudeploy.durations import DurationError, parse_duration
from tpudeploy.errors import UserError
from tpudeploy.planner import price_table
from tpudeploy.planner.tables import _table as table

NO_KEY = "(no key)"


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    """One front door's log lines and when it started (its container or pod)."""

    name: str
    started: datetime.datetime
    lines: Sequence[str]
    chips: int


@dataclass(frozen=True, slots=True)
class Request:
    time: datetime.datetime
    client: str
    status: int
    seconds: float
    output_tokens: int | None
    prompt_tokens: int | None


def parse_line(line: str) -> Request | None:
    """A request to the API (/v1) from one access-log line (tpudeploy/frontdoor_log.py); None
    for /health checks and metric scrapes (no key, no model time). Raises
    frontdoor_log.AccessLogError for a line that is no access-log line (nginx's error log, a
    line cut short)."""
    data = frontdoor_log.parse_line(line)
    path = str(data["path"])
    if not (path == "/v1" or path.startswith("/v1/")):
        return None
    try:
        when = datetime.datetime.fromisoformat(str(data["time"]))
    except ValueError:
        raise frontdoor_log.AccessLogError("field time is not ISO 8601") from None
    client = str(data["client"])
    out, prompt = data["completion_tokens"], data["prompt_tokens"]
    return Request(
        time=when if when.tzinfo else when.replace(tzinfo=datetime.UTC),
        client=client if client and client != "-" else NO_KEY,
        status=int(str(data["status"])),
        seconds=float(str(data["request_time"])),
        output_tokens=out if isinstance(out, int) else None,
        prompt_tokens=prompt if isinstance(prompt, int) else None,
    )


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class ClientUsage:
    client: str
    seconds: list[float] = field(default_factory=list)
    errors: int = 0
    limited: int = 0
    output_tokens: int = 0
    with_usage: int = 0

    @property
    def requests(self) -> int:
        return len(self.seconds)

    @property
    def busy_s(self) -> float:
        return sum(self.seconds)


@dataclass(frozen=True, slots=True)
class Usage:
    since: datetime.datetime
    now: datetime.datetime
    clients: tuple[ClientUsage, ...]
    chip_hours: float
    rate: float
    unparsed: int

    @property
    def cost(self) -> float:
        return self.chip_hours * self.rate

    def share(self, client: ClientUsage) -> float:
        total = sum(c.busy_s for c in self.clients)
        return client.busy_s / total if total > 0 else 0.0


def tally(
    replicas: Iterable[ReplicaLog],
    *,
    since: datetime.datetime,
    now: datetime.datetime,
    rate: float,
    client: str | None = None,
) -> Usage:
    """The window [since, now]: each replica's chip-hours from its start (or `since`) to `now`,
    and every request logged in the window, by client."""
    by_client: dict[str, ClientUsage] = {}
    chip_hours = 0.0
    unparsed = 0
    for replica in replicas:
        start = max(replica.started, since)
        chip_hours += max(0.0, (now - start).total_seconds()) / 3600 * replica.chips
        for line in replica.lines:
            if not line.strip():
                continue
            try:
                request = parse_line(line)
            except frontdoor_log.AccessLogError:
                unparsed += 1
                continue
            if request is None:
                continue
            if not since <= request.time <= now:
                continue
            usage = by_client.setdefault(request.client, ClientUsage(request.client))
            usage.seconds.append(request.seconds)
            usage.errors += request.status >= 400
            usage.limited += request.status == 429
            if request.output_tokens is not None:
                usage.output_tokens += request.output_tokens
                usage.with_usage += 1
    rows = tuple(sorted(by_client.values(), key=lambda c: (-c.busy_s, c.client)))
    if client is not None:
        rows = tuple(c for c in rows if c.client == client)
    return Usage(since, now, rows, chip_hours, rate, unparsed)


def report(usage: Usage, *, pricing: str) -> str:
    """The table `make usage` prints, and what its numbers mean."""
    span = usage.now - usage.since
    head = (
        f"Usage from {usage.since:%Y-%m-%d %H:%M} to {usage.now:%Y-%m-%d %H:%M} UTC "
        f"({span.total_seconds() / 3600:.1f} h): {usage.chip_hours:.2f} chip-hours x "
        f"${usage.rate:.4f} ({pricing}) = ${usage.cost:.2f}"
    )
    if not usage.clients:
        return f"{head}\nno request in the window: the ${usage.cost:.2f} was idle time."
    rows = []
    for c in usage.clients:
        share = usage.share(c)
        tokens = f"{c.output_tokens:,} ({c.with_usage}/{c.requests})" if c.with_usage else "-"
        per_m = (
            f"${share * usage.cost / c.output_tokens * 1e6:.3f}"
            if c.output_tokens and c.with_usage == c.requests
            else "-"
        )
        rows.append(
            (
                c.client,
                f"{c.requests:,}",
                f"{c.errors:,} ({c.limited:,} x 429)",
                f"{percentile(c.seconds, 50):.2f}",
                f"{percentile(c.seconds, 95):.2f}",
                tokens,
                f"{share:.1%}",
                f"${share * usage.cost:.2f}",
                per_m,
            )
        )
    lines = [
        head,
        table(
            [
                "client",
                "requests",
                "errors",
                "p50 s",
                "p95 s",
                "output tokens (reqs with usage)",
                "busy share",
                "cost",
                "$/M out",
            ],
            rows,
        ),
        "cost: the window's chip-hours shared by each client's busy seconds (the sum of its "
        "requests' durations), idle time included, so the rows add up to what the chips cost.",
        "output tokens: counted only from responses that carry `usage` (every non-streamed "
        "completion; a stream only when the client asks stream_options.include_usage); $/M "
        "out only when every request of the client carried it.",
    ]
    if usage.unparsed:
        lines.append(f"{usage.unparsed} log line(s) were not access-log requests (skipped).")
    return "\n".join(lines)


class UsageError(UserError, ValueError):
    """A window or client `make usage` cannot answer for; the message says the fix."""


def command(
    cfg: DeployConfig,
    *,
    since: str,
    client: str,
    model: str,
    read_logs: Callable[[int], Sequence[ReplicaLog]],
    out: TextIO,
) -> int:
    """`make usage SINCE=... CLIENT=...`: `read_logs(seconds)` is the platform's
    (Platform.access_logs), `model` the provisioning model its chip-hours are priced at."""
    try:
        since_s = parse_duration(since, name="SINCE")
    except DurationError as exc:
        raise UsageError(str(exc)) from None
    if client and client not in cfg.access.clients:
        raise UsageError(
            f"CLIENT={client!r} is not one of [access] clients {list(cfg.access.clients)}: "
            "name one of them, or leave CLIENT out for all"
        )
    rate = price_table(cfg).rate(model)
    now = datetime.datetime.now(datetime.UTC)
    found = tally(
        read_logs(since_s),
        since=now - datetime.timedelta(seconds=since_s),
        now=now,
        rate=rate,
        client=client or None,
    )
    print(report(found, pricing=f"{model} $/chip-hour, {cfg.effective_region}"), file=out)
    return 0
