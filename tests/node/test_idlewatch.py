"""The idle stop's watcher (tpudeploy/node/idlewatch.py): its decision rules, and a real run on
loopback against a /metrics page, a metadata server and a TPU API that record what they get."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tpudeploy.node import idlewatch
from tpudeploy.node.idlewatch import Reading, Watch, decide, parse_metrics

PINNED = Path(__file__).resolve().parents[2] / "tpudeploy/gke/vllm_metrics.json"

PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="google/gemma-4-E2B-it"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="google/gemma-4-E2B-it"}} {waiting}
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} {stop}
vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {length}
vllm:request_success_created{{engine="0",finished_reason="stop",model_name="m"}} 1.7e9
"""


def page(running: float = 0, waiting: float = 0, stop: float = 0, length: float = 0) -> str:
    return PAGE.format(running=running, waiting=waiting, stop=stop, length=length)


def test_the_counters_watched_are_in_the_pinned_vllm_list() -> None:
    metrics = json.loads(PINNED.read_text())["metrics"]
    assert metrics["vllm:num_requests_running"]["type"] == "gauge"
    assert metrics["vllm:num_requests_waiting"]["type"] == "gauge"
    # A counter's samples carry _total; the pinned list names the metric without it.
    assert idlewatch.FINISHED.removesuffix("_total") in metrics
    assert metrics[idlewatch.FINISHED.removesuffix("_total")]["type"] == "counter"


def test_parse_sums_the_finish_reasons() -> None:
    assert parse_metrics(page(running=2, waiting=1, stop=5, length=3)) == Reading(2, 1, 8)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<html>502 Bad Gateway</html>",
        page().replace("vllm:request_success_total", "vllm:other_total"),
        page().replace("vllm:num_requests_waiting{", "vllm:num_requests_waiting_by_reason{"),
        page(running=float("nan")),
    ],
)
def test_a_page_without_the_counters_is_unreadable(text: str) -> None:
    with pytest.raises(idlewatch.Unreadable):
        parse_metrics(text)


def run(readings: list[Reading | None], stop_after: float = 100, step: float = 30) -> list[str]:
    watch, states = Watch(), []
    for i, reading in enumerate(readings):
        watch, verdict = decide(watch, reading, 1000 + i * step, stop_after)
        states.append(f"{verdict.state}:{int(verdict.idle_s)}")
    return states


IDLE = Reading(0, 0, 7)


def test_counters_still_for_stop_after_stop_the_node() -> None:
    assert run([IDLE] * 5) == ["idle:0", "idle:30", "idle:60", "idle:90", "stop:120"]


def test_a_finished_request_between_readings_restarts_the_clock() -> None:
    moved = Reading(0, 0, 8)
    assert run([IDLE, IDLE, IDLE, moved, moved, moved]) == [
        "idle:0",
        "idle:30",
        "idle:60",
        "busy:0",
        "idle:0",
        "idle:30",
    ]


@pytest.mark.parametrize("busy", [Reading(1, 0, 7), Reading(0, 3, 7)])
def test_a_running_or_waiting_request_is_never_idle(busy: Reading) -> None:
    # A long generation finishes nothing for minutes: running > 0 keeps the node.
    assert run([IDLE, IDLE, IDLE, busy, busy, busy, busy, busy])[3:] == ["busy:0"] * 5


def test_unreadable_counters_never_count_as_idle() -> None:
    # The rule: a node is never stopped because a counter could not be read. Four idle readings
    # with the endpoint down in between would be 150 s of wall time, over stop_after: no stop.
    assert run([IDLE, IDLE, None, IDLE, IDLE, IDLE]) == [
        "idle:0",
        "idle:30",
        "unreadable:0",
        "idle:0",
        "idle:30",
        "idle:60",
    ]
    assert run([None] * 10) == ["unreadable:0"] * 10


def test_a_count_that_moved_while_unreadable_is_busy() -> None:
    assert run([IDLE, None, Reading(0, 0, 9)]) == ["idle:0", "unreadable:0", "busy:0"]


def test_a_counter_reset_is_busy_not_idle() -> None:
    # vLLM restarted (its counters start again at 0): something happened, the clock restarts.
    assert run([Reading(0, 0, 50), Reading(0, 0, 0)]) == ["idle:0", "busy:0"]


