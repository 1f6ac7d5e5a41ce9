"""The rehearsal's keys stage (issue 37), its parts on their own and fast: the fake vLLM's slow
stream, the keys read back from a client's secret, the two clients of the rehearsal's config,
and BootSandbox.stop() leaving no process behind (the key poller runs for real there)."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.rehearsal.test_rehearsal_parts import MODEL, free_port, start_vllm, wait_for
from tools.rehearsal import sandbox
from tools.rehearsal.fake_vllm import STREAM_SECONDS_PER_TOKEN
from tools.rehearsal.keys_stage import current_keys
from tools.rehearsal.sandbox import BootSandbox
from tools.rehearsal.scenarios import StageFailure
from tools.rehearsal.scratch import REHEARSAL_CLIENTS, write_config
from tpudeploy.config import load_config

# Built at run time, 43 URL-safe characters each (the shape make api-key writes).
NEW, OLD = ("N" * 40 + "new", "O" * 40 + "old")


def read_stream(port: int, body: dict[str, object]) -> tuple[int, list[tuple[float, bytes]]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body))
        response = conn.getresponse()
        lines = []
        while line := response.readline():
            if line.strip():
                lines.append((time.monotonic(), line.strip()))
        return response.status, lines
    finally:
        conn.close()


def test_fake_vllm_streams_slowly_and_ends_with_done(tmp_path: Path) -> None:
    token = "hf_" + "unitTestTokenNotReal"
    port = free_port()
    server = start_vllm(port, {"HF_TOKEN": token}, token)
    try:
        wait_for(port)
        ask = {"model": MODEL, "messages": [{"role": "user", "content": "Say hi."}]}
        status, lines = read_stream(
            port, {**ask, "stream": True, "max_tokens": 5, "stream_options": {"include_usage": 1}}
        )
        assert status == 200
        assert lines[-1][1] == b"data: [DONE]"
        events = [json.loads(line[6:]) for _, line in lines[:-1]]
        assert all(line.startswith(b"data: {") for _, line in lines[:-1])
        tokens = [e for e in events if e["choices"] and e["choices"][0]["delta"].get("content")]
        assert len(tokens) == 5
        assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "stop"
        assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 5
        # Slow on purpose: the five tokens span at least four of the fake's intervals.
        first, last = lines[1][0], lines[5][0]
        assert last - first >= 4 * STREAM_SECONDS_PER_TOKEN * 0.9
        # Without stream_options.include_usage, no usage chunk (as vLLM).
        status, lines = read_stream(port, {**ask, "stream": True, "max_tokens": 1})
        assert status == 200 and lines[-1][1] == b"data: [DONE]"
        assert all(b'"usage"' not in line for _, line in lines)
        # Not streamed: one JSON answer, as before.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/chat/completions", json.dumps(ask))
        assert json.loads(conn.getresponse().read())["object"] == "chat.completion"
        conn.close()
    finally:
        server.kill()
        server.wait()


def test_current_keys_reads_the_latest_version() -> None:
    assert current_keys([]) == []
    assert current_keys([OLD.encode()]) == [OLD]
    rotated = f"{NEW}\n{OLD} 2026-12-03T08:00:00Z".encode()
    assert current_keys([OLD.encode(), rotated]) == [NEW, OLD]
    assert current_keys([rotated, NEW.encode()]) == [NEW]
    with pytest.raises(StageFailure) as failure:
        current_keys([b"not a key"])
    assert "not a key" not in str(failure.value).split(":", 1)[0]


def test_the_rehearsals_config_names_two_clients_with_their_own_secrets(tmp_path: Path) -> None:
    path = write_config(tmp_path, provisioning="flex-start", port=18000, proxy_port=18443)
    cfg = load_config(path)
    assert cfg.access.clients == REHEARSAL_CLIENTS
    ids = cfg.client_key_secret_ids
    assert len(ids) == 2 and len(set(ids.values())) == 2


def _started(stub_dir: Path, name: str, script: str) -> subprocess.Popen[bytes]:
    """A process group of its own, recorded as the stand-ins record what they start. It is
    returned once the script says it is ready (a line on stdout): on a loaded machine a fixed
    sleep could end before the SIGTERM handler is installed or the child started."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    with proc.stdout:  # nothing more is written to it
        assert proc.stdout.readline() == b"ready\n"
    state = stub_dir / "state.json"
    pids = json.loads(state.read_text())["pids"] if state.exists() else {}
    state.write_text(json.dumps({"pids": {**pids, name: proc.pid}}))
    return proc


def test_stop_leaves_no_process_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "STOP_GRACE_SECONDS", 1.0)
    box = BootSandbox(tmp_path / "node")
    # A unit with a child in its process group (the poller's sleep), and one that ignores
    # SIGTERM: stop() names the second and kills it.
    ready = "print('ready', flush=True); time.sleep(60)"
    child = f"import subprocess, time; subprocess.Popen(['sleep', '60']); {ready}"
    deaf = f"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); {ready}"
    polite = _started(box.stub_dir, "unit:poller", child)
    stubborn = _started(box.stub_dir, "unit:deaf", deaf)
    assert sandbox._group_alive(polite.pid) and sandbox._group_alive(stubborn.pid)
    assert box.stop() == ["unit:deaf"]
    assert polite.wait(timeout=5) == -signal.SIGTERM
    assert stubborn.wait(timeout=5) == -signal.SIGKILL
    # The group's other member (the sleep) went with its leader.
    assert not sandbox._group_alive(polite.pid) and not sandbox._group_alive(stubborn.pid)
    assert not box.run_root.exists()
    # A second stop (the rehearsal's last resort) finds nothing left.
    assert box.stop() == []
