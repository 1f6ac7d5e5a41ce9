"""The report builder against result files in the exact `vllm bench serve --save-result` shape."""

from __future__ import annotations

import json
import re
import statistics
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tpudeploy import seed_sweep
from tpudeploy.bench import __main__ as cli
from tpudeploy.bench.report import (
    ReportError,
    build_report,
    cost_per_million,
    default_kv_pool,
    default_prices,
    kv_status,
    write_report,
)

CONTEXTS = (128, 1024, 8192)
CLIENTS = (1, 16)
REPS = 3
MISSING_CELL = (8192, 16)
NOISY_CELL = (1024, 1)  # throughput varies far more than 10% across repetitions
FAILED_CELL = (8192, 1)  # repetition 2 lost 3 requests
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def result(context: int, clients: int, rep: int) -> dict[str, Any]:
    """One run's saved result; numbers vary by cell and repetition so every median matters."""
    prompts = max(clients * 8, 32)
    tok_s = 120.0 * clients / (1 + context / 2048) * (1 + 0.01 * rep)
    if (context, clients) == NOISY_CELL:
        tok_s = (100.0, 150.0, 60.0)[rep - 1]
    failed = 3 if (context, clients) == FAILED_CELL and rep == 2 else 0
    completed = prompts - failed
    ttft = 15.0 + context / 30 + clients * 4 + rep * 1.5
    tpot = 8.0 + clients * 0.3 + context / 2000 + rep * 0.05
    return {
        "date": f"20260809-12000{rep}",
        "endpoint_type": "openai-chat",
        "backend": "openai-chat",
        "label": None,
        "model_id": "google/gemma-4-E2B-it",
        "tokenizer_id": "google/gemma-4-E2B-it",
        "num_prompts": prompts,
        "tpudeploy_context": str(context),
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": clients,
        "duration": completed * 256 / tok_s,
        "completed": completed,
        "failed": failed,
        "total_input_tokens": completed * (context + 3),
        "total_output_tokens": completed * 256,
        "request_throughput": tok_s / 256,
        "request_goodput": None,
        "output_throughput": tok_s,
        "total_token_throughput": tok_s * (1 + context / 256),
        "max_output_tokens_per_s": tok_s * 1.2,
        "max_concurrent_requests": clients,
        "mean_ttft_ms": ttft * 1.1,
        "median_ttft_ms": ttft,
        "std_ttft_ms": 2.0,
        "p99_ttft_ms": ttft * 2,
        "mean_tpot_ms": tpot * 1.01,
        "median_tpot_ms": tpot,
        "std_tpot_ms": 0.2,
        "p99_tpot_ms": tpot * 1.5,
        "mean_itl_ms": tpot,
        "median_itl_ms": tpot,
        "std_itl_ms": 0.3,
        "p99_itl_ms": tpot * 2,
        "input_lens": [context] * completed,
        "output_lens": [256] * completed,
        "ttfts": [ttft / 1000] * completed,
        "itls": [[tpot / 1000] * 255] * 2,
        "generated_texts": ["hello"] * completed,
        "errors": [""] * completed + ["Bad Gateway"] * failed,
    }


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    for context in CONTEXTS:
        for clients in CLIENTS:
            if (context, clients) == MISSING_CELL:
                continue
            for rep in range(1, REPS + 1):
                name = f"ctx{context}-c{clients}-r{rep}.json"
                (out / name).write_text(json.dumps(result(context, clients, rep)))
                # vLLM also writes a PyTorch-format twin next to each result; it is not a cell.
                (out / name.replace(".json", ".pytorch.json")).write_text("[]")
    settings = {
        "contexts": list(CONTEXTS),
        "clients": list(CLIENTS),
        "repetitions": REPS,
        "output_len": 256,
        "prompts_per_client": 8,
        "min_prompts": 32,
    }
    meta = {"run_id": "t1", "profile": "full", "settings": settings, "base_seed": 5}
    meta["image"] = {"image": "vllm/vllm-tpu:nightly", "image_id": "sha256:ab", "vllm_version": "v"}
    (out / "metadata.json").write_text(json.dumps(meta))
    return out


