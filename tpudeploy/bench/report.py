"""Turn a directory of `vllm bench serve` results into the seed's tables, ratios, cost and KV."""

from __future__ import annotations

import importlib
import json
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tpudeploy import seed_sweep

RESULT_NAME = re.compile(r"ctx(\d+)-c(\d+)-r(\d+)\.json")
REQUIRED_KEYS = (
    "num_prompts",
    "max_concurrency",
    "completed",
    "output_throughput",
    "median_ttft_ms",
    "median_tpot_ms",
)
# The seed's bar for "no point value should be trusted": its own 128/16 TTFT had cv 56%.
CV_LIMIT = 0.10
# The seed's rule of thumb as a fraction of its pool (250,000 / 321,344 = 78%), so the line
# moves with the pool when the planner reports a different one.
SAFE_FRACTION = seed_sweep.SAFE_CLIENTS_X_CONTEXT / seed_sweep.KV_POOL_TOKENS
MISSING = "—"


class ReportError(ValueError):
    """The results cannot be reported; the message names the file and the fix."""


@dataclass(frozen=True)
class RunResult:
    """The fields of one saved `vllm bench serve` result that the report uses."""

    context: int
    clients: int
    rep: int
    file: str
    num_prompts: int
    completed: int
    failed: int
    output_throughput: float
    median_ttft_ms: float
    median_tpot_ms: float
    total_input_tokens: int | None

    @property
    def has_failures(self) -> bool:
        return self.failed > 0 or self.completed < self.num_prompts


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


@dataclass
class Report:
    markdown: str
    cells: dict[tuple[int, int], CellSummary]
    contexts: tuple[int, ...]
    clients: tuple[int, ...]
    warnings: list[str] = field(default_factory=list)


# --- loading --------------------------------------------------------------------------------


def _number(path: Path, data: Mapping[str, Any], key: str) -> float:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReportError(f"{path}: {key} is {value!r}, not a number; rerun this cell")
    return float(value)


def load_run(path: Path) -> RunResult:
    """Read one result file; the cell comes from its name ctx<context>-c<clients>-r<rep>.json."""
    match = RESULT_NAME.fullmatch(path.name)
    if match is None:
        raise ReportError(
            f"{path}: name does not say its cell; expected ctx<context>-c<clients>-r<rep>.json"
        )
    context, clients, rep = (int(group) for group in match.groups())
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: not readable JSON ({exc}); rerun this cell") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: not a JSON object; is it a `vllm bench serve` result?")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise ReportError(
            f"{path}: missing {', '.join(missing)}; not a `vllm bench serve --save-result` file "
            "(or from an older vLLM): rerun this cell with make bench"
        )
    concurrency = data["max_concurrency"]
    if concurrency != clients:
        raise ReportError(
            f"{path}: max_concurrency is {concurrency!r} but the name says {clients} clients; "
            "the file was renamed or mixed up: rerun this cell"
        )
    num_prompts = int(_number(path, data, "num_prompts"))
    completed = int(_number(path, data, "completed"))
    failed = int(_number(path, data, "failed")) if "failed" in data else num_prompts - completed
    total_input = data.get("total_input_tokens")
    return RunResult(
        context=context,
        clients=clients,
        rep=rep,
        file=path.name,
        num_prompts=num_prompts,
        completed=completed,
        failed=failed,
        output_throughput=_number(path, data, "output_throughput"),
        median_ttft_ms=_number(path, data, "median_ttft_ms"),
        median_tpot_ms=_number(path, data, "median_tpot_ms"),
        total_input_tokens=int(total_input) if isinstance(total_input, int | float) else None,
    )


def load_results(results_dir: Path) -> list[RunResult]:
    if not results_dir.is_dir():
        raise ReportError(f"{results_dir}: no such directory; pass the directory make bench wrote")
    paths = sorted(p for p in results_dir.iterdir() if RESULT_NAME.fullmatch(p.name))
    if not paths:
        raise ReportError(
            f"{results_dir}: no result files named ctx<context>-c<clients>-r<rep>.json; "
            "run make bench first, or point at the directory it wrote"
        )
    return [load_run(path) for path in paths]


def load_metadata(results_dir: Path) -> dict[str, Any]:
    path = results_dir / "metadata.json"
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise ReportError(f"{path}: not valid JSON ({exc}); fix or delete it") from None
    return data if isinstance(data, dict) else {}


def summarize(runs: Sequence[RunResult]) -> dict[tuple[int, int], CellSummary]:
    grouped: dict[tuple[int, int], list[RunResult]] = {}
    for run in runs:
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


