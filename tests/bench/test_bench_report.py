"""The report builder against files in the exact `vllm bench serve --save-result` shape.

Records follow vllm/benchmarks/serve.py: setup keys, then each `--metadata KEY=VALUE` pair as a
top-level string, then request_rate / burstiness / max_concurrency and the metrics (per-request
lists dropped without --save-detailed, `latencies` and `queue_times` kept). File names are
either the sweep's (ctx<context>-c<clients>-r<rep>.json) or vLLM's default
({backend}-{rate}qps[-concurrency{N}]-{model}-{date}.json); every expected table value is
recomputed here from the records written.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tpudeploy import benchcli as bench_cli
from tpudeploy import facts
from tpudeploy.bench.cost_kv import cost_per_million, default_kv_pool, default_prices, kv_status
from tpudeploy.bench.report import build_report, write_report
from tpudeploy.bench.results import ReportError, snap_context

MODEL = "google/gemma-4-E2B-it"
CONTEXTS = (128, 1024, 8192)
CLIENTS = (1, 16)
REPS = 3
MISSING_CELL = (8192, 16)
NOISY_CELL = (1024, 1)  # throughput varies far more than 10% across repetitions
FAILED_CELL = (8192, 1)  # repetition 2 lost 3 requests
CONFIG_A = "0123456789abcdef"
CONFIG_B = "fedcba9876543210"
IMAGE = "sha256:" + "ab" * 32
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CELLS = [(ctx, c) for ctx in CONTEXTS for c in CLIENTS if (ctx, c) != MISSING_CELL]

Record = dict[str, Any]


def vllm_date(context: int, clients: int, rep: int, offset: int = 0) -> str:
    """A valid %Y%m%d-%H%M%S that grows with the repetition (later reps are later runs)."""
    return f"20260809-{10 + rep + offset:02d}{clients % 60:02d}{context % 60:02d}"


def record(
    context: int,
    clients: int | None,
    rep: int,
    *,
    pairs: Mapping[str, str] | None = None,
    scale: float = 1.0,
    model: str = MODEL,
    date: str | None = None,
    request_rate: str | float = "inf",
) -> Record:
    """One run as vLLM saves it; numbers vary by cell and repetition so every median matters."""
    c = clients or 1
    prompts = max(c * 8, 32)
    tok_s = 120.0 * c / (1 + context / 2048) * (1 + 0.01 * rep) * scale
    if (context, clients) == NOISY_CELL:
        tok_s = (100.0, 150.0, 60.0)[rep - 1] * scale
    failed = 3 if (context, clients) == FAILED_CELL and rep == 2 else 0
    completed = prompts - failed
    ttft = (15.0 + context / 30 + c * 4 + rep * 1.5) / scale
    tpot = (8.0 + c * 0.3 + context / 2000 + rep * 0.05) / scale
    out: Record = {
        "date": date or vllm_date(context, c, rep),
        "endpoint_type": "openai-chat",
        "backend": "openai-chat",
        "label": None,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": prompts,
    }
    out.update(pairs or {})
    out.update({"request_rate": request_rate, "burstiness": 1.0, "max_concurrency": clients})
    out.update(
        {
            "duration": completed * 256 / tok_s,
            "completed": completed,
            "failed": failed,
            # The random dataset's prompt lengths: --random-input-len, a little jitter per run.
            "total_input_tokens": completed * context + 7 * rep,
            "total_output_tokens": completed * 256,
            "request_throughput": tok_s / 256,
            "request_goodput": None,
            "output_throughput": tok_s,
            "total_token_throughput": tok_s * (1 + context / 256),
            "latencies": [ttft / 1000 + 255 * tpot / 1000] * completed,
            "queue_times": [0.0] * completed,
            "max_output_tokens_per_s": tok_s * 1.2,
            "max_concurrent_requests": c,
            "rtfx": 0.0,
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
        }
    )
    return out


def sweep_pairs(
    context: int,
    clients: int,
    rep: int,
    *,
    config: str | None = CONFIG_A,
    image: str | None = IMAGE,
) -> dict[str, str]:
    """What `make bench` passes as --metadata (commands.bench_argv), as vLLM stores it: strings."""
    pairs = {
        "tpudeploy_context": str(context),
        "tpudeploy_clients": str(clients),
        "tpudeploy_rep": str(rep),
    }
    if config:
        pairs["tpudeploy_config"] = config
    if image:
        pairs["tpudeploy_image"] = image
    return pairs


def vllm_name(rec: Record) -> str:
    """vLLM's default result name (compute_result_filename), request_rate printed as a float."""
    rate = "inf" if rec["request_rate"] == "inf" else float(rec["request_rate"])
    concurrency = "" if rec["max_concurrency"] is None else f"-concurrency{rec['max_concurrency']}"
    model = rec["model_id"].split("/")[-1]
    return f"{rec['backend']}-{rate}qps{concurrency}-{model}-{rec['date']}.json"


