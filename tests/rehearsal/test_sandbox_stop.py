"""BootSandbox.stop(): a VM is gone once. A second stop (the lifecycle's destroy, then its
`finally`; the preemption, then the next boot) must not signal the process groups the first
stop ended: their ids are free again, and another process may lead a group with the same id."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tools.rehearsal.sandbox import BootSandbox


def _group_leader() -> subprocess.Popen[bytes]:
    """A process leading its own group, as the stand-in's containers and units do."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )


def _record(sandbox: BootSandbox, pids: dict[str, int]) -> None:
    (sandbox.stub_dir / "state.json").write_text(json.dumps({"pids": pids}))


def test_a_second_stop_signals_nothing(tmp_path: Path) -> None:
    sandbox = BootSandbox(tmp_path / "node")
    vllm = _group_leader()
    _record(sandbox, {"vllm": vllm.pid})
    assert sandbox.stop() == []
    assert vllm.wait(timeout=10) == -signal.SIGTERM
    # The id is reused (simulated: the stand-in's state still names a group, now another
    # process's). The VM is already gone: nothing of it may be signalled again.
    stranger = _group_leader()
    try:
        _record(sandbox, {"vllm": stranger.pid})
        assert sandbox.stop() == []
        assert stranger.poll() is None, "a second stop signalled a process the VM never ran"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(stranger.pid, signal.SIGKILL)
        stranger.wait(timeout=10)
    assert not sandbox.run_root.exists()
