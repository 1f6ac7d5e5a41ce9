"""The sweep's per-cell acceptance rate: the cell's own command reads vLLM's spec-decode counters
before and after `vllm bench serve` and merges their growth into the result (run here through
`sh`, against a loopback stand-in for the server's /metrics)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

from tpudeploy.bench import specmetrics
from tpudeploy.bench.commands import Cell, cell_command
from tpudeploy.bench.results import load_results
from tpudeploy.bench.settings import SweepSettings
from tpudeploy.gke.metrics import published

# vLLM's exposition of its two counters (prometheus_client: "_total", one sample per engine).
EXPOSITION = """# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafted}
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} 9
"""


class Counters(BaseHTTPRequestHandler):
    """/metrics: the two counters; /advance: a speculative run moves them (400 drafted, 280
    accepted)."""

    state: ClassVar[dict[str, float]] = {"drafted": 1000.0, "accepted": 700.0}

    def do_GET(self) -> None:
        if self.path == "/advance":
            Counters.state = {"drafted": 1400.0, "accepted": 980.0}
        body = EXPOSITION.format(**self.state).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_the_metric_names_are_the_pinned_vllms() -> None:
    registered = published()
    for name in (specmetrics.DRAFT_METRIC, specmetrics.ACCEPTED_METRIC):
        assert registered.get(name) == "counter", f"{name}: not a counter of the pinned vLLM"


# The stand-in for `vllm bench serve`: writes its result and, as a speculative server's run
# would, moves the counters.
FAKE_BENCH = (
    "import json, sys, urllib.request; urllib.request.urlopen(sys.argv[2]).read(); "
    "json.dump({'output_throughput': 1.0}, open(sys.argv[1], 'w'))"
)


def test_a_cell_records_the_counters_growth(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Counters)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        settings = replace(SweepSettings(), host="127.0.0.1", port=port, spec_metrics=True)
        argv = cell_command(settings, Cell(128, 1, 1, 0), run_id="run", target=None)
        # On the node: `sudo docker exec -i CONTAINER sh -c SCRIPT sh RESULT URL SNIPPET bench...`
        i = argv.index("sh")
        assert argv[i + 1] == "-c" and argv[i + 6] == specmetrics.SNIPPET
        result_file = tmp_path / "ctx128-c1-r1.json"
        # The cell's own script, its result path pointed here and the bench replaced.
        script, url = argv[i + 2], argv[i + 5]
        assert url == f"http://127.0.0.1:{port}/metrics"
        fake = [
            sys.executable,
            "-c",
            FAKE_BENCH,
            str(result_file),
            f"http://127.0.0.1:{port}/advance",
        ]
        done = subprocess.run(
            ["sh", "-c", script.replace("python3", sys.executable), "sh", str(result_file), url,
             specmetrics.SNIPPET, *fake],
            input="the-key\n", capture_output=True, text=True, check=True,
        )  # fmt: skip
        merged = json.loads(done.stdout)
        assert merged["tpudeploy_spec_draft_tokens"] == 400
        assert merged["tpudeploy_spec_accepted_tokens"] == 280
    finally:
        server.shutdown()


def test_a_server_without_speculation_merges_nothing(tmp_path: Path) -> None:
    result_file = tmp_path / "r.json"
    result_file.write_text('{"a": 1}')
    url = "http://127.0.0.1:9/metrics"  # nothing listens: the read fails, nothing is merged
    snippet = specmetrics.SNIPPET
    before = subprocess.run(
        [sys.executable, "-c", snippet, "scrape", url], capture_output=True, text=True
    ).stdout
    assert json.loads(before) == {}
    subprocess.run([sys.executable, "-c", snippet, "merge", str(result_file), url, before])
    assert json.loads(result_file.read_text()) == {"a": 1}


def test_without_speculation_the_cell_command_is_unchanged() -> None:
    argv = cell_command(SweepSettings(), Cell(128, 1, 1, 0), run_id="r", target=None)
    assert specmetrics.SNIPPET not in argv


def test_the_report_reads_the_rate_from_a_result(tmp_path: Path) -> None:
    from tools.tune_example import Effect, record

    rec = record(128, 1, 1, Effect(1.0, 0.0), "arm", 1)
    rec.update({"tpudeploy_spec_draft_tokens": 400, "tpudeploy_spec_accepted_tokens": 280})
    (tmp_path / "ctx128-c1-r1.json").write_text(json.dumps(rec))
    (run,) = load_results(tmp_path).runs
    assert run.spec_drafted == 400 and run.acceptance_rate == 0.7
