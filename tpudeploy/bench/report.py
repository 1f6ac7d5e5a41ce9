"""Turn a directory of `vllm bench serve` results into the seed's tables, ratios, cost and KV."""

from __future__ import annotations

import importlib
import json
import math
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from tpudeploy import seed_sweep
from tpudeploy.bench.sweep import (
    META_CLIENTS,
    META_CONFIG,
    META_CONTEXT,
    META_IMAGE,
    META_REP,
    PROFILES,
)

# What `vllm bench serve --save-result` writes (vllm/benchmarks/serve.py): one JSON object per
# run, opening with date (%Y%m%d-%H%M%S, local time), backend, model_id and num_prompts, then each
# `--metadata KEY=VALUE` as a top-level string, request_rate ("inf" unless paced), burstiness,
# max_concurrency (null without --max-concurrency) and the metrics. `--append-result` adds further
# objects to the same file, one per line. The default file name,
# {label or backend}-{request_rate}qps[-concurrency{N}]-{model}-{date}.json, names no context,
# so the report reads every run's cell from its content and never from its name.
RESULT_KEYS = ("date", "backend", "model_id", "num_prompts", "completed")
METRIC_KEYS = ("output_throughput", "median_ttft_ms", "median_tpot_ms")
VLLM_DATE = "%Y%m%d-%H%M%S"
# Files vLLM writes beside a result: the PyTorch-benchmark twin, --plot-timeline and
# --plot-dataset-stats. Each repeats or draws a result; none is one.
VLLM_SIDE_FILES = (".pytorch.json", ".timeline.html", ".dataset_stats.png")
# The sweep's own files in a results directory (sweep.run_sweep) and the report's outputs.
SWEEP_METADATA = "metadata.json"
REPORT_FILE = "report.md"
PLOT_FILES: Mapping[str, str] = {
    "aggregate": "throughput.png",
    "ttft": "ttft.png",
    "per_stream": "per_stream.png",
}
# Without a `tpudeploy_context` pair the context is the mean input per request, which for
# vLLM's random dataset is --random-input-len (range ratio 0 by default). The existing warning
# threshold (10%) decides whether it is a grid point or an unknown context.
CONTEXT_TOLERANCE = 0.10
DEFAULT_CONTEXTS = tuple(sorted({c for s in PROFILES.values() for c in s.contexts}))
# The seed's bar for "no point value should be trusted": its own 128/16 TTFT had cv 56%.
CV_LIMIT = 0.10
# The seed's rule of thumb as a fraction of its pool (250,000 / 321,344 = 78%), so the line
# moves with the pool when the planner reports a different one.
SAFE_FRACTION = seed_sweep.SAFE_CLIENTS_X_CONTEXT / seed_sweep.KV_POOL_TOKENS
MISSING = "—"


class ReportError(ValueError):
    """The results cannot be reported; the message names the directory and the fix."""


class _NotACell(ValueError):
    """One saved record cannot join a cell; the message is the reason listed in the report."""


@dataclass(frozen=True)
class GroupKey:
    """What must be equal for runs to share a table: the model and, when saved, config and image."""

    model: str
    config: str | None
    image: str | None

    def describe(self) -> str:
        config = f"config `{self.config}`" if self.config else "config not recorded"
        image = f"image `{self.image}`" if self.image else "image not recorded"
        return f"`{self.model}`, {config}, {image}"


@dataclass(frozen=True)
class RunResult:
    """The fields of one saved `vllm bench serve` result that the report uses."""

    context: int
    clients: int
    rep: int  # 1-based position among its cell's runs in date order (0 until assigned)
    file: str
    date: str
    group: GroupKey
    context_from: str  # "metadata" (the sweep's tpudeploy_context) or "input tokens"
    num_prompts: int
    completed: int
    failed: int
    output_throughput: float
    median_ttft_ms: float
    median_tpot_ms: float
    total_input_tokens: int | None
    saved_rep: int | None  # the sweep's tpudeploy_rep, a tie-break for equal dates

    @property
    def has_failures(self) -> bool:
        return self.failed > 0 or self.completed < self.num_prompts


