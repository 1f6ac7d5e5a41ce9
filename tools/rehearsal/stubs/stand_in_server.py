"""One long-lived process that answers the stand-in calls of a test session (tests/boot_sandbox.py).

A stand-in started as a Python process of its own costs ~70 ms of CPU (the interpreter and
stand_in.py's imports), and a boot makes ~38 calls. Here both are paid once: each call is a bash
client (stand_in.sh: a few ms) that connects on loopback and sends its pid, name and argv; a fork
of this process runs stand_in.main() with the caller's own argv, environment and working
directory (read from /proc/PID, so exactly what the command was given) and, for the one call
that reads it (`curl -K -`), the stdin the client sent; it sends back the exit code, stderr and
stdout for the client to write. (The caller's stdin cannot be opened through /proc/PID/fd/0
instead: this kernel refuses that for another process's pipe with ENXIO.) The calls.jsonl,
state.json and guest attributes it writes are those of the stand-in run as its own process.

    python3 -S stand_in_server.py     # prints its port, serves until its stdin closes

Stopping when stdin closes ties it to the process that started it: a killed test session leaves
no server behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import selectors
import socket
import sys
import traceback

# Beside this file (run as a script, its folder is on sys.path); not a package mypy resolves.
import stand_in  # type: ignore[import-not-found]


class NoStdin(io.TextIOBase):
    """A call whose stdin the client did not send (stand_in.sh sends it for `curl -K -` only,
    the one stand-in that reads it): reading it is a bug to fix there, not an empty input."""

    def read(self, size: int | None = -1) -> str:
        raise RuntimeError("this stand-in read stdin, which stand_in.sh does not send for it")


def _read_request(conn: socket.socket) -> tuple[int, list[str], str | None]:
    """(pid, [command, args...], stdin or None) from
    `PID\\0NAME\\0HAS_STDIN\\0[STDIN\\0]ARGC\\0ARG\\0...`."""
    data = b""
    while True:
        fields = data.split(b"\0")[:-1]  # complete fields only
        head = 4 if fields[2:3] == [b"1"] else 3
        if len(fields) > head and len(fields) >= head + 1 + int(fields[head]):
            pid, name = int(fields[0]), fields[1]
            stdin = os.fsdecode(fields[3]) if head == 4 else None
            argv = [
                os.fsdecode(f) for f in (name, *fields[head + 1 : head + 1 + int(fields[head])])
            ]
            return pid, argv, stdin
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the stand-in client closed before its request ended")
        data += chunk


def _environment(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        entries = [e for e in fh.read().split(b"\0") if b"=" in e]
    return dict(os.fsdecode(e).split("=", 1) for e in entries)


def handle(conn: socket.socket) -> None:
    """In a forked child: run one stand-in call as the caller, answer `RC OUTLEN\\n ERR \\0 OUT`."""
    pid, argv, stdin = _read_request(conn)
    os.chdir(os.readlink(f"/proc/{pid}/cwd"))
    os.environ.clear()
    os.environ.update(_environment(pid))
    out, err = io.BytesIO(), io.BytesIO()
    sys.stdin = io.StringIO(stdin) if stdin is not None else NoStdin()
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8")
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8")
    sys.argv = argv
    try:
        code = stand_in.main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except Exception:  # a crash reads as it would from the stand-in's own process
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    stdout = out.getvalue()
    conn.sendall(f"{code} {len(stdout)}\n".encode() + err.getvalue() + b"\0" + stdout)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def serve() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))  # loopback only
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing else goes to whoever read the port
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    parent = sys.stdin.fileno()
    events.register(parent, selectors.EVENT_READ)
    while True:
        for key, _ in events.select(timeout=5):
            if key.fileobj == parent:
                if not os.read(parent, 4096):
                    return  # the test session ended
                continue
            conn, _ = listener.accept()
            # One fork per call: concurrent calls (a pipe between two stand-ins) never wait on
            # each other, and each runs with the module's per-call globals of its own.
            if os.fork() == 0:
                listener.close()
                code = 0
                try:
                    handle(conn)
                except BaseException:
                    code = 1
                    traceback.print_exc(file=sys.__stderr__)
                finally:
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
                    os._exit(code)
            conn.close()
        _reap()


if __name__ == "__main__":
    serve()