def save(directory: Path, name: str, rec: Record) -> None:
    (directory / name).write_text(json.dumps(rec))
    # vLLM writes a PyTorch-benchmark twin next to every result; it is not a run.
    twin = [{"benchmark": {"name": "vLLM benchmark"}, "model": {"name": rec["model_id"]}}]
    (directory / name.replace(".json", ".pytorch.json")).write_text(json.dumps(twin))


def sweep_metadata(directory: Path, *, config: str | None = CONFIG_A) -> None:
    settings = {
        "contexts": list(CONTEXTS),
        "clients": list(CLIENTS),
        "repetitions": REPS,
        "output_len": 256,
        "prompts_per_client": 8,
        "min_prompts": 32,
        "config_hash": config,
    }
    meta = {
        "tool": "tpudeploy.bench",
        "run_id": "t1",
        "profile": "full",
        "settings": settings,
        "base_seed": 5,
        "config_file": "config.toml",
        "image": {"image": "vllm/vllm-tpu:nightly", "image_id": IMAGE, "vllm_version": "v"},
    }
    (directory / "metadata.json").write_text(json.dumps(meta))
    (directory / "config.toml").write_text("[bench]\n")
    (directory / "logs").mkdir()
    (directory / "logs" / "ctx128-c1-r1.log").write_text("benchmark chatter\n")


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    """What `make bench` leaves: the sweep's names, its --metadata pairs, metadata.json, logs/."""
    out = tmp_path / "results"
    out.mkdir()
    for context, clients in CELLS:
        for rep in range(1, REPS + 1):
            rec = record(context, clients, rep, pairs=sweep_pairs(context, clients, rep))
            save(out, f"ctx{context}-c{clients}-r{rep}.json", rec)
    sweep_metadata(out)
    return out


@pytest.fixture
def vllm_dir(tmp_path: Path) -> Path:
    """What a user's own `vllm bench serve --save-result` runs leave: vLLM's names, no pairs."""
    out = tmp_path / "by-hand"
    out.mkdir()
    for context, clients in CELLS:
        for rep in range(1, REPS + 1):
            rec = record(context, clients, rep)
            save(out, vllm_name(rec), rec)
    return out


# --- reading the markdown -------------------------------------------------------------------


def section(markdown: str, heading_start: str) -> list[str]:
    """Lines under the first heading starting with `heading_start` (any level), to the next one."""
    lines = markdown.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.lstrip("#").startswith(" " + heading_start)
    )
    body = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        body.append(line)
    return body


def rows(lines: Iterable[str]) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines if line[:1] == "|"]


def table(markdown: str, heading_start: str) -> dict[tuple[int, int], str]:
    """Cells of the grid table (context rows x clients columns) under a heading."""
    grid = rows(section(markdown, heading_start))
    header = [int(c) for c in grid[0][1:]]
    return {
        (int(row[0].replace(",", "")), clients): text
        for row in grid[2:]
        for clients, text in zip(header, row[1:], strict=True)
    }


def group_markdown(markdown: str, index: int) -> str:
    """The part of a several-group report under '## Group <index> of'."""
    parts = re.split(r"^## Group (\d+) of \d+: .*$", markdown, flags=re.MULTILINE)
    return parts[parts.index(str(index)) + 1].split("\n## ")[0]


METRIC_VALUES: dict[str, Callable[[Record], float]] = {
    "Aggregate": lambda r: r["output_throughput"],
    "Median time-to-first-token": lambda r: r["median_ttft_ms"],
    "Per-stream": lambda r: 1000 / r["median_tpot_ms"],
}
SEEDS = {
    "Aggregate": facts.AGGREGATE_TOK_S,
    "Median time-to-first-token": facts.MEDIAN_TTFT_MS,
    "Per-stream": facts.PER_STREAM_TOK_S,
}