@dataclass(frozen=True)
class Skipped:
    """A file (or one record of an appended file) that is not a usable run, and why."""

    file: str
    reason: str


@dataclass(frozen=True)
class Loaded:
    """Everything found in a results directory."""

    runs: tuple[RunResult, ...]
    skipped: tuple[Skipped, ...]
    files_read: int  # candidate files, side files and the sweep's own excluded
    files_used: int  # files holding at least one run in the report
    side_files: int
    metadata: Mapping[str, Any]


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    unit: str
    value: Callable[[RunResult], float | None]
    seed: Mapping[tuple[int, int], float]
    higher_is_better: bool


def _per_stream(run: RunResult) -> float | None:
    # What one user feels: the inverse of the median time per output token.
    return 1000.0 / run.median_tpot_ms if run.median_tpot_ms > 0 else None


METRICS = (
    Metric(
        "aggregate",
        "Aggregate output tokens/s (`output_throughput`)",
        "tok/s",
        lambda run: run.output_throughput,
        seed_sweep.AGGREGATE_TOK_S,
        True,
    ),
    Metric(
        "ttft",
        "Median time-to-first-token, ms (`median_ttft_ms`)",
        "ms",
        lambda run: run.median_ttft_ms,
        seed_sweep.MEDIAN_TTFT_MS,
        False,
    ),
    Metric(
        "per_stream",
        "Per-stream tokens/s (1000 / `median_tpot_ms`)",
        "tok/s",
        _per_stream,
        seed_sweep.PER_STREAM_TOK_S,
        True,
    ),
)


@dataclass(frozen=True)
class Stat:
    """Median over repetitions, with cv = sample stdev (n-1) / mean; None below two values."""

    median: float
    cv: float | None
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        mean = statistics.fmean(values)
        cv = statistics.stdev(values) / mean if len(values) > 1 and mean else None
        return cls(statistics.median(values), cv, tuple(values))

    @property
    def untrustworthy(self) -> bool:
        return self.cv is not None and self.cv > CV_LIMIT


@dataclass(frozen=True)
class CellSummary:
    context: int
    clients: int
    runs: tuple[RunResult, ...]
    stats: Mapping[str, Stat | None]

    @property
    def has_failures(self) -> bool:
        return any(run.has_failures for run in self.runs)


@dataclass(frozen=True)
class GroupReport:
    """One model/config/image: its cells, grid and plot file names."""

    key: GroupKey
    cells: Mapping[tuple[int, int], CellSummary]
    contexts: tuple[int, ...]
    clients: tuple[int, ...]
    expected_reps: int
    plot_files: Mapping[str, str]


@dataclass
class Report:
    markdown: str
    groups: tuple[GroupReport, ...]
    skipped: tuple[Skipped, ...]
    files_used: int
    files_read: int
    warnings: list[str] = field(default_factory=list)


# --- loading --------------------------------------------------------------------------------


