"""`python -m tpudeploy.tpuvm.queued_resource create|delete|status`, as the Terraform provisioners
call it: the spec JSON from $TPUDEPLOY_QR_SPEC or --spec-file."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from tpudeploy.gcp.api_errors import Interrupted, QueuedResourceError
from tpudeploy.tpuvm.queued_resource.client import (
    DEFAULT_CREATE_TIMEOUT,
    DEFAULT_DELETE_TIMEOUT,
    DEFAULT_POLL,
    QueuedResourceClient,
    format_status,
)
from tpudeploy.tpuvm.queued_resource.spec import QueuedResourceSpec

SPEC_ENV = "TPUDEPLOY_QR_SPEC"
# Seconds between polls, for every command (the rehearsal and tests poll faster).
POLL_ENV = "TPUDEPLOY_QR_POLL_SECONDS"


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _load_spec(spec_file: str | None) -> QueuedResourceSpec:
    if spec_file:
        try:
            with open(spec_file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise QueuedResourceError(f"cannot read --spec-file {spec_file}: {exc}") from None
    else:
        text = os.environ.get(SPEC_ENV, "")
        if not text.strip():
            raise QueuedResourceError(
                f"no spec: set {SPEC_ENV} to the spec JSON (the Terraform provisioner does) "
                "or pass --spec-file PATH"
            )
    return QueuedResourceSpec.from_json(text)


_TERMINATION = (signal.SIGTERM, signal.SIGHUP)


def _raise_on_termination() -> dict[signal.Signals, object]:
    """SIGTERM/SIGHUP (a CI job's timeout) become Interrupted, so a create deletes what it
    requested; returns the handlers they replace."""

    def handler(signum: int, frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    return {sig: signal.signal(sig, handler) for sig in _TERMINATION}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tpudeploy.tpuvm.queued_resource",
        description=f"Flex-start TPU queued resource; spec JSON from ${SPEC_ENV} or --spec-file.",
    )
    parser.add_argument("command", choices=("create", "delete", "status"))
    parser.add_argument("--spec-file", help="read the spec JSON from this file")
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        help=f"seconds to wait (create {DEFAULT_CREATE_TIMEOUT:g}, delete "
        f"{DEFAULT_DELETE_TIMEOUT:g})",
    )
    parser.add_argument(
        "--poll",
        type=_positive_float,
        default=_positive_float(os.environ.get(POLL_ENV) or str(DEFAULT_POLL)),
        help=f"seconds between polls (default {DEFAULT_POLL:g}, or ${POLL_ENV})",
    )
    args = parser.parse_args(argv)
    previous = _raise_on_termination()
    try:
        spec = _load_spec(args.spec_file)
        client = QueuedResourceClient(spec, poll=args.poll)
        if args.command == "create":
            client.create(timeout=args.timeout or DEFAULT_CREATE_TIMEOUT)
        elif args.command == "delete":
            client.delete(timeout=args.timeout or DEFAULT_DELETE_TIMEOUT)
        else:
            print(format_status(client.status()))
    except (QueuedResourceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted):
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # last resort: the CLI promises no tracebacks
        print(f"error: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        # Called in-process (tests), main must not leave its handlers behind.
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
    return 0