def test_the_attribute_says_state_idle_time_and_limit() -> None:
    value = idlewatch.attribute_value(idlewatch.Verdict("idle", 721.9), 1800, 1.7e9)
    assert json.loads(value) == {
        "state": "idle",
        "idle_s": 721,
        "stop_after_s": 1800,
        "at": 1700000000,
    }


# ---- a real run on loopback --------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.metrics = page()
        self.metrics_status = 200
        self.calls: list[tuple[str, str, dict[str, str], str]] = []
        self.delete_status = 200


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    rec = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def _answer(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            rec.calls.append((self.command, self.path, dict(self.headers), body))

        def do_GET(self) -> None:
            self._record()
            if self.path == "/metrics":
                self._answer(rec.metrics_status, rec.metrics)
            elif self.path.endswith("/service-accounts/default/token"):
                self._answer(200, json.dumps({"access_token": "node-token", "expires_in": 3599}))
            else:
                self._answer(404, "")

        def do_PUT(self) -> None:
            self._record()
            self._answer(200, "")

        def do_DELETE(self) -> None:
            self._record()
            self._answer(rec.delete_status, "{}")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", rec
    finally:
        httpd.shutdown()


def watcher(
    base: str,
    rounds: int,
    stop_after: float = 0.3,
    *,
    interval: float = 0.1,
    extra: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """The shipped source, run by python3 as the node runs it (a file, no tpudeploy import);
    `extra`: more of its flags (tests/node/test_idlewatch_soon.py's --boot-log)."""
    return subprocess.run(
        [
            sys.executable,
            idlewatch.__file__,
            "--metrics-url",
            f"{base}/metrics",
            "--metadata-url",
            f"{base}/computeMetadata/v1",
            "--delete-url",
            f"{base}/v2/projects/p/locations/us-west4-a/nodes/n",
            "--stop-after",
            str(stop_after),
            "--interval",
            str(interval),
            "--rounds",
            str(rounds),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_idle_node_deletes_itself_with_its_own_token(server: tuple[str, Recorder]) -> None:
    base, rec = server
    done = watcher(base, rounds=50)
    assert done.returncode == 0, done.stderr
    deletes = [c for c in rec.calls if c[0] == "DELETE"]
    assert [c[1] for c in deletes] == ["/v2/projects/p/locations/us-west4-a/nodes/n"]
    assert deletes[0][2]["Authorization"] == "Bearer node-token"
    states = [json.loads(c[3])["state"] for c in rec.calls if c[0] == "PUT"]
    assert states[0] == "idle" and states[-2:] == ["stop", "stopping"]
    assert all("tpudeploy/idle" in c[1] for c in rec.calls if c[0] == "PUT")
    assert "node-token" not in done.stderr


def test_a_busy_node_is_never_deleted(server: tuple[str, Recorder]) -> None:
    base, rec = server
    rec.metrics = page(running=1)
    done = watcher(base, rounds=8, stop_after=0.2)
    assert done.returncode == 0, done.stderr
    assert not [c for c in rec.calls if c[0] == "DELETE"]


def test_metrics_down_is_never_a_stop(server: tuple[str, Recorder]) -> None:
    base, rec = server
    rec.metrics_status = 503
    done = watcher(base, rounds=8, stop_after=0.2)
    assert not [c for c in rec.calls if c[0] == "DELETE"]
    assert "not counted as idle" in done.stderr


def test_a_refused_delete_keeps_watching(server: tuple[str, Recorder]) -> None:
    base, rec = server
    rec.delete_status = 403
    done = watcher(base, rounds=6, stop_after=0.0)
    assert len([c for c in rec.calls if c[0] == "DELETE"]) == 6
    assert "answered 403" in done.stderr


def test_the_metrics_url_must_be_loopback() -> None:
    done = subprocess.run(
        [
            sys.executable,
            idlewatch.__file__,
            "--metrics-url",
            "http://10.0.0.2:8000/metrics",
            "--metadata-url",
            "x",
            "--delete-url",
            "x",
            "--stop-after",
            "1",
            "--interval",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "loopback" in done.stderr