def _records(path: Path) -> list[Any]:
    """Every JSON value in the file: one for --save-result, several for --append-result."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise _NotACell("not text, so not a `vllm bench serve` result") from None
    except OSError as exc:
        raise _NotACell(f"cannot be read ({exc.strerror or exc})") from None
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            break
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            where = f" after record {len(values)}" if values else ""
            raise _NotACell(
                f"not JSON{where} ({exc.msg}, line {exc.lineno}); "
                "not a `vllm bench serve --save-result` file"
            ) from None
        values.append(value)
    if not values:
        raise _NotACell("empty; a `vllm bench serve` run that died before saving? rerun it")
    return values


def _number(data: Mapping[str, Any], key: str) -> float:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _NotACell(f"{key} is {value!r}, not a number; rerun this run")
    return float(value)


def _whole(data: Mapping[str, Any], key: str) -> int:
    """A positive whole number, saved by vLLM as a number or by --metadata as a string."""
    value = data[key]
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _NotACell(f"{key} is {value!r}, not a positive whole number")
    return value


def snap_context(mean_input: float, grid: Sequence[int]) -> int | None:
    """The grid context within CONTEXT_TOLERANCE of the mean input per request, if any."""
    if mean_input <= 0 or not grid:
        return None
    nearest = min(grid, key=lambda ctx: abs(mean_input - ctx) / ctx)
    return nearest if abs(mean_input - nearest) <= CONTEXT_TOLERANCE * nearest else None


def _context(data: Mapping[str, Any], grid: Sequence[int]) -> tuple[int, str]:
    if META_CONTEXT in data:
        return _whole(data, META_CONTEXT), "metadata"
    total = data.get("total_input_tokens")
    completed = _number(data, "completed")
    if completed <= 0:
        raise _NotACell(
            f"no request completed and no {META_CONTEXT} pair, so its context cannot be told; "
            "rerun it"
        )
    if isinstance(total, bool) or not isinstance(total, int | float) or total <= 0:
        raise _NotACell(
            f"no total_input_tokens and no {META_CONTEXT} pair, so its context cannot be told; "
            f"rerun with --metadata {META_CONTEXT}=<input length>"
        )
    mean = total / completed
    context = snap_context(mean, grid)
    if context is None:
        known = ", ".join(f"{c:,}" for c in grid)
        raise _NotACell(
            f"{mean:,.0f} input tokens per request (total_input_tokens / completed) is not "
            f"within {CONTEXT_TOLERANCE:.0%} of a sweep context ({known}); add it to [bench] "
            "contexts in the config given with --config, or rerun with "
            f"--metadata {META_CONTEXT}=<input length>"
        )
    return context, "input tokens"


def parse_run(data: Any, label: str, grid: Sequence[int]) -> RunResult:
    """One saved record as a run of a cell; _NotACell says why it cannot be one."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise _NotACell(f"a JSON {kind}, not an object: not a `vllm bench serve` result")
    missing = [key for key in RESULT_KEYS if key not in data]
    if missing:
        raise _NotACell(f"not a `vllm bench serve` result: no {', '.join(missing)}")
    if data.get("ramp_up_strategy") is not None:
        raise _NotACell(
            f"a request-rate ramp-up ({data['ramp_up_strategy']}), not a fixed-concurrency run"
        )
    if data.get("request_rate", "inf") != "inf":
        raise _NotACell(
            f"request_rate {data['request_rate']!r}: paced arrivals, not the seed's closed-loop "
            "sweep (request_rate inf, clients = max_concurrency); rerun without --request-rate"
        )
    if data.get("max_concurrency") is None:
        raise _NotACell(
            "max_concurrency is null (run without --max-concurrency), so its clients cannot be "
            "told; rerun with --max-concurrency N"
        )
    clients = _whole(data, "max_concurrency")
    if META_CLIENTS in data and _whole(data, META_CLIENTS) != clients:
        raise _NotACell(
            f"{META_CLIENTS} {data[META_CLIENTS]!r} disagrees with max_concurrency {clients}; "
            "the file was edited: rerun this run"
        )
    lacking = [key for key in METRIC_KEYS if key not in data]
    if lacking:
        raise _NotACell(
            f"no {', '.join(lacking)}: saved with --percentile-metrics leaving out ttft/tpot, or "
            "by an older vLLM; rerun with the defaults"
        )
    date = data["date"]
    try:
        datetime.strptime(str(date), VLLM_DATE)
    except ValueError:
        raise _NotACell(
            f"date {date!r} is not vLLM's {VLLM_DATE}; repetitions are ordered by it"
        ) from None
    model = data["model_id"]
    if not isinstance(model, str) or not model:
        raise _NotACell(f"model_id is {model!r}, not a model name")
    context, context_from = _context(data, grid)
    num_prompts = int(_number(data, "num_prompts"))
    completed = int(_number(data, "completed"))
    failed = int(_number(data, "failed")) if "failed" in data else num_prompts - completed
    total_input = data.get("total_input_tokens")
    saved_rep = data.get(META_REP)
    config, image = data.get(META_CONFIG), data.get(META_IMAGE)
    return RunResult(
        context=context,
        clients=clients,
        rep=0,
        file=label,
        date=str(date),
        group=GroupKey(model, str(config) if config else None, str(image) if image else None),
        context_from=context_from,
        num_prompts=num_prompts,
        completed=completed,
        failed=failed,
        output_throughput=_number(data, "output_throughput"),
        median_ttft_ms=_number(data, "median_ttft_ms"),
        median_tpot_ms=_number(data, "median_tpot_ms"),
        total_input_tokens=int(total_input) if isinstance(total_input, int | float) else None,
        saved_rep=int(saved_rep) if isinstance(saved_rep, str) and saved_rep.isdigit() else None,
    )


