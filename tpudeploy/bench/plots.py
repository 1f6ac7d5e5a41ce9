"""PNG plots of a benchmark report against the build log's figures (matplotlib, Agg canvas)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tpudeploy.bench.stats import METRICS, GroupReport

# (metric key, y label, log y): throughput is linear; TTFT spans 16 ms to 11.7 s (seed).
# File names come from the group (results.PLOT_FILES, numbered when a directory holds several).
_PLOTS = (
    ("aggregate", "aggregate output tokens/s", False),
    ("ttft", "median TTFT (ms)", True),
    ("per_stream", "per-stream tokens/s", False),
)


def _plot(report: GroupReport, key: str, ylabel: str, log_y: bool, path: Path) -> None:
    metric = next(m for m in METRICS if m.key == key)
    # A bare Figure on the Agg canvas: no pyplot, no global backend state, no display needed.
    fig = Figure(figsize=(7, 4.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    seed_contexts = {ctx for ctx, _ in metric.seed}
    for index, context in enumerate(report.contexts):
        color = f"C{index % 10}"
        points = [
            (c, stat)
            for c in report.clients
            if (cell := report.cells.get((context, c))) and (stat := cell.stats[key])
        ]
        if points:
            xs = [c for c, _ in points]
            ys = [s.median for _, s in points]
            # Error bars span the repetitions' min..max around the median.
            low = [s.median - min(s.values) for _, s in points]
            high = [max(s.values) - s.median for _, s in points]
            ax.errorbar(
                xs, ys, yerr=[low, high], color=color, marker="o", capsize=3,
                label=f"{context:,} ctx",
            )  # fmt: skip
        if context in seed_contexts:
            seed_points = sorted((c, v) for (ctx, c), v in metric.seed.items() if ctx == context)
            ax.plot(
                [c for c, _ in seed_points], [v for _, v in seed_points], color=color,
                linestyle="--", alpha=0.7, label=f"{context:,} ctx, build log",
            )  # fmt: skip
    ax.set_xscale("log", base=2)
    ticks = sorted({*report.clients, *(c for _, c in metric.seed)})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel(ylabel)
    # The second line tells apart the plots of several groups (models, configs, images).
    ax.set_title(
        f"{ylabel} vs clients (dashed: build log)\n{report.key.describe().replace('`', '')}",
        fontsize="small",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")


def write_plots(group: GroupReport, out_dir: Path) -> list[Path]:
    """Write one group's plots into `out_dir`; return their paths."""
    paths = []
    for key, ylabel, log_y in _PLOTS:
        path = out_dir / group.plot_files[key]
        _plot(group, key, ylabel, log_y, path)
        paths.append(path)
    return paths


__all__ = ["write_plots"]
