"""The idle stop's watcher (issue 39): a TPU VM that stops its own billing when the agents stop.

Runs on the node's host as root, started by the startup script once the node is ready (so a boot,
however long, never counts as idleness), as a transient systemd service of its own. Standard
library only, imports nothing from tpudeploy, shipped as this file's source (tpudeploy/render.py
reads it) and imported by the tests.

Every interval it reads vLLM's own counters on loopback (/metrics on vLLM's port, names checked
against tpudeploy/gke/vllm_metrics.json, vLLM 0.33.0): the gauges `vllm:num_requests_running`
and `vllm:num_requests_waiting`, and the counter `vllm:request_success` (Prometheus exposes it
as `vllm:request_success_total`, one series per finish reason). The node is busy while a request
runs or waits, or when the finished count moved since the last reading; it is idle otherwise.
Every request an agent sends passes the front door to vLLM, so vLLM's counters see it; a request
the front door refuses (a bad key) never reaches vLLM and does not keep the node up.

The rules (decide()):

- busy: the idle clock restarts;
- idle: the idle clock runs from the first idle reading; after stop_after the node deletes
  itself (the TPU API's nodes.delete on its own name, as its own account: stacks/deadline_job.py
  grants that account the deployment's stop role until the deadline);
- unreadable (vLLM restarting, /metrics down, a line that does not parse): never counted as idle.
  The idle clock restarts at the next good reading: a node is never stopped because a counter
  could not be read. The deadline job still ends the run.
- a counter that went down (vLLM restarted): busy (it served or restarted; either way not idle).

It publishes what it sees as the guest attribute tpudeploy/idle (JSON: state, idle_s,
stop_after_s), which `make status` reads without SSH ("idle for 12 min, stops at 30"), and,
warn_before(stop_after) ahead of the stop, writes one "stops soon" entry to the boot log (the log
contract's names: tpudeploy/logsources.py IDLE_PHASE, STOPS_SOON_EVENT, STOPS_AT_FIELD), on
which the deployment's alert fires (tpudeploy/stopsoon.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
# A Prometheus counter's samples carry the _total suffix (the text exposition format).
FINISHED = "vllm:request_success_total"
# A sample line: name, optional {labels}, value (and an optional timestamp).
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+\S+)?$")
GUEST_ATTRIBUTE = "idle"
# Each request has a time limit: a server that stops answering must not stop the watcher.
TIMEOUT_S = 10


class Unreadable(ValueError):
    """The counters could not be read or parsed; the message says which."""


@dataclass(frozen=True)
class Reading:
    running: float
    waiting: float
    finished: float


def parse_metrics(text: str) -> Reading:
    """vLLM's three counters from a /metrics page; Unreadable when one is missing: a page
    without them says nothing about idleness."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None or m.group(1) not in (RUNNING, WAITING, FINISHED):
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            raise Unreadable(f"{m.group(1)} has the value {m.group(3)!r}") from None
        if value != value:  # NaN
            raise Unreadable(f"{m.group(1)} is NaN")
        totals[m.group(1)] = totals.get(m.group(1), 0.0) + value
    missing = [name for name in (RUNNING, WAITING, FINISHED) if name not in totals]
    if missing:
        raise Unreadable(f"/metrics has no {', '.join(missing)}")
    return Reading(totals[RUNNING], totals[WAITING], totals[FINISHED])


@dataclass(frozen=True)
class Watch:
    """What the watcher remembers between readings."""

    idle_since: float | None = None  # monotonic seconds; None: not idle (or not known to be)
    finished: float | None = None  # the last good reading's finished count


@dataclass(frozen=True)
class Verdict:
    state: str  # "busy", "idle", "unreadable" or "stop"
    idle_s: float  # how long the node has been idle (0 unless idle or stop)
    why: str = ""


def decide(
    watch: Watch, reading: Reading | None, now: float, stop_after: float
) -> tuple[Watch, Verdict]:
    """The next state and what to do, from one reading (None: the counters were unreadable)."""
    if reading is None:
        # Not idle: unknown. Forget the idle clock, keep the last count (a counter that moved
        # while unreadable still shows as busy at the next reading).
        return Watch(None, watch.finished), Verdict("unreadable", 0.0)
    moved = watch.finished is not None and reading.finished != watch.finished
    if reading.running > 0 or reading.waiting > 0 or moved:
        return Watch(None, reading.finished), Verdict("busy", 0.0)
    since = watch.idle_since if watch.idle_since is not None else now
    idle_s = max(0.0, now - since)
    state = "stop" if idle_s >= stop_after else "idle"
    return Watch(since, reading.finished), Verdict(state, idle_s)


def attribute_value(verdict: Verdict, stop_after: float, at: float) -> str:
    """The guest attribute's JSON (`at`: wall-clock seconds, for a reader judging its age)."""
    return json.dumps(
        {
            "state": verdict.state,
            "idle_s": int(verdict.idle_s),
            "stop_after_s": int(stop_after),
            "at": int(at),
        },
        separators=(",", ":"),
    )