def load_metadata(results_dir: Path) -> dict[str, Any]:
    """The sweep's metadata.json (image, settings), or {} when the directory has none."""
    path = results_dir / SWEEP_METADATA
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # not the sweep's: listed among the candidate files instead
    return data if isinstance(data, dict) and data.get("tool") == "tpudeploy.bench" else {}


def _own_files(metadata: Mapping[str, Any]) -> set[str]:
    """Names the sweep and the report write into a results directory; none is a result."""
    names = {REPORT_FILE, *PLOT_FILES.values()}
    if metadata:
        names.add(SWEEP_METADATA)
        if isinstance(metadata.get("config_file"), str):
            names.add(metadata["config_file"])
    return names


def _is_own_plot(name: str) -> bool:
    # Several groups get numbered plots: group2-throughput.png.
    prefix, _, rest = name.partition("-")
    return prefix.startswith("group") and prefix[5:].isdigit() and rest in PLOT_FILES.values()


def _candidates(results_dir: Path, metadata: Mapping[str, Any]) -> Iterator[Path]:
    own = _own_files(metadata)
    for path in sorted(results_dir.iterdir()):
        if path.is_file() and path.name not in own and not _is_own_plot(path.name):
            yield path


def load_results(results_dir: Path, *, contexts: Sequence[int] = DEFAULT_CONTEXTS) -> Loaded:
    """Every run in `results_dir` (not its subdirectories), whatever the files are called."""
    if not results_dir.is_dir():
        raise ReportError(
            f"{results_dir}: no such directory; pass a directory of `vllm bench serve "
            "--save-result` files (make bench writes bench-results/<profile>-<time>/)"
        )
    metadata = load_metadata(results_dir)
    settings = metadata.get("settings") if isinstance(metadata.get("settings"), dict) else {}
    planned = [c for c in (settings or {}).get("contexts", []) if isinstance(c, int) and c > 0]
    grid = tuple(sorted({*contexts, *planned}))
    runs: list[RunResult] = []
    skipped: list[Skipped] = []
    seen: dict[str, str] = {}
    files_read = side_files = 0
    used: set[str] = set()
    for path in _candidates(results_dir, metadata):
        if path.name.endswith(VLLM_SIDE_FILES):
            side_files += 1
            continue
        files_read += 1
        try:
            records = _records(path)
        except _NotACell as exc:
            skipped.append(Skipped(path.name, str(exc)))
            continue
        for index, record in enumerate(records, start=1):
            label = path.name if len(records) == 1 else f"{path.name} (record {index})"
            # A copied file would otherwise count as one more repetition of its cell.
            canonical = json.dumps(record, sort_keys=True)
            if canonical in seen:
                skipped.append(Skipped(label, f"identical to {seen[canonical]}; counted once"))
                continue
            seen[canonical] = label
            try:
                runs.append(parse_run(record, label, grid))
            except _NotACell as exc:
                skipped.append(Skipped(label, str(exc)))
                continue
            used.add(path.name)
    if not runs:
        reasons = "; ".join(f"{s.file}: {s.reason}" for s in skipped[:2])
        more = f" (and {len(skipped) - 2} more)" if len(skipped) > 2 else ""
        found = f"{files_read} file(s), none usable: {reasons}{more}" if skipped else "no files"
        raise ReportError(
            f"{results_dir}: no `vllm bench serve` results ({found}); run make bench, or "
            "`vllm bench serve --save-result --max-concurrency N --result-dir` this directory"
        )
    return Loaded(
        runs=tuple(_number_repetitions(runs)),
        skipped=tuple(skipped),
        files_read=files_read,
        files_used=len(used),
        side_files=side_files,
        metadata=metadata,
    )