def table(markdown: str, heading_start: str) -> dict[tuple[int, int], str]:
    """Cells of the first markdown grid table under a heading starting with `heading_start`."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## " + heading_start))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    header = [int(c) for c in rows[0][1:]]
    return {
        (int(row[0].replace(",", "")), clients): text
        for row in rows[2:]
        for clients, text in zip(header, row[1:], strict=True)
    }


def reps(context: int, clients: int) -> list[dict[str, Any]]:
    return [result(context, clients, rep) for rep in range(1, REPS + 1)]


METRIC_VALUES = {
    "Aggregate": lambda r: r["output_throughput"],
    "Median time-to-first-token": lambda r: r["median_ttft_ms"],
    "Per-stream": lambda r: 1000 / r["median_tpot_ms"],
}
SEEDS = {
    "Aggregate": seed_sweep.AGGREGATE_TOK_S,
    "Median time-to-first-token": seed_sweep.MEDIAN_TTFT_MS,
    "Per-stream": seed_sweep.PER_STREAM_TOK_S,
}


@pytest.mark.parametrize("heading", list(METRIC_VALUES))
def test_tables_are_medians_with_sample_cv(results_dir: Path, heading: str) -> None:
    cells = table(build_report(results_dir).markdown, heading)
    assert set(cells) == {(ctx, c) for ctx in CONTEXTS for c in CLIENTS}
    assert cells[MISSING_CELL] == "—"
    for (context, clients), text in cells.items():
        if (context, clients) == MISSING_CELL:
            continue
        values = [METRIC_VALUES[heading](r) for r in reps(context, clients)]
        cv = statistics.stdev(values) / statistics.mean(values)
        assert text.startswith(f"{statistics.median(values):,.1f} ({cv:.1%})"), text
        assert ("*" in text) == (cv > 0.10), text
        assert ("!" in text) == ((context, clients) == FAILED_CELL), text


def test_noisy_and_failed_cells_are_flagged(results_dir: Path) -> None:
    report = build_report(results_dir)
    aggregate = table(report.markdown, "Aggregate")
    assert aggregate[NOISY_CELL].endswith("*")
    assert "!" in aggregate[FAILED_CELL]
    assert any("ctx8192-c1-r2.json" in w and "3 failed" in w for w in report.warnings)
    assert "ctx8192-c1-r2.json" in report.markdown


@pytest.mark.parametrize("heading", list(METRIC_VALUES))
def test_ratio_to_seed(results_dir: Path, heading: str) -> None:
    cells = table(build_report(results_dir).markdown, "Ratio to the seed: " + heading.lower())
    for (context, clients), text in cells.items():
        if (context, clients) == MISSING_CELL:
            assert text == "—"
            continue
        values = [METRIC_VALUES[heading](r) for r in reps(context, clients)]
        ratio = statistics.median(values) / SEEDS[heading][(context, clients)]
        assert text.startswith(f"{ratio:.2f}x"), text


@pytest.mark.parametrize(
    ("tok_s", "spot", "flex", "on_demand"),
    [  # the seed's published cost table
        (1496.5, 0.107, 0.111, 0.223),
        (1258.7, 0.128, 0.132, 0.265),
        (991.0, 0.162, 0.168, 0.336),
        (399.6, 0.402, 0.417, 0.834),
        (123.7, 1.298, 1.347, 2.695),
    ],
)
def test_cost_reproduces_seed_table(
    tok_s: float, spot: float, flex: float, on_demand: float
) -> None:
    prices = seed_sweep.PRICE_PER_CHIP_HOUR
    assert round(cost_per_million(tok_s, prices["spot"]), 3) == spot
    assert round(cost_per_million(tok_s, prices["flex-start"]), 3) == flex
    assert round(cost_per_million(tok_s, prices["on-demand"]), 3) == on_demand


def test_cost_table_per_cell(results_dir: Path) -> None:
    prices = {"spot": 0.5, "flex-start": 0.75}
    markdown = build_report(results_dir, prices=prices).markdown
    rows = {}
    for line in markdown.splitlines():
        match = re.fullmatch(r"\| ([\d,]+) \| (\d+) \| ([\d,.]+) \| (.*) \|", line)
        if match:
            key = (int(match[1].replace(",", "")), int(match[2]))
            rows[key] = [c.strip() for c in match[4].split("|")]
    assert set(rows) == {(ctx, c) for ctx in CONTEXTS for c in CLIENTS} - {MISSING_CELL}
    for (context, clients), costs in rows.items():
        tok_s = statistics.median(r["output_throughput"] for r in reps(context, clients))
        assert costs == [f"${p / (tok_s * 3600) * 1e6:.3f}" for p in prices.values()]


def test_kv_wall_marks(results_dir: Path) -> None:
    pool = seed_sweep.KV_POOL_TOKENS
    safe = round(pool * seed_sweep.SAFE_CLIENTS_X_CONTEXT / seed_sweep.KV_POOL_TOKENS)
    assert safe == 250_000
    assert kv_status(8192, 64, pool=pool, safe=safe) == "over pool"  # 524,288: the seed's wall
    assert kv_status(8192, 32, pool=pool, safe=safe) == "over safe line"  # 262,144
    assert kv_status(1024, 64, pool=pool, safe=safe) == "ok"
    cells = table(build_report(results_dir, kv_pool_tokens=20_000).markdown, "clients x context")
    small_safe = round(20_000 * 250_000 / 321_344)
    for (context, clients), text in cells.items():
        wanted = context * clients
        mark = (
            "over pool" if wanted > 20_000 else "over safe line" if wanted >= small_safe else "ok"
        )
        assert text == f"{wanted:,} {mark}"


def test_defaults_fall_back_to_seed_without_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tpudeploy.planner", types.ModuleType("tpudeploy.planner"))
    assert default_prices()[0] == dict(seed_sweep.PRICE_PER_CHIP_HOUR)
    pool, safe, source = default_kv_pool()
    assert (pool, safe) == (seed_sweep.KV_POOL_TOKENS, seed_sweep.SAFE_CLIENTS_X_CONTEXT)
    assert "fallback" in source


def test_planner_defaults_agree_with_the_seed() -> None:
    prices, source = default_prices()
    assert prices == dict(seed_sweep.PRICE_PER_CHIP_HOUR)
    assert source.startswith("tpudeploy.planner")
    pool, safe, _ = default_kv_pool()
    # The planner derives the pool from geometry; the seed measured 321,344 (5,021 blocks of 64).
    assert abs(pool - seed_sweep.KV_POOL_TOKENS) <= 4 * 64
    assert abs(safe - seed_sweep.SAFE_CLIENTS_X_CONTEXT) / seed_sweep.SAFE_CLIENTS_X_CONTEXT < 0.01


def test_write_report_makes_markdown_and_pngs(results_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report, paths = write_report(results_dir, out)
    assert (out / "report.md").read_text() == report.markdown + "\n"
    pngs = [p for p in paths if p.suffix == ".png"]
    assert {p.name for p in pngs} >= {"throughput.png", "ttft.png"}
    for png in pngs:
        data = png.read_bytes()
        assert len(data) > 1000 and data.startswith(PNG_SIGNATURE)
        assert f"]({png.name})" in report.markdown


def test_cli_report_prints_markdown(
    results_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    assert cli.main(["report", str(results_dir), "--out", str(out), "--price", "spot=0.5"]) == 0
    printed = capsys.readouterr().out
    assert printed == (out / "report.md").read_text()
    assert "| spot ($0.5000/h) |" in printed


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", ["not readable JSON"]),
        (json.dumps({"completed": 1}), ["missing", "output_throughput", "median_ttft_ms"]),
        (json.dumps({**result(128, 1, 1), "max_concurrency": 4}), ["max_concurrency is 4"]),
        (json.dumps({**result(128, 1, 1), "output_throughput": "fast"}), ["not a number"]),
    ],
)
def test_bad_result_file_is_one_clear_error(
    results_dir: Path, capsys: pytest.CaptureFixture[str], content: str, words: list[str]
) -> None:
    (results_dir / "ctx128-c1-r1.json").write_text(content)
    with pytest.raises(ReportError) as err:
        build_report(results_dir)
    assert "ctx128-c1-r1.json" in str(err.value)
    for word in words:
        assert word in str(err.value)
    assert cli.main(["report", str(results_dir)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err


def test_empty_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="run make bench first"):
        build_report(tmp_path)


def test_report_without_metadata_uses_measured_grid(results_dir: Path) -> None:
    (results_dir / "metadata.json").unlink()
    report = build_report(results_dir)
    assert report.contexts == CONTEXTS and report.clients == CLIENTS
    assert table(report.markdown, "Aggregate")[MISSING_CELL] == "—"


def test_cli_report_sizes_pool_from_config(
    results_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tpudeploy.planner import kv_pool

    config = tmp_path / "deploy.toml"
    config.write_text("[vllm]\nmax_model_len = 16384\ngpu_memory_utilization = 0.9\n")
    assert cli.main(["report", str(results_dir), "--config", str(config)]) == 0
    expected = kv_pool(max_model_len=16384, gpu_memory_utilization=0.9)
    assert f"Pool {expected.tokens:,} tokens; safe line {expected.safe_tokens:,}" in (
        capsys.readouterr().out
    )


def test_missing_results_dir_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ReportError, match="no such directory"):
        write_report(missing, tmp_path / "out")
    assert not missing.exists() and not (tmp_path / "out").exists()
