"""The idle rehearsal's parts (issue 39): the stand-in engine's /metrics, read by the node's
watcher exactly as it reads vLLM's, moves with the requests it serves; the stand-in systemd-run
passes the watcher's own options to the watcher, as systemd-run does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.rehearsal.test_rehearsal_parts import MODEL, free_port, post, start_vllm, wait_for
from tools.rehearsal.sandbox import STAND_IN
from tpudeploy.node.idlewatch import Reading, parse_metrics


def metrics(port: int) -> Reading:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return parse_metrics(answer.read().decode())


def test_the_stand_in_engines_counters_move_with_requests() -> None:
    token = "hf_" + "unitTestTokenNotReal"
    port = free_port()
    server = start_vllm(port, {"HF_TOKEN": token}, token)
    try:
        wait_for(port)
        assert metrics(port) == Reading(0, 0, 0)
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "Say hi."}]}
        assert post(port, chat)[0] == 200
        assert post(port, chat)[0] == 200
        assert metrics(port) == Reading(0, 0, 2)
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_systemd_run_passes_the_commands_own_options_to_it(tmp_path: Path) -> None:
    """systemd-run's options come first; the command's (the watcher's --metrics-url ...) are
    its own. The stand-in once took every --option as systemd-run's and ran a URL."""
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "config.json").write_text(json.dumps({"run_units": True}))
    out = tmp_path / "ran.txt"
    done = subprocess.run(
        [
            str(STAND_IN),
            "systemd-run",
            "--unit=u",
            "--property=Restart=on-failure",
            sys.executable,
            "-c",
            f"import sys; open({str(out)!r}, 'w').write(' '.join(sys.argv))",
            "--metrics-url",
            "http://127.0.0.1:1/metrics",
        ],
        env={"PATH": os.environ["PATH"], "STUB_DIR": str(stub)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for _ in range(100):
        if out.exists() and out.read_text():
            break
        time.sleep(0.05)
    assert out.read_text() == "-c --metrics-url http://127.0.0.1:1/metrics"