def _number_repetitions(runs: Sequence[RunResult]) -> list[RunResult]:
    """Repetitions are a cell's runs in date order (the sweep's rep breaks ties), from 1."""
    cells: dict[tuple[GroupKey, int, int], list[RunResult]] = {}
    for run in runs:
        cells.setdefault((run.group, run.context, run.clients), []).append(run)
    numbered = []
    for group in cells.values():
        group.sort(key=lambda r: (r.date, r.saved_rep or 0, r.file))
        numbered += [replace(run, rep=index) for index, run in enumerate(group, start=1)]
    return numbered


def summarize(runs: Sequence[RunResult]) -> dict[tuple[int, int], CellSummary]:
    """One group's runs by cell, each metric's median and cv over the cell's repetitions."""
    grouped: dict[tuple[int, int], list[RunResult]] = {}
    for run in sorted(runs, key=lambda r: (r.context, r.clients, r.rep)):
        grouped.setdefault((run.context, run.clients), []).append(run)
    cells = {}
    for key, group in sorted(grouped.items()):
        # A run where every request failed has no latency to report; it only flags the cell.
        usable = [run for run in group if run.completed > 0]
        stats: dict[str, Stat | None] = {}
        for metric in METRICS:
            values = [v for v in (metric.value(run) for run in usable) if v is not None]
            stats[metric.key] = Stat.of(values) if values else None
        cells[key] = CellSummary(key[0], key[1], tuple(group), stats)
    return cells


# --- cost and KV ----------------------------------------------------------------------------


def cost_per_million(tok_s: float, price_per_hour: float) -> float:
    """$ per million output tokens at `tok_s` on a chip billed `price_per_hour`."""
    return price_per_hour / (tok_s * 3600) * 1e6


def _planner() -> Any:
    try:
        return importlib.import_module("tpudeploy.planner")
    except ImportError:
        return None


def default_prices() -> tuple[dict[str, float], str]:
    """$/chip-hour per provisioning model: tpudeploy.planner's table, else the seed's."""
    planner = _planner()
    try:
        table = planner.SEED_PRICES
        prices = {m: float(table.per_chip_hour[m]) for m in planner.PROVISIONING_MODELS}
        return prices, f"tpudeploy.planner: {table.source}, as of {table.as_of}"
    except (AttributeError, KeyError, TypeError, ValueError):
        return dict(seed_sweep.PRICE_PER_CHIP_HOUR), "fallback: the seed's us-west4 prices"


def default_kv_pool(
    *, max_model_len: int | None = None, gpu_memory_utilization: float | None = None
) -> tuple[int, int, str]:
    """(pool tokens, safe line, source): tpudeploy.planner's arithmetic, else the seed's figures."""
    planner = _planner()
    kwargs: dict[str, Any] = {}
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    if gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
    try:
        pool = planner.kv_pool(**kwargs)
        return int(pool.tokens), int(pool.safe_tokens), "tpudeploy.planner.kv_pool"
    except (AttributeError, TypeError, ValueError):
        return (
            seed_sweep.KV_POOL_TOKENS,
            seed_sweep.SAFE_CLIENTS_X_CONTEXT,
            "fallback: the seed's measured pool",
        )


def kv_status(context: int, clients: int, *, pool: int, safe: int) -> str:
    wanted = context * clients
    if wanted > pool:
        return "over pool"
    if wanted >= safe:
        return "over safe line"
    return "ok"


# --- markdown -------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return f"{value:,.1f}"


def _grid(
    contexts: Sequence[int], clients: Sequence[int], text: Callable[[int, int], str]
) -> list[str]:
    lines = [
        "| context ↓ / clients → | " + " | ".join(str(c) for c in clients) + " |",
        "|---|" + "---|" * len(clients),
    ]
    for context in contexts:
        cells = " | ".join(text(context, c) for c in clients)
        lines.append(f"| {context:,} | {cells} |")
    return lines