# Warn this long ahead of the stop: a sixth of stop_after, at most 5 minutes. Long enough for
# the entry to reach Cloud Logging, the alert to fire and someone to send one request (which
# restarts the idle clock); short enough that the warning means the stop (the shortest
# stop_after, 15 min, warns at 12.5 min; the default reading interval, 60 s, fits twice).
WARN_MAX_S = 300.0


def warn_before(stop_after: float) -> float:
    return min(WARN_MAX_S, stop_after / 6)


def soon_entry(verdict: Verdict, stop_after: float, at: float) -> dict[str, object] | None:
    """The boot log's "stops soon" entry when an idle verdict is within warn_before of the stop
    (`at`: wall-clock seconds); None otherwise. The caller writes it once per idle spell."""
    if verdict.state != "idle" or verdict.idle_s < stop_after - warn_before(stop_after):
        return None
    stops = datetime.datetime.fromtimestamp(at + stop_after - verdict.idle_s, datetime.UTC)
    return {
        "phase": "idle",
        "event": "stops-soon",
        "elapsed_s": int(verdict.idle_s),
        "stop_after_s": int(stop_after),
        "stops_at": stops.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


# ---- the node's side: loopback reads, the metadata server, the TPU API ----------------------


def _request(
    url: str,
    *,
    method: str = "GET",
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> bytes:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{url!r} is not an http(s) URL")
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})  # noqa: S310
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310
        return bytes(response.read())


def read_counters(metrics_url: str) -> Reading | None:
    try:
        return parse_metrics(_request(metrics_url).decode("utf-8", "replace"))
    except (OSError, urllib.error.URLError, Unreadable) as exc:
        log(f"counters unreadable ({exc}): not counted as idle")
        return None


def publish(metadata: str, value: str) -> None:
    try:
        _request(
            f"{metadata}/instance/guest-attributes/tpudeploy/{GUEST_ATTRIBUTE}",
            method="PUT",
            data=value.encode(),
            headers={"Metadata-Flavor": "Google"},
        )
    except (OSError, urllib.error.URLError) as exc:
        log(f"could not set guest attribute tpudeploy/{GUEST_ATTRIBUTE}: {exc}")


def stop(metadata: str, delete_url: str) -> bool:
    """DELETE the node as its own account (the token never leaves this process)."""
    try:
        token = json.loads(
            _request(
                f"{metadata}/instance/service-accounts/default/token",
                headers={"Metadata-Flavor": "Google"},
            )
        )["access_token"]
        _request(delete_url, method="DELETE", headers={"Authorization": f"Bearer {token}"})
    except urllib.error.HTTPError as exc:
        log(f"DELETE {delete_url} answered {exc.code}: the node keeps running until its deadline")
        return False
    except (OSError, urllib.error.URLError, KeyError, ValueError) as exc:
        log(f"could not DELETE {delete_url} ({exc}): retrying at the next reading")
        return False
    log(f"idle stop: DELETE {delete_url} accepted")
    return True


def write_entry(path: str, entry: dict[str, object]) -> None:
    """One JSON line appended to the boot log (the Ops Agent ships it); never fatal."""
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry, separators=(",", ":")) + "\n")
    except OSError as exc:
        log(f"could not write to {path}: {exc}")


def log(message: str) -> None:
    print(f"tpudeploy-idlewatch: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="idlewatch")
    parser.add_argument("--metrics-url", required=True)
    parser.add_argument("--metadata-url", required=True)
    parser.add_argument("--delete-url", required=True)
    parser.add_argument("--stop-after", type=float, required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--rounds", type=int, default=0, help="0: forever (tests: a few)")
    parser.add_argument("--boot-log", default="", help="where the stops-soon entry goes")
    args = parser.parse_args(argv)
    if not args.metrics_url.startswith(("http://127.0.0.1:", "http://[::1]:")):
        parser.error("--metrics-url must be on loopback")
    watch, n, warned = Watch(), 0, None
    every, after = f"{args.interval:g}s", f"{args.stop_after:g}s"
    log(f"watching {args.metrics_url} every {every}; stops after {after} idle")
    while args.rounds == 0 or n < args.rounds:
        watch, verdict = decide(
            watch, read_counters(args.metrics_url), time.monotonic(), args.stop_after
        )
        publish(args.metadata_url, attribute_value(verdict, args.stop_after, time.time()))
        entry = soon_entry(verdict, args.stop_after, time.time())
        if entry is not None and args.boot_log and warned != watch.idle_since:
            write_entry(args.boot_log, entry)
            warned = watch.idle_since  # once per idle spell
        if verdict.state == "stop" and stop(args.metadata_url, args.delete_url):
            publish(
                args.metadata_url,
                attribute_value(Verdict("stopping", verdict.idle_s), args.stop_after, time.time()),
            )
            return 0
        n += 1
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