def build_report(
    results_dir: Path,
    *,
    prices: Mapping[str, float] | None = None,
    kv_pool_tokens: int | None = None,
    kv_pool: tuple[int, int, str] | None = None,
    plot_names: Sequence[str] = (),
) -> Report:
    """Read every result in `results_dir` and render the markdown report."""
    runs = load_results(results_dir)
    meta = load_metadata(results_dir)
    cells = summarize(runs)
    settings = meta.get("settings") if isinstance(meta.get("settings"), dict) else {}
    planned_contexts = settings.get("contexts", []) if settings else []
    planned_clients = settings.get("clients", []) if settings else []
    contexts = tuple(sorted({*planned_contexts, *(k[0] for k in cells)}))
    clients = tuple(sorted({*planned_clients, *(k[1] for k in cells)}))
    expected_reps = int((settings or {}).get("repetitions", max(run.rep for run in runs)))
    if prices is None:
        prices, price_source = default_prices()
    else:
        price_source = "given"
    if kv_pool is not None:
        kv_pool_tokens, safe, pool_source = kv_pool
    elif kv_pool_tokens is None:
        kv_pool_tokens, safe, pool_source = default_kv_pool()
    else:
        safe, pool_source = round(kv_pool_tokens * SAFE_FRACTION), "given"

    warnings: list[str] = []
    for run in runs:
        if run.has_failures:
            warnings.append(
                f"{run.file}: {run.failed} failed, {run.completed}/{run.num_prompts} completed"
            )
        if run.total_input_tokens and run.completed:
            mean_input = run.total_input_tokens / run.completed
            if abs(mean_input - run.context) > 0.1 * run.context:
                warnings.append(
                    f"{run.file}: {mean_input:,.0f} input tokens per request, not ~{run.context:,}"
                    " as its name says; check --random-input-len"
                )

    out: list[str] = [f"# Benchmark report: {meta.get('run_id', results_dir.name)}", ""]
    image = meta.get("image") if isinstance(meta.get("image"), dict) else None
    if image:
        digests = ", ".join(image.get("repo_digests") or []) or "none recorded"
        out += [
            f"- Image: `{image.get('image')}`, vLLM `{image.get('vllm_version')}`",
            f"- Image id `{image.get('image_id')}`; repo digests: {digests}",
        ]
    else:
        out.append("- No image recorded (no metadata.json from make bench in this directory)")
    if settings:
        out.append(
            f"- Profile `{meta.get('profile')}`: {expected_reps} repetition(s), output "
            f"{settings.get('output_len')} tokens, num_prompts = max(clients x "
            f"{settings.get('prompts_per_client')}, {settings.get('min_prompts')}), base seed "
            f"{meta.get('base_seed')}"
        )
    out += [
        f"- Seed reference: {seed_sweep.SOURCE_URL} ({seed_sweep.PUBLISHED}); {seed_sweep.SETUP}",
        "",
        "Each cell is the median of its repetitions, followed by its coefficient of variation "
        "(sample standard deviation, n-1, over the mean; shown from two repetitions). "
        f"`*` cv > {CV_LIMIT:.0%}: do not trust the point value. `!` failed requests in a "
        f"repetition. `[k/n]` only k of n repetitions. `{MISSING}` not measured.",
        "",
    ]
    for metric in METRICS:
        out += [f"## {metric.title}", ""]
        out += _grid(contexts, clients, partial(_cell_text, cells, metric, expected_reps))
        out.append("")
    for metric in METRICS:
        better = "higher is better" if metric.higher_is_better else "lower is better"
        out += [f"## Ratio to the seed: {metric.title.split(' (')[0].lower()} ({better})", ""]
        out += _grid(contexts, clients, partial(_ratio_text, cells, metric))
        out.append("")
    if metric_seed_note := [
        f"{ctx}/{c}" for ctx, c in sorted(seed_sweep.UNTRUSTWORTHY_TTFT) if (ctx, c) in cells
    ]:
        out += [f"TTFT ratio `*` at {', '.join(metric_seed_note)}: the seed's own cv was 56%.", ""]

    models = list(prices)
    out += [
        f"## $ per million output tokens ({price_source})",
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
    out += [
        "",
        f"## clients x context against the KV pool ({pool_source})",
        "",
        f"Pool {kv_pool_tokens:,} tokens; safe line {safe:,} ({safe / kv_pool_tokens:.0%} of the "
        "pool, the seed's rule of thumb). Past the pool more clients buy queueing, not throughput.",
        "",
    ]
    out += _grid(
        contexts,
        clients,
        lambda ctx, c: f"{ctx * c:,} {kv_status(ctx, c, pool=kv_pool_tokens, safe=safe)}",
    )
    out.append("")
    if warnings:
        out += ["## Warnings", "", *(f"- {w}" for w in warnings), ""]
    if plot_names:
        out += ["## Plots", "", *(f"![{Path(n).stem}]({n})" for n in plot_names), ""]
    return Report("\n".join(out), cells, contexts, clients, warnings)


def write_report(
    results_dir: Path,
    out_dir: Path | None = None,
    *,
    prices: Mapping[str, float] | None = None,
    kv_pool_tokens: int | None = None,
    kv_pool: tuple[int, int, str] | None = None,
) -> tuple[Report, list[Path]]:
    """Write report.md and the PNG plots into `out_dir` (default: the results directory)."""
    from tpudeploy.bench import plots  # matplotlib loads only when plots are wanted

    report = build_report(
        results_dir,
        prices=prices,
        kv_pool_tokens=kv_pool_tokens,
        kv_pool=kv_pool,
        plot_names=plots.PLOT_FILES,
    )
    # Only after the results read cleanly: a mistyped path must not leave a directory behind.
    out_dir = out_dir or results_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    written = plots.write_plots(report, out_dir)
    (out_dir / "report.md").write_text(report.markdown + "\n")
    return report, [out_dir / "report.md", *written]