def _cell_text(
    cells: Mapping[tuple[int, int], CellSummary],
    metric: Metric,
    expected_reps: int,
    context: int,
    clients: int,
) -> str:
    cell = cells.get((context, clients))
    stat = cell.stats[metric.key] if cell else None
    if cell is None or stat is None:
        return MISSING + (" !" if cell and cell.has_failures else "")
    text = _fmt(stat.median)
    if stat.cv is not None:
        text += f" ({stat.cv:.1%})"
    if stat.untrustworthy:
        text += " *"
    if cell.has_failures:
        text += " !"
    if len(stat.values) < expected_reps:
        text += f" [{len(stat.values)}/{expected_reps}]"
    return text


def _ratio_text(
    cells: Mapping[tuple[int, int], CellSummary], metric: Metric, context: int, clients: int
) -> str:
    cell = cells.get((context, clients))
    stat = cell.stats[metric.key] if cell else None
    seed = metric.seed.get((context, clients))
    if cell is None or stat is None or seed is None:
        return MISSING
    text = f"{stat.median / seed:.2f}x"
    seed_doubtful = metric.key == "ttft" and (context, clients) in seed_sweep.UNTRUSTWORTHY_TTFT
    if stat.untrustworthy or seed_doubtful:
        text += " *"
    if cell.has_failures:
        text += " !"
    return text


def _matches_sweep(key: GroupKey, metadata: Mapping[str, Any]) -> bool:
    """Whether make bench's metadata.json (planned grid, repetitions) describes this group."""
    if not metadata:
        return False
    settings = metadata.get("settings") if isinstance(metadata.get("settings"), dict) else {}
    image = metadata.get("image") if isinstance(metadata.get("image"), dict) else {}
    return key.config == (settings or {}).get("config_hash") and key.image == (image or {}).get(
        "image_id"
    )


def _group_plot_files(index: int, count: int) -> dict[str, str]:
    if count == 1:
        return dict(PLOT_FILES)
    return {key: f"group{index}-{name}" for key, name in PLOT_FILES.items()}


def _group(
    key: GroupKey,
    runs: Sequence[RunResult],
    metadata: Mapping[str, Any],
    plot_files: Mapping[str, str],
) -> GroupReport:
    cells = summarize(runs)
    planned: Mapping[str, Any] = {}
    if _matches_sweep(key, metadata):
        planned = metadata.get("settings") or {}
    contexts = tuple(sorted({*planned.get("contexts", []), *(k[0] for k in cells)}))
    clients = tuple(sorted({*planned.get("clients", []), *(k[1] for k in cells)}))
    expected_reps = int(planned.get("repetitions", max(run.rep for run in runs)))
    return GroupReport(key, cells, contexts, clients, expected_reps, plot_files)


def _run_warnings(runs: Sequence[RunResult]) -> list[str]:
    warnings: list[str] = []
    for run in runs:
        if run.has_failures:
            warnings.append(
                f"{run.file}: {run.failed} failed, {run.completed}/{run.num_prompts} completed"
            )
        if run.context_from == "metadata" and run.total_input_tokens and run.completed:
            mean_input = run.total_input_tokens / run.completed
            if abs(mean_input - run.context) > CONTEXT_TOLERANCE * run.context:
                warnings.append(
                    f"{run.file}: {mean_input:,.0f} input tokens per request, not ~{run.context:,}"
                    f" as its {META_CONTEXT} says; check --random-input-len"
                )
    return warnings


