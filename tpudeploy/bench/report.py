"""Turn `vllm bench serve` results into the build log's tables, ratios, cost and KV."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from tpudeploy import facts
from tpudeploy.bench.commands import META_CONTEXT
from tpudeploy.bench.cost_kv import (
    SAFE_FRACTION,
    cost_per_million,
    default_kv_pool,
    default_prices,
    kv_status,
)
from tpudeploy.bench.results import (
    CONTEXT_TOLERANCE,
    DEFAULT_CONTEXTS,
    PLOT_FILES,
    REPORT_FILE,
    VLLM_SIDE_FILES,
    GroupKey,
    RunResult,
    Skipped,
    load_results,
)
from tpudeploy.bench.stats import (
    CV_LIMIT,
    METRICS,
    CellSummary,
    GroupReport,
    Metric,
    summarize,
)

MISSING = "—"


@dataclass
class Report:
    markdown: str
    groups: tuple[GroupReport, ...]
    skipped: tuple[Skipped, ...]
    files_used: int
    files_read: int
    warnings: list[str] = field(default_factory=list)


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
    seed_doubtful = metric.key == "ttft" and (context, clients) in facts.UNTRUSTWORTHY_TTFT
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
    if group.key.through_gateway:
        out += [
            "Through the Gateway: these are the pool's figures, over every replica the picker "
            "chose, not one chip's. The ratios to the build log and the KV table compare them "
            "with one chip; compare the group of the other `[routing] scoring` on the same "
            "workload to see what the scoring buys.",
            "",
        ]
    for metric in METRICS:
        out += [f"{level} {metric.title}", ""]
        out += _grid(contexts, clients, partial(_cell_text, cells, metric, group.expected_reps))
        out.append("")
    for metric in METRICS:
        better = "higher is better" if metric.higher_is_better else "lower is better"
        out += [
            f"{level} Ratio to the build log: {metric.title.split(' (')[0].lower()} ({better})",
            "",
        ]
        out += _grid(contexts, clients, partial(_ratio_text, cells, metric))
        out.append("")
    if seed_note := [
        f"{ctx}/{c}" for ctx, c in sorted(facts.UNTRUSTWORTHY_TTFT) if (ctx, c) in cells
    ]:
        out += [f"TTFT ratio `*` at {', '.join(seed_note)}: the build log's own cv was 56%.", ""]

    models = list(prices)
    pooled = group.key.through_gateway
    formula = (
        "$/M = price per chip-hour x replicas / (aggregate tok/s x 3600) x 1e6, at each cell's "
        "median, with the most replicas ready when any of its sweeps began (the HPA may have "
        "added some during a run, which this undercounts)."
        if pooled
        else "$/M = price per chip-hour / (aggregate tok/s x 3600) x 1e6, at each cell's median."
    )
    out += [
        f"{level} $ per million output tokens ({price_source})",
        "",
        formula,
        "",
        "| context | clients | tok/s | "
        + ("replicas | " if pooled else "")
        + " | ".join(f"{m} (${prices[m]:.4f}/h)" for m in models)
        + " |",
        "|---|---|---|" + ("---|" if pooled else "") + "---|" * len(models),
    ]
    for (ctx, c), cell in cells.items():
        stat = cell.stats["aggregate"]
        if stat is None or stat.median <= 0:
            continue
        chips = max((r.replicas or 1 for r in cell.runs), default=1) if pooled else 1
        costs = " | ".join(
            f"${cost_per_million(stat.median, prices[m] * chips):.3f}" for m in models
        )
        shown = f"{chips} | " if pooled else ""
        out.append(f"| {ctx:,} | {c} | {_fmt(stat.median)} | {shown}{costs} |")
    pool_tokens, safe, pool_source = pool
    out += [
        "",
        f"{level} clients x context against the KV pool ({pool_source})",
        "",
        f"Pool {pool_tokens:,} tokens; safe line {safe:,} ({safe / pool_tokens:.0%} of the "
        "pool, the build log's rule of thumb). Past the pool more clients buy queueing, not "
        "throughput.",
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
        f"- Build log reference: {facts.SOURCE_URL} ({facts.PUBLISHED}); {facts.SETUP}",
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
    from tpudeploy.bench import plots  # matplotlib loads only when plots are wanted (plots: below)

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