def by_cell(records: Iterable[Record], context_of: Callable[[Record], int]) -> dict[Any, list[Any]]:
    cells: dict[tuple[int, int], list[Record]] = {}
    for rec in records:
        cells.setdefault((context_of(rec), rec["max_concurrency"]), []).append(rec)
    return cells


def check_tables(markdown: str, cells: Mapping[tuple[int, int], list[Record]]) -> None:
    """Every metric table and ratio table recomputed from the records of each cell."""
    for heading, value in METRIC_VALUES.items():
        shown = table(markdown, heading)
        ratios = table(markdown, "Ratio to the build log: " + heading.lower())
        assert {k for k, v in shown.items() if v != "—"} == set(cells), heading
        for key, recs in cells.items():
            values = [value(r) for r in recs]
            median = f"{statistics.median(values):,.1f}"
            if len(values) > 1:
                cv = statistics.stdev(values) / statistics.mean(values)
                assert shown[key].startswith(f"{median} ({cv:.1%})"), key
                assert ("*" in shown[key]) == (cv > 0.10), shown[key]
            else:  # one run: no spread to show
                assert shown[key].split(" [")[0] == median, shown[key]
            failed = any(r["failed"] for r in recs)
            assert ("!" in shown[key]) == failed, shown[key]
            ratio = statistics.median(values) / SEEDS[heading][key]
            assert ratios[key].startswith(f"{ratio:.2f}x"), ratios[key]


def written(directory: Path) -> list[Record]:
    """Every run record in the directory's result files, read back as written."""
    return [
        json.loads(p.read_text())
        for p in directory.glob("*.json")
        if not p.name.endswith(".pytorch.json") and p.name != "metadata.json"
    ]


def sweep_records(directory: Path) -> list[Record]:
    """The records `make bench` wrote (ctx<context>-c<clients>-r<rep>.json), twins left out."""
    names = re.compile(r"ctx\d+-c\d+-r\d+\.json")
    paths = [p for p in directory.iterdir() if names.fullmatch(p.name)]
    return [json.loads(p.read_text()) for p in paths]


def from_tokens(rec: Record) -> int:
    mean = rec["total_input_tokens"] / rec["completed"]
    return min(CONTEXTS, key=lambda ctx: abs(mean - ctx))


# --- the tables -----------------------------------------------------------------------------


def test_sweep_results_give_the_seed_tables(results_dir: Path) -> None:
    report = build_report(results_dir)
    assert len(report.groups) == 1
    check_tables(
        report.markdown, by_cell(written(results_dir), lambda r: int(r["tpudeploy_context"]))
    )
    assert table(report.markdown, "Aggregate")[MISSING_CELL] == "—"
    assert table(report.markdown, "Aggregate")[NOISY_CELL].endswith("*")


def test_vllm_default_names_give_the_same_tables(vllm_dir: Path) -> None:
    """No --metadata, vLLM's own names: clients from max_concurrency, context from tokens."""
    assert any(
        p.name.startswith("openai-chat-infqps-concurrency16-gemma-4-E2B-it-")
        for p in vllm_dir.iterdir()
    )
    report = build_report(vllm_dir)
    check_tables(report.markdown, by_cell(written(vllm_dir), from_tokens))
    assert report.files_used == report.files_read == len(CELLS) * REPS
    assert not report.skipped
    froms = {row[4] for row in rows(section(report.markdown, "Runs"))[2:]}
    assert froms == {"input tokens"}


def test_a_directory_mixing_both_namings_is_one_sweep(tmp_path: Path) -> None:
    """Reps 1-2 from `make bench` files (context in metadata), rep 3 from a hand run."""
    out = tmp_path / "mixed"
    out.mkdir()
    for context, clients in CELLS:
        for rep in (1, 2):
            pairs = sweep_pairs(context, clients, rep, config=None, image=None)
            save(
                out,
                f"ctx{context}-c{clients}-r{rep}.json",
                record(context, clients, rep, pairs=pairs),
            )
        rec = record(context, clients, 3)
        save(out, vllm_name(rec), rec)
    report = build_report(out)
    assert len(report.groups) == 1
    cells = by_cell(written(out), from_tokens)
    assert all(len(recs) == 3 for recs in cells.values())
    check_tables(report.markdown, cells)
    runs = rows(section(report.markdown, "Runs"))[2:]
    for *_, rep_cell, _date, source, name in runs:
        assert source == ("metadata" if name.startswith("ctx") else "input tokens"), name
        assert (rep_cell == "3") == (not name.startswith("ctx")), name