def _group_markdown(
    group: GroupReport,
    *,
    level: str,
    prices: Mapping[str, float],
    price_source: str,
    pool: tuple[int, int, str],
    with_plots: bool,
) -> list[str]:
    cells, contexts, clients = group.cells, group.contexts, group.clients
    out: list[str] = []
    for metric in METRICS:
        out += [f"{level} {metric.title}", ""]
        out += _grid(contexts, clients, partial(_cell_text, cells, metric, group.expected_reps))
        out.append("")
    for metric in METRICS:
        better = "higher is better" if metric.higher_is_better else "lower is better"
        out += [f"{level} Ratio to the seed: {metric.title.split(' (')[0].lower()} ({better})", ""]
        out += _grid(contexts, clients, partial(_ratio_text, cells, metric))
        out.append("")
    if seed_note := [
        f"{ctx}/{c}" for ctx, c in sorted(seed_sweep.UNTRUSTWORTHY_TTFT) if (ctx, c) in cells
    ]:
        out += [f"TTFT ratio `*` at {', '.join(seed_note)}: the seed's own cv was 56%.", ""]

    models = list(prices)
    out += [
        f"{level} $ per million output tokens ({price_source})",
        "",
        "$/M = price per chip-hour / (aggregate tok/s x 3600) x 1e6, at each cell's median.",
        "",
        "| context | clients | tok/s | "
        + " | ".join(f"{m} (${prices[m]:.4f}/h)" for m in models)
        + " |",
        "|---|---|---|" + "---|" * len(models),
    ]
    for (ctx, c), cell in cells.items():
        stat = cell.stats["aggregate"]
        if stat is None or stat.median <= 0:
            continue
        costs = " | ".join(f"${cost_per_million(stat.median, prices[m]):.3f}" for m in models)
        out.append(f"| {ctx:,} | {c} | {_fmt(stat.median)} | {costs} |")
    pool_tokens, safe, pool_source = pool
    out += [
        "",
        f"{level} clients x context against the KV pool ({pool_source})",
        "",
        f"Pool {pool_tokens:,} tokens; safe line {safe:,} ({safe / pool_tokens:.0%} of the "
        "pool, the seed's rule of thumb). Past the pool more clients buy queueing, not throughput.",
        "",
    ]
    out += _grid(
        contexts,
        clients,
        lambda ctx, c: f"{ctx * c:,} {kv_status(ctx, c, pool=pool_tokens, safe=safe)}",
    )
    out += [
        "",
        f"{level} Runs: which file is which repetition",
        "",
        "Repetitions are a cell's runs in date order. Context from `metadata` is the sweep's "
        f"`{META_CONTEXT}`; from `input tokens` it is total_input_tokens / completed within "
        f"{CONTEXT_TOLERANCE:.0%} of a sweep context.",
        "",
        "| context | clients | rep | date | context from | file |",
        "|---|---|---|---|---|---|",
    ]
    for cell in cells.values():
        for run in cell.runs:
            out.append(
                f"| {run.context:,} | {run.clients} | {run.rep} | {run.date} | "
                f"{run.context_from} | {run.file} |"
            )
    out.append("")
    if with_plots:
        names = group.plot_files.values()
        out += [f"{level} Plots", "", *(f"![{Path(n).stem}]({n})" for n in names), ""]
    return out


