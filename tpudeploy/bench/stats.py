"""The report's three metrics, and each cell's median and cv over its repetitions."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tpudeploy import facts
from tpudeploy.bench.results import GroupKey, RunResult

# The seed's bar for "no point value should be trusted": its own 128/16 TTFT had cv 56%.
CV_LIMIT = 0.10


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
        facts.AGGREGATE_TOK_S,
        True,
    ),
    Metric(
        "ttft",
        "Median time-to-first-token, ms (`median_ttft_ms`)",
        "ms",
        lambda run: run.median_ttft_ms,
        facts.MEDIAN_TTFT_MS,
        False,
    ),
    Metric(
        "per_stream",
        "Per-stream tokens/s (1000 / `median_tpot_ms`)",
        "tok/s",
        _per_stream,
        facts.PER_STREAM_TOK_S,
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


@dataclass(frozen=True)
class GroupReport:
    """One model/config/image: its cells, grid and plot file names."""

    key: GroupKey
    cells: Mapping[tuple[int, int], CellSummary]
    contexts: tuple[int, ...]
    clients: tuple[int, ...]
    expected_reps: int
    plot_files: Mapping[str, str]
