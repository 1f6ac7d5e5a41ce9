"""The tune report's plot: each arm's throughput ratio to the baseline by clients, per context."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tpudeploy.tune.verdict import ArmVerdict


def plot(verdicts: Sequence[ArmVerdict], context: int, path: Path) -> None:
    """Each arm's aggregate ratio by clients at one context, with its interval."""
    fig = Figure(figsize=(7, 4.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for index, v in enumerate(verdicts):
        cells = sorted(
            (c for c in v.cells if c.metric == "aggregate" and c.context == context and c.ratio),
            key=lambda c: c.clients,
        )
        if not cells:
            continue
        xs = [c.clients for c in cells]
        ys = [c.ratio or 0.0 for c in cells]
        low = [(c.ratio or 0) - c.interval.low if c.interval else 0 for c in cells]
        high = [c.interval.high - (c.ratio or 0) if c.interval else 0 for c in cells]
        ax.errorbar(
            xs, ys, yerr=[low, high], marker="o", capsize=3, color=f"C{index % 10}", label=v.name
        )
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("aggregate tok/s, arm / baseline")
    ax.set_title(f"{context:,} tokens of context (95% bootstrap intervals)")
    ax.legend(fontsize=8)
    fig.savefig(path)
