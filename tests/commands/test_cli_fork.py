"""tests/cli_fork.py forks commands from an interpreter that imported the CLI: each must give what
a new `python -m tpudeploy` gives, status, stdout and stderr alike, including a traceback."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests import cli_fork

SPOT = 'project = "fork-proj-123"\nprovisioning = "spot"\n'
BAD = 'project = "fork-proj-123"\nprovisioning = "sometimes"\n[vllm]\nmax_model_len = -1\n'


@pytest.mark.parametrize(
    ("args", "config", "stdin"),
    [
        (["check"], SPOT, ""),
        (["check"], BAD, ""),
        (["cost"], SPOT, ""),
        (["plan-scale", "--clients", "64", "--context", "8192"], SPOT, ""),
        (["no-such-command"], SPOT, ""),
        (["--help"], SPOT, ""),
        # Reads its stdin first (the token), then stops for want of credentials.
        (["secret"], SPOT, "hf_" + "ForkTestToken0123456789abcdef"),
    ],
    ids=["check", "refused", "cost", "plan-scale", "unknown", "help", "secret"],
)
def test_a_forked_command_is_what_a_new_interpreter_gives(
    tmp_path: Path, args: list[str], config: str, stdin: str
) -> None:
    (tmp_path / "deploy.toml").write_text(config)
    env = {
        **os.environ,
        "DEPLOY_CONFIG": str(tmp_path / "deploy.toml"),
        "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none.json"),
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
    }
    forked = cli_fork.run(args, env=env, input=stdin, timeout=60)
    fresh = cli_fork.fresh(args, env=env, input=stdin, timeout=60)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(tmp_path: Path) -> None:
    """The child runs the module as `python -m` does: what escapes it is Python's to report.
    With TPUDEPLOY_DEBUG=1 the CLI lets a failure through (a config path that is a directory);
    the frames above the module's differ (the server's, runpy's), the rest may not."""
    (tmp_path / "deploy.toml").mkdir()
    env = {**os.environ, "DEPLOY_CONFIG": str(tmp_path / "deploy.toml"), "TPUDEPLOY_DEBUG": "1"}
    forked = cli_fork.run(["check"], env=env, timeout=60)
    fresh = cli_fork.fresh(["check"], env=env, timeout=60)
    assert forked.returncode == fresh.returncode == 1
    assert forked.stdout == fresh.stdout
    for result in (forked, fresh):
        assert result.stderr.startswith("Traceback (most recent call last):\n")
    last = fresh.stderr.splitlines()[-1]
    assert last.startswith("IsADirectoryError") and forked.stderr.splitlines()[-1] == last
    tail = fresh.stderr[fresh.stderr.index('File "' + str(cli_fork.REPO_ROOT / "tpudeploy")) :]
    assert forked.stderr.endswith(tail)


def test_a_start_up_variable_sends_the_command_to_a_new_interpreter() -> None:
    server = cli_fork._get_server()
    assert server.compatible(dict(os.environ))
    assert not server.compatible({**os.environ, "PYTHONPATH": "/elsewhere"})
    assert not server.compatible({**os.environ, "PYTHONHASHSEED": "7"})


def test_a_closed_server_leaves_no_process_and_no_folder() -> None:
    server = cli_fork._Server()
    folder, proc = Path(server.folder), server.proc
    assert (folder / "socket").exists()
    server.close()
    assert proc.poll() is not None
    assert not folder.exists()


def test_a_forked_runner_reuses_the_server_and_a_dead_owner_ends_it() -> None:
    """mutmut forks the test process per mutant and leaves by os._exit (no atexit): the fork
    must reuse its parent's server, not start one that nothing stops; and a server whose owner
    died that way stops by itself, its folder removed."""
    server = cli_fork._get_server()
    child = os.fork()
    if child == 0:
        same = cli_fork._get_server() is server
        os._exit(0 if same and cli_fork.run(["--help"], timeout=60).returncode == 0 else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # An owner that dies without atexit: its server must not outlive it.
    read, write = os.pipe()
    owner = os.fork()
    if owner == 0:
        os.close(read)
        orphan = cli_fork._Server()
        os.write(write, f"{orphan.proc.pid} {orphan.folder}".encode())
        os._exit(0)
    os.close(write)
    pid_text, folder = os.read(read, 4096).decode().split()
    os.close(read)
    os.waitpid(owner, 0)
    deadline = time.monotonic() + 10
    while Path(folder).exists() or _running(int(pid_text)):
        assert time.monotonic() < deadline, "the orphaned server is still running"
        time.sleep(0.1)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone but for its exit status (its parent, init, reaps it).
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1][0] != "Z"