def test_repetitions_follow_dates_not_names(tmp_path: Path) -> None:
    out = tmp_path / "renamed"
    out.mkdir()
    # Names sort the other way round from the runs' dates.
    for rep, name in zip((1, 2, 3), ("zulu.json", "mike.json", "alpha.json"), strict=True):
        save(out, name, record(128, 16, rep))
    runs = rows(section(build_report(out).markdown, "Runs"))[2:]
    assert [(row[2], row[5]) for row in runs] == [
        ("1", "zulu.json"),
        ("2", "mike.json"),
        ("3", "alpha.json"),
    ]
    dates = [row[3] for row in runs]
    assert dates == sorted(dates)


def test_append_result_records_are_repetitions(tmp_path: Path) -> None:
    """--append-result writes one object per line into the same file."""
    out = tmp_path / "appended"
    out.mkdir()
    recs = [record(1024, 16, rep) for rep in (1, 2, 3)]
    (out / "all.json").write_text("\n".join(json.dumps(r) for r in recs))
    report = build_report(out)
    check_tables(report.markdown, {(1024, 16): recs})
    assert report.files_used == 1
    assert {row[5] for row in rows(section(report.markdown, "Runs"))[2:]} == {
        f"all.json (record {i})" for i in (1, 2, 3)
    }


def test_a_copied_file_counts_once(results_dir: Path) -> None:
    (results_dir / "copy.json").write_bytes((results_dir / "ctx128-c1-r1.json").read_bytes())
    report = build_report(results_dir)
    assert len(report.skipped) == 1
    pair = {report.skipped[0].file, report.skipped[0].reason.split()[2].rstrip(";")}
    assert pair == {"copy.json", "ctx128-c1-r1.json"}
    assert report.skipped[0].reason.startswith("identical to ")
    originals = sweep_records(results_dir)
    check_tables(report.markdown, by_cell(originals, lambda r: int(r["tpudeploy_context"])))


# --- what is skipped, and says why ----------------------------------------------------------


