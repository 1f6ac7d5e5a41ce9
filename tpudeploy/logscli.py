"""`make logs [SINCE=1h] [WHAT=vllm|frontdoor|boot]`: the deployment's logs from Cloud Logging,
on either platform, with no SSH: one line per entry (time, what, the payload).

The query is the platform's (Platform.log_filter, from the contract in tpudeploy/logsources.py),
read through entries:list page after page (tpudeploy/gcp/logentries.py). The caller needs
logging.logEntries.list on the project (roles/logging.viewer); a 403 says so.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from tpudeploy import errors, logsources
from tpudeploy.config import DeployConfig, config_path, require_project
from tpudeploy.durations import DurationError, parse_duration
from tpudeploy.errors import UserError
from tpudeploy.platform import load_config, platform_for

DEFAULT_SINCE = "1h"


class LogsError(UserError):
    """A bad SINCE or WHAT: the message names the value and the fix."""


def whats(what: str) -> tuple[str, ...]:
    """WHAT= as the kinds of log to read: all of them when empty."""
    if not what:
        return logsources.WHATS
    if what not in logsources.WHATS:
        raise LogsError(
            f"WHAT={what!r} is not a log `make logs` reads: name one of "
            f"{'|'.join(logsources.WHATS)}, or leave WHAT out for all three"
        )
    return (what,)


def since_seconds(since: str) -> int:
    try:
        return parse_duration(since or DEFAULT_SINCE, name="SINCE")
    except DurationError as exc:
        raise LogsError(str(exc)) from None


def _frontdoor(payload: dict[str, Any]) -> str:
    """The access log line (tpudeploy/frontdoor_log.py): who, what answer, where, how many
    tokens; never more than the line itself holds (no key, no prompt)."""
    prompt, output = payload.get("prompt_tokens"), payload.get("completion_tokens")
    tokens = "-" if prompt is None and output is None else f"{prompt}>{output}"
    return (
        f"client={payload.get('client', '?')} status={payload.get('status', '?')} "
        f"{payload.get('method', '')} {payload.get('path', '?')} tokens={tokens} "
        f"{payload.get('request_time', '?')}s"
    )


def _boot(payload: dict[str, Any]) -> str:
    """A boot phase entry, a boot-log check verdict, or a Kubernetes event of the pod."""
    if payload.get("phase") == "bootcheck":
        verdict = "agrees with the planner" if payload.get("ok") is True else "DISAGREES"
        extra = {k: v for k, v in payload.items() if k not in ("phase", "ok")}
        return f"bootcheck {verdict}" + (
            f" {extra}" if extra and payload.get("ok") is not True else ""
        )
    if "phase" in payload:
        return (
            f"phase={payload.get('phase')} event={payload.get('event', '?')} "
            f"elapsed_s={payload.get('elapsed_s', '?')}"
        )
    if "reason" in payload:  # a Kubernetes Event (GKE's events log)
        involved = payload.get("involvedObject") or {}
        return f"{involved.get('name', '?')}: {payload.get('reason')}: {payload.get('message', '')}"
    return " ".join(f"{k}={v}" for k, v in payload.items())


def line(entry: dict[str, Any]) -> str:
    """One entry as one line: time, what, the payload."""
    what = logsources.what_of(entry)
    when = str(entry.get("timestamp", "?"))
    text = entry.get("textPayload")
    payload = entry.get("jsonPayload")
    if isinstance(payload, dict):
        if what == "frontdoor":
            body = _frontdoor(payload)
        elif what == "boot":
            body = _boot(payload)
        else:
            body = str(payload.get("message", payload))
    else:
        body = str(text if text is not None else "")
    return f"{when}  {what:<9}  {' '.join(body.split())}"


def command(
    cfg: DeployConfig,
    project: str,
    *,
    since: str,
    what: str,
    read: Callable[[str, str], Iterable[dict[str, Any]]],
    out: TextIO,
    now: datetime.datetime | None = None,
) -> int:
    """`read(project, filter)` lists the matching entries (tpudeploy.gcp.logentries'), oldest
    first."""
    kinds = whats(what)
    since_s = since_seconds(since)
    moment = now or datetime.datetime.now(datetime.UTC)
    log_filter = platform_for(cfg).log_filter(cfg, project, kinds, now=moment, since_s=since_s)
    count = 0
    for entry in read(project, log_filter):
        print(line(entry), file=out)
        count += 1
    if count == 0:
        print(
            f"no {'/'.join(kinds)} log entries of {cfg.name} in the last {since or DEFAULT_SINCE} "
            f"(project {project}); a longer SINCE, or make status to see whether it runs",
            file=out,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make logs", description=__doc__)
    parser.add_argument("--since", default=DEFAULT_SINCE, help="the window, e.g. 1h, 30m, 2d")
    parser.add_argument("--what", default="", help="|".join(logsources.WHATS) + "; all if empty")
    args = parser.parse_args(argv)

    def run() -> int:
        from tpudeploy.gcp.logentries import list_entries

        cfg = load_config()
        project = require_project(cfg, source=str(config_path()))
        return command(
            cfg, project, since=args.since, what=args.what, read=list_entries, out=sys.stdout
        )

    return errors.run(run)


if __name__ == "__main__":
    sys.exit(main())
