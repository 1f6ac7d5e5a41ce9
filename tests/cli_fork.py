"""`python -m tpudeploy ...` for the tests, forked from one interpreter that imported the CLI.

Each `python -m tpudeploy` spends about half a second of CPU importing the CLI (pydantic's model
classes, google-auth, the API clients) before it reads its first argument, and the suite runs
dozens. `run` hands the command to a server (one per pytest worker) that imported
`tpudeploy.cli` once and forks a child per command. The child is a process of its own, with the
caller's argv, environment, working directory, stdin, stdout and stderr, and its own exit status:
it runs the module as `python -m` does (runpy, `__main__`), so what it prints, how it exits and
any traceback are the command's. What it cannot share with a fresh interpreter is what Python
reads only when it starts; `run` sends a command whose environment changes any of those
(STARTUP_ENV) to a real `python -m` instead. tests/commands/test_cli_fork.py checks that both ways
give the same output and status.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Read by the interpreter at start-up only (https://docs.python.org/3/using/cmdline.html,
# "Environment variables"): a forked child keeps the server's values, so a command that sets
# any of them differently runs in a new interpreter.
STARTUP_ENV = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSAFEPATH",
    "PYTHONIOENCODING",
    "PYTHONUTF8",
    "PYTHONHASHSEED",
    "PYTHONWARNINGS",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONNOUSERSITE",
    "PYTHONUNBUFFERED",
    "PYTHONOPTIMIZE",
    "PYTHONDEVMODE",
    "PYTHONFAULTHANDLER",
    "PYTHONTRACEMALLOC",
    "PYTHONINSPECT",
    "PYTHONSTARTUP",
    "PYTHONPYCACHEPREFIX",
    "PYTHONINTMAXSTRDIGITS",
    "PYTHONPLATLIBDIR",
    "PYTHONWARNDEFAULTENCODING",
    "PYTHONNODEBUGRANGES",
    "PYTHONEXECUTABLE",
    "LC_ALL",
    "LC_CTYPE",
    "LANG",
)
MODULES = ("tpudeploy",)

_SERVER = r"""
import array, json, os, runpy, socket, sys

import tpudeploy.cli  # the import every command pays; the children inherit it

import shutil

listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(1)
# Ends with the process that started it, however that one ends (a forked test runner such as
# mutmut's leaves by os._exit, with no atexit): the parent's death re-parents this process.
owner = os.getppid()
listener.settimeout(1)
print("ready", flush=True)
while True:
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        if os.getppid() != owner:
            shutil.rmtree(os.path.dirname(sys.argv[1]), ignore_errors=True)
            raise SystemExit(0)
        continue
    conn.settimeout(None)
    fds = array.array("i")
    msg, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    request = json.loads(msg)
    pid = os.fork()
    if pid == 0:
        listener.close()
        conn.close()
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # `python -m` puts the working directory first on sys.path.
        sys.path[0] = request["cwd"]
        # runpy sets argv[0] to the module's file, as `python -m` does.
        sys.argv = ["-m", *request["args"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        raise SystemExit(0)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    conn.close()
"""


class _Server:
    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="cli-fork-")
        self.path = os.path.join(self.folder, "socket")
        self.env = dict(os.environ)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, self.path],
            cwd=REPO_ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        assert ready == "ready\n", f"the CLI fork server did not start: {ready!r}"
        self.lock = threading.Lock()
        self.owner = os.getpid()
        atexit.register(self.close)

    def close(self) -> None:
        if os.getpid() != self.owner:
            return  # a forked copy: the server is its parent's to stop
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def compatible(self, env: dict[str, str]) -> bool:
        return all(env.get(k) == self.env.get(k) for k in STARTUP_ENV)


_server: _Server | None = None


def _alive(server: _Server) -> bool:
    # Popen.poll answers only in the process that started the server: a forked copy of it (a
    # test runner that forks per test) would read "exited" and start a server of its own.
    try:
        os.kill(server.proc.pid, 0)
    except ProcessLookupError:
        return False
    return os.path.exists(server.path)


def _get_server() -> _Server:
    global _server
    if _server is None or not _alive(_server):
        _server = _Server()
    return _server


def _spawned(
    module: str, args: list[str], cwd: Path, env: dict[str, str], stdin: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    server = _get_server()
    with server.lock:
        child_in, feed = os.pipe()
        out_r, child_out = os.pipe()
        err_r, child_err = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(server.path)
        request = json.dumps({"module": module, "args": args, "cwd": str(cwd), "env": env})
        fds = array.array("i", [child_in, child_out, child_err])
        conn.sendmsg([request.encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
        answer = conn.makefile("r")
        pid = int(answer.readline())
        for fd in (child_in, child_out, child_err):
            os.close(fd)
        collected: dict[int, bytes] = {}

        def drain(fd: int) -> None:
            with os.fdopen(fd, "rb") as stream:
                collected[fd] = stream.read()

        readers = [threading.Thread(target=drain, args=(fd,)) for fd in (out_r, err_r)]
        for reader in readers:
            reader.start()
        # A command that never reads its stdin closes it at exit, as a fresh one does.
        with os.fdopen(feed, "wb") as sink, contextlib.suppress(BrokenPipeError):
            sink.write(stdin.encode())
        conn.settimeout(timeout)
        try:
            code = int(answer.readline())
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired([module, *args], timeout) from None
        finally:
            for reader in readers:
                reader.join(timeout)
            answer.close()
            conn.close()
    argv = [sys.executable, "-m", module, *args]
    return subprocess.CompletedProcess(
        argv, code, collected[out_r].decode(), collected[err_r].decode()
    )


def run(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path = REPO_ROOT,
    input: str = "",
    timeout: float = 120,
    module: str = "tpudeploy",
) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
    input=input, capture_output=True, text=True, timeout=timeout, check=False)` returns."""
    env = dict(os.environ if env is None else env)
    if module in MODULES and Path(cwd) == REPO_ROOT and _get_server().compatible(env):
        return _spawned(module, args, Path(cwd), env, input, timeout)
    return fresh(args, env=env, cwd=cwd, input=input, timeout=timeout, module=module)


def fresh(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path = REPO_ROOT,
    input: str = "",
    timeout: float = 120,
    module: str = "tpudeploy",
) -> subprocess.CompletedProcess[str]:
    """The same command in a new interpreter."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