def test_a_run_without_concurrency_is_listed_and_skipped(
    vllm_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = record(128, None, 1, date="20260809-230000")
    name = vllm_name(rec)
    assert "concurrency" not in name  # vLLM leaves it out of the name too
    save(vllm_dir, name, rec)
    report = build_report(vllm_dir)
    assert [s.file for s in report.skipped] == [name]
    assert "max_concurrency is null" in report.skipped[0].reason
    assert "--max-concurrency N" in report.skipped[0].reason
    assert report.files_read == len(CELLS) * REPS + 1
    assert report.files_used == len(CELLS) * REPS
    assert f"from {report.files_used} of {report.files_read} file(s)" in report.markdown
    assert f"- {name}: max_concurrency is null" in section(report.markdown, "Skipped files")[1]
    check_tables(
        report.markdown,
        by_cell([r for r in written(vllm_dir) if r["max_concurrency"]], from_tokens),
    )
    assert bench_cli.main(["report", str(vllm_dir), "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    used = len(CELLS) * REPS
    assert f"report: used {used} of {used + 1} file(s), skipped 1" in captured.err


BAD_FILES: list[tuple[str, bytes, list[str]]] = [
    ("notes.json", b"{not json", ["not JSON"]),
    (
        "other-tool.json",
        json.dumps({"score": 1}).encode(),
        ["not a `vllm bench serve` result", "date"],
    ),
    ("list.json", b"[1, 2]", ["a JSON list"]),
    ("image.bin", bytes(range(256)), ["not text"]),
    ("empty.json", b"", ["empty"]),
    ("README.txt", b"my runs\n", ["not JSON"]),
    (
        "paced.json",
        json.dumps(record(128, 4, 1, request_rate=10.0)).encode(),
        ["request_rate 10.0", "closed-loop"],
    ),
    (
        "no-ttft.json",
        json.dumps({k: v for k, v in record(128, 4, 1).items() if k != "median_ttft_ms"}).encode(),
        ["no median_ttft_ms", "--percentile-metrics"],
    ),
    (
        "fast.json",
        json.dumps({**record(128, 4, 1), "output_throughput": "fast"}).encode(),
        ["output_throughput is 'fast', not a number"],
    ),
    (
        "off-grid.json",
        json.dumps(record(2048, 4, 1)).encode(),
        ["2,048 input tokens per request", "[bench] contexts", "--config"],
    ),
    (
        "bad-date.json",
        json.dumps({**record(128, 4, 1), "date": "yesterday"}).encode(),
        ["date 'yesterday'"],
    ),
    (
        "edited.json",
        json.dumps(record(128, 4, 1, pairs=sweep_pairs(128, 16, 1))).encode(),
        ["tpudeploy_clients '16' disagrees with max_concurrency 4"],
    ),
    (
        "bad-context.json",
        json.dumps(record(128, 4, 1, pairs={"tpudeploy_context": "many"})).encode(),
        ["tpudeploy_context is 'many'"],
    ),
]


@pytest.mark.parametrize(("name", "content", "words"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_file_that_is_not_a_usable_run_is_listed_with_its_reason(
    results_dir: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: bytes,
    words: list[str],
) -> None:
    (results_dir / name).write_bytes(content)
    report = build_report(results_dir)
    assert [s.file for s in report.skipped] == [name]
    for word in words:
        assert word in report.skipped[0].reason
    assert "\n" not in report.skipped[0].reason
    listed = section(report.markdown, "Skipped files")
    assert f"- {name}: {report.skipped[0].reason}" in listed
    # The rest still reports, unchanged.
    check_tables(
        report.markdown,
        by_cell(sweep_records(results_dir), lambda r: int(r["tpudeploy_context"])),
    )


def test_off_grid_context_is_used_once_the_config_sweeps_it(
    vllm_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save(vllm_dir, "hand-2k.json", record(2048, 16, 1))
    config = tmp_path / "deploy.toml"
    config.write_text("[bench]\ncontexts = [128, 1024, 2048, 8192]\n")
    assert bench_cli.main(["report", str(vllm_dir), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert table(out, "Aggregate")[(2048, 16)].startswith(
        f"{record(2048, 16, 1)['output_throughput']:,.1f}"
    )
    assert "Skipped files" not in out


@pytest.mark.parametrize(
    ("mean", "expected"),
    [
        (128, 128),
        (140, 128),  # 128 + 10% = 140.8
        (141, None),
        (922, 1024),  # 1,024 - 10% = 921.6
        (921, None),
        (8200, 8192),
        (3000, None),
        (0, None),
    ],
)
def test_snap_context_to_the_grid(mean: float, expected: int | None) -> None:
    assert snap_context(mean, CONTEXTS) == expected


def test_metadata_context_wins_and_disagreeing_tokens_warn(tmp_path: Path) -> None:
    out = tmp_path / "r"
    out.mkdir()
    for rep in (1, 2):
        rec = record(128, 4, rep, pairs=sweep_pairs(1024, 4, rep))  # 128-token prompts, says 1024
        save(out, f"run{rep}.json", rec)
    report = build_report(out)
    assert set(report.groups[0].cells) == {(1024, 4)}
    assert any("run1.json: 128 input tokens per request, not ~1,024" in w for w in report.warnings)


# --- groups: never average two servers ------------------------------------------------------


def test_two_configs_in_one_directory_are_reported_apart(tmp_path: Path) -> None:
    out = tmp_path / "two"
    out.mkdir()
    for context, clients in CELLS:
        for rep in range(1, REPS + 1):
            a = record(
                context, clients, rep, pairs=sweep_pairs(context, clients, rep, config=CONFIG_A)
            )
            save(out, f"a-ctx{context}-c{clients}-r{rep}.json", a)
    for rep in (1, 2):  # config B: fewer runs, half the speed, one cell
        b = record(1024, 16, rep, scale=0.5, date=vllm_date(1024, 16, rep, offset=5),
                   pairs=sweep_pairs(1024, 16, rep, config=CONFIG_B))  # fmt: skip
        save(out, vllm_name(b), b)
    report = build_report(out)
    assert [g.key.config for g in report.groups] == [CONFIG_A, CONFIG_B]
    assert "**2 groups**" in report.markdown and "never averaged together" in report.markdown
    records = written(out)
    for index, config in ((1, CONFIG_A), (2, CONFIG_B)):
        mine = [r for r in records if r["tpudeploy_config"] == config]
        check_tables(
            group_markdown(report.markdown, index),
            by_cell(mine, lambda r: int(r["tpudeploy_context"])),
        )
        assert f"config `{config}`" in report.markdown


def test_another_model_is_another_group(vllm_dir: Path) -> None:
    other = record(128, 1, 1, model="google/gemma-4-E4B-it")
    save(vllm_dir, vllm_name(other), other)
    report = build_report(vllm_dir)
    assert [g.key.model for g in report.groups] == [MODEL, "google/gemma-4-E4B-it"]
    check_tables(group_markdown(report.markdown, 2), {(128, 1): [other]})


def test_write_report_numbers_the_plots_of_several_groups(tmp_path: Path) -> None:
    out = tmp_path / "two"
    out.mkdir()
    for config in (CONFIG_A, CONFIG_B):
        rec = record(128, 4, 1, pairs=sweep_pairs(128, 4, 1, config=config))
        save(out, f"{config}.json", rec)
    report, paths = write_report(out)
    names = sorted(p.name for p in paths if p.suffix == ".png")
    assert names == sorted(
        f"group{i}-{n}" for i in (1, 2) for n in ("throughput.png", "ttft.png", "per_stream.png")
    )
    for name in names:
        assert (out / name).read_bytes().startswith(PNG_SIGNATURE)
        assert f"]({name})" in report.markdown
    # A second report over the same directory does not mistake its own outputs for results.
    again, _ = write_report(out)
    assert not again.skipped and again.files_read == 2


# --- cost, KV, defaults ----------------------------------------------------------------------


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
    prices = facts.BUILD_LOG_RATES
    assert round(cost_per_million(tok_s, prices["spot"]), 3) == spot
    assert round(cost_per_million(tok_s, prices["flex-start"]), 3) == flex
    assert round(cost_per_million(tok_s, prices["on-demand"]), 3) == on_demand


@pytest.mark.parametrize("fixture", ["results_dir", "vllm_dir"])
def test_cost_table_per_cell(fixture: str, request: pytest.FixtureRequest) -> None:
    directory: Path = request.getfixturevalue(fixture)
    prices = {"spot": 0.5, "flex-start": 0.75}
    markdown = build_report(directory, prices=prices).markdown
    cost_rows = {
        (int(r[0].replace(",", "")), int(r[1])): r[3:]
        for r in rows(section(markdown, "$ per million"))[2:]
    }
    cells = by_cell(written(directory), from_tokens)
    assert set(cost_rows) == set(cells)
    for key, recs in cells.items():
        tok_s = statistics.median(r["output_throughput"] for r in recs)
        assert cost_rows[key] == [f"${p / (tok_s * 3600) * 1e6:.3f}" for p in prices.values()]


def test_kv_wall_marks(results_dir: Path) -> None:
    pool = facts.KV_POOL_TOKENS
    safe = round(pool * facts.SAFE_CLIENTS_X_CONTEXT / facts.KV_POOL_TOKENS)
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
    assert default_prices()[0] == dict(facts.BUILD_LOG_RATES)
    pool, safe, source = default_kv_pool()
    assert (pool, safe) == (facts.KV_POOL_TOKENS, facts.SAFE_CLIENTS_X_CONTEXT)
    assert "fallback" in source


def test_planner_defaults_agree_with_the_seed() -> None:
    prices, source = default_prices()
    assert prices == dict(facts.BUILD_LOG_RATES)
    assert source.startswith("tpudeploy.planner")
    pool, safe, _ = default_kv_pool()
    # The planner derives the pool from geometry; the seed measured 321,344 (5,021 blocks of 64).
    assert abs(pool - facts.KV_POOL_TOKENS) <= 4 * 64
    assert abs(safe - facts.SAFE_CLIENTS_X_CONTEXT) / facts.SAFE_CLIENTS_X_CONTEXT < 0.01


# --- files and the command line -------------------------------------------------------------


def test_write_report_makes_markdown_and_pngs(results_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report, paths = write_report(results_dir, out)
    assert (out / "report.md").read_text() == report.markdown + "\n"
    pngs = [p for p in paths if p.suffix == ".png"]
    assert {p.name for p in pngs} == {"throughput.png", "ttft.png", "per_stream.png"}
    for png in pngs:
        data = png.read_bytes()
        assert len(data) > 1000 and data.startswith(PNG_SIGNATURE)
        assert f"]({png.name})" in report.markdown


def test_sweep_directory_files_are_not_taken_for_results(results_dir: Path) -> None:
    """metadata.json, the copied config, logs/, twins and an earlier report are the sweep's own."""
    write_report(results_dir)
    report = build_report(results_dir)
    assert not report.skipped
    assert report.files_read == report.files_used == len(CELLS) * REPS
    assert f"{len(CELLS) * REPS} vLLM side file(s) ignored" in report.markdown
    assert "- make bench image: `vllm/vllm-tpu:nightly`" in report.markdown
    assert f"- Measured: `{MODEL}`, config `{CONFIG_A}`, image `{IMAGE}`" in report.markdown


def test_cli_report_prints_markdown(
    results_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    assert (
        bench_cli.main(["report", str(results_dir), "--out", str(out), "--price", "spot=0.5"]) == 0
    )
    printed = capsys.readouterr().out
    assert printed == (out / "report.md").read_text()
    assert "| spot ($0.5000/h) |" in printed


def test_a_directory_with_no_usable_run_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "junk"
    out.mkdir()
    (out / "a.json").write_text("{not json")
    save(out, "b.json", record(128, None, 1))
    with pytest.raises(ReportError) as err:
        build_report(out)
    message = str(err.value)
    assert "no `vllm bench serve` results" in message
    assert "a.json: not JSON" in message and "b.json: max_concurrency is null" in message
    assert bench_cli.main(["report", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err
    assert not (out / "report.md").exists()


def test_empty_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"no files\); run make bench"):
        build_report(tmp_path)


def test_report_without_metadata_uses_measured_grid(results_dir: Path) -> None:
    (results_dir / "metadata.json").unlink()
    (results_dir / "config.toml").unlink()
    report = build_report(results_dir)
    group = report.groups[0]
    assert group.contexts == CONTEXTS and group.clients == CLIENTS
    assert table(report.markdown, "Aggregate")[MISSING_CELL] == "—"


def test_planned_grid_applies_only_to_the_sweeps_group(results_dir: Path) -> None:
    """metadata.json plans 128..8192 x 1/16; a hand run at 4 clients keeps its own grid."""
    hand = record(1024, 4, 1)
    save(results_dir, vllm_name(hand), hand)
    report = build_report(results_dir)
    sweep, other = report.groups
    assert sweep.key.config == CONFIG_A and sweep.clients == CLIENTS and sweep.expected_reps == REPS
    assert other.key.config is None and other.contexts == (1024,) and other.clients == (4,)


def test_cli_report_sizes_pool_from_config(
    results_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tpudeploy.planner import kv_pool

    config = tmp_path / "deploy.toml"
    config.write_text("[vllm]\nmax_model_len = 16384\ngpu_memory_utilization = 0.9\n")
    assert bench_cli.main(["report", str(results_dir), "--config", str(config)]) == 0
    expected = kv_pool(max_model_len=16384, gpu_memory_utilization=0.9)
    assert f"Pool {expected.tokens:,} tokens; safe line {expected.safe_tokens:,}" in (
        capsys.readouterr().out
    )


def test_missing_results_dir_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ReportError, match="no such directory"):
        write_report(missing, tmp_path / "out")
    assert not missing.exists() and not (tmp_path / "out").exists()


def test_two_builds_are_reported_apart_by_digest_and_version(tmp_path: Path) -> None:
    """Issue 24: the image bump a `make pin` records is its own group, named by what the node
    served (the RepoDigest and vLLM version), never averaged with the build before it."""
    out = tmp_path / "builds"
    out.mkdir()
    old = ("vllm/vllm-tpu@sha256:" + "1" * 64, "0.26.1rc1.dev125+ga7a204cc6")
    new = ("vllm/vllm-tpu@sha256:" + "2" * 64, "0.27.0")
    for build, scale, offset in ((old, 1.0, 0), (new, 1.3, 5)):
        for rep in (1, 2):
            pairs = {
                **sweep_pairs(1024, 16, rep),
                "tpudeploy_digest": build[0],
                "tpudeploy_vllm": build[1],
            }
            rec = record(1024, 16, rep, scale=scale, pairs=pairs,
                         date=vllm_date(1024, 16, rep, offset=offset))  # fmt: skip
            save(out, vllm_name(rec), rec)
    report = build_report(out)
    assert sorted((g.key.digest, g.key.vllm) for g in report.groups) == [old, new]
    for digest, version in (old, new):
        assert f"image `{digest}`, vLLM `{version}`" in report.markdown
    for index in (1, 2):
        group = report.groups[index - 1]
        mine = [r for r in written(out) if r["tpudeploy_digest"] == group.key.digest]
        check_tables(group_markdown(report.markdown, index), {(1024, 16): mine})