def build_report(
    results_dir: Path,
    *,
    prices: Mapping[str, float] | None = None,
    kv_pool_tokens: int | None = None,
    kv_pool: tuple[int, int, str] | None = None,
    contexts: Sequence[int] = DEFAULT_CONTEXTS,
    with_plots: bool = False,
) -> Report:
    """Read every result in `results_dir` and render the markdown report.

    `contexts` is the sweep's grid that a run without a `tpudeploy_context` pair is matched to.
    """
    loaded = load_results(results_dir, contexts=contexts)
    meta = loaded.metadata
    by_group: dict[GroupKey, list[RunResult]] = {}
    for run in loaded.runs:
        by_group.setdefault(run.group, []).append(run)
    # The most measured group first: usually the sweep itself.
    ordered = sorted(by_group.items(), key=lambda item: (-len(item[1]), item[0].describe()))
    groups = tuple(
        _group(key, runs, meta, _group_plot_files(index, len(ordered)))
        for index, (key, runs) in enumerate(ordered, start=1)
    )
    if prices is None:
        prices, price_source = default_prices()
    else:
        price_source = "given"
    if kv_pool is not None:
        pool = kv_pool
    elif kv_pool_tokens is None:
        pool = default_kv_pool()
    else:
        pool = (kv_pool_tokens, round(kv_pool_tokens * SAFE_FRACTION), "given")
    warnings = _run_warnings(loaded.runs)

    out: list[str] = [f"# Benchmark report: {meta.get('run_id', results_dir.name)}", ""]
    used = (
        f"- Used {len(loaded.runs)} run(s) from {loaded.files_used} of {loaded.files_read} "
        f"file(s) in `{results_dir}`"
    )
    if loaded.skipped:
        used += f"; {len(loaded.skipped)} skipped, listed under Skipped files"
    if loaded.side_files:
        used += f"; {loaded.side_files} vLLM side file(s) ignored ({', '.join(VLLM_SIDE_FILES)})"
    out.append(used + ". File names play no part: each run's cell comes from its content.")
    image = meta.get("image") if isinstance(meta.get("image"), dict) else None
    if image:
        digests = ", ".join(image.get("repo_digests") or []) or "none recorded"
        out += [
            f"- make bench image: `{image.get('image')}`, vLLM `{image.get('vllm_version')}`",
            f"- Image id `{image.get('image_id')}`; repo digests: {digests}",
        ]
    else:
        out.append("- No make bench metadata.json here: image and plan come from the files alone")
    settings = meta.get("settings") if isinstance(meta.get("settings"), dict) else None
    if settings:
        out.append(
            f"- Profile `{meta.get('profile')}`: {settings.get('repetitions')} repetition(s), "
            f"output {settings.get('output_len')} tokens, num_prompts = max(clients x "
            f"{settings.get('prompts_per_client')}, {settings.get('min_prompts')}), base seed "
            f"{meta.get('base_seed')}"
        )
    if len(groups) == 1:
        out.append(f"- Measured: {groups[0].key.describe()}")
    else:
        out.append(
            f"- **{len(groups)} groups**: these results come from different models, configs or "
            "images; each group has its own tables and they are never averaged together:"
        )
        out += [
            f"  {i}. {g.key.describe()}: {sum(len(c.runs) for c in g.cells.values())} run(s)"
            for i, g in enumerate(groups, start=1)
        ]
    out += [
        f"- Seed reference: {seed_sweep.SOURCE_URL} ({seed_sweep.PUBLISHED}); {seed_sweep.SETUP}",
        "",
        "Each cell is the median of its repetitions, followed by its coefficient of variation "
        "(sample standard deviation, n-1, over the mean; shown from two repetitions). "
        f"`*` cv > {CV_LIMIT:.0%}: do not trust the point value. `!` failed requests in a "
        f"repetition. `[k/n]` only k of n repetitions. `{MISSING}` not measured.",
        "",
    ]
    for index, group in enumerate(groups, start=1):
        level = "##"
        if len(groups) > 1:
            out += [f"## Group {index} of {len(groups)}: {group.key.describe()}", ""]
            level = "###"
        out += _group_markdown(
            group,
            level=level,
            prices=prices,
            price_source=price_source,
            pool=pool,
            with_plots=with_plots,
        )
    if warnings:
        out += ["## Warnings", "", *(f"- {w}" for w in warnings), ""]
    if loaded.skipped:
        out += [
            "## Skipped files",
            "",
            *(f"- {s.file}: {s.reason}" for s in loaded.skipped),
            "",
        ]
    return Report(
        "\n".join(out),
        groups,
        loaded.skipped,
        loaded.files_used,
        loaded.files_read,
        warnings,
    )


def write_report(
    results_dir: Path,
    out_dir: Path | None = None,
    *,
    prices: Mapping[str, float] | None = None,
    kv_pool_tokens: int | None = None,
    kv_pool: tuple[int, int, str] | None = None,
    contexts: Sequence[int] = DEFAULT_CONTEXTS,
) -> tuple[Report, list[Path]]:
    """Write report.md and the PNG plots into `out_dir` (default: the results directory)."""
    from tpudeploy.bench import plots  # matplotlib loads only when plots are wanted

    report = build_report(
        results_dir,
        prices=prices,
        kv_pool_tokens=kv_pool_tokens,
        kv_pool=kv_pool,
        contexts=contexts,
        with_plots=True,
    )
    # Only after the results read cleanly: a mistyped path must not leave a directory behind.
    out_dir = out_dir or results_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [path for group in report.groups for path in plots.write_plots(group, out_dir)]
    (out_dir / REPORT_FILE).write_text(report.markdown + "\n")
    return report, [out_dir / REPORT_FILE, *written]
