"""The tune's verdict: each arm against the baseline, cell by cell, with a bootstrap interval.

The build log's rules: 3 repetitions, report the coefficient of variation and distrust noisy
cells (its own 128-ctx/16-client TTFT had cv 56%, "no point value should be trusted there"). So
an arm is "better" in a cell only where the whole 95% interval of its ratio to the baseline is
above 1 and both sides' cv is under 10% (tpudeploy.bench.stats.CV_LIMIT); "worse" only where the
whole interval is below 1 under the same bar. Ratios are oriented so that above 1 is better for
every metric (TTFT is baseline / arm).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tpudeploy.bench.cost_kv import cost_per_million
from tpudeploy.bench.results import RunResult
from tpudeploy.bench.stats import CV_LIMIT, METRICS, Metric, Stat

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
# One fixed seed: the same results always give the same verdict.
BOOTSTRAP_SEED = 20260809

BETTER, WORSE, UNCLEAR, NOISY, TOO_FEW = "better", "worse", "no clear difference", "noisy", "n<2"


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def bootstrap_ratio(
    arm: Sequence[float],
    base: Sequence[float],
    *,
    higher_is_better: bool,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """Percentile interval of median(arm) / median(base) (inverted when lower is better),
    resampling each side's repetitions with replacement."""
    rng = random.Random(seed)  # noqa: S311 - resampling, not secrets; seeded to repeat
    ratios = []
    for _ in range(samples):
        a = statistics.median(rng.choices(arm, k=len(arm)))
        b = statistics.median(rng.choices(base, k=len(base)))
        if a > 0 and b > 0:
            ratios.append(a / b if higher_is_better else b / a)
    ratios.sort()
    tail = (1 - CONFIDENCE) / 2
    low = ratios[math.floor(tail * (len(ratios) - 1))]
    high = ratios[math.ceil((1 - tail) * (len(ratios) - 1))]
    return Interval(low, high)


@dataclass(frozen=True)
class CellVerdict:
    context: int
    clients: int
    metric: str
    ratio: float | None
    interval: Interval | None
    arm: Stat | None
    base: Stat | None
    label: str

    def text(self) -> str:
        if self.ratio is None:
            return "-"
        if self.interval is None:
            return f"{self.ratio:.3f} ({self.label})"
        return f"{self.ratio:.3f} [{self.interval.low:.3f}, {self.interval.high:.3f}] {self.label}"


def _values(runs: Sequence[RunResult], metric: Metric) -> dict[tuple[int, int], list[float]]:
    cells: dict[tuple[int, int], list[float]] = {}
    for run in runs:
        if run.completed <= 0:
            continue  # a run where every request failed has no latency to compare
        value = metric.value(run)
        if value is not None and value > 0:
            cells.setdefault((run.context, run.clients), []).append(value)
    return cells


def judge(
    arm: Sequence[float], base: Sequence[float], metric: Metric, key: tuple[int, int]
) -> CellVerdict:
    """One cell, one metric: the ratio, its interval and the label under the build log's bar."""
    if not arm or not base:
        return CellVerdict(*key, metric.key, None, None, None, None, TOO_FEW)
    a, b = Stat.of(arm), Stat.of(base)
    ratio = a.median / b.median if metric.higher_is_better else b.median / a.median
    if len(arm) < 2 or len(base) < 2:
        return CellVerdict(*key, metric.key, ratio, None, a, b, TOO_FEW)
    interval = bootstrap_ratio(arm, base, higher_is_better=metric.higher_is_better)
    noisy = any(s.cv is None or s.cv >= CV_LIMIT for s in (a, b))
    if noisy:
        label = NOISY
    elif interval.low > 1:
        label = BETTER
    elif interval.high < 1:
        label = WORSE
    else:
        label = UNCLEAR
    return CellVerdict(*key, metric.key, ratio, interval, a, b, label)


@dataclass(frozen=True)
class ArmVerdict:
    name: str
    cells: tuple[CellVerdict, ...]
    best_tok_s: float | None  # the arm's highest median aggregate throughput over its cells
    dollars_per_million: float | None
    # Speculative arms: the median acceptance rate of each (context, clients) cell.
    acceptance: Mapping[tuple[int, int], float] = field(default_factory=dict)

    def count(self, label: str, metric: str = "aggregate") -> int:
        return sum(1 for c in self.cells if c.metric == metric and c.label == label)

    def clients_where(self, label: str, metric: str = "aggregate") -> dict[int, list[int]]:
        """{clients: [contexts]} of the cells with `label`: "faster at 1 client, slower at
        64" as data."""
        out: dict[int, list[int]] = {}
        for c in sorted(self.cells, key=lambda c: (c.clients, c.context)):
            if c.metric == metric and c.label == label:
                out.setdefault(c.clients, []).append(c.context)
        return out

    @property
    def geomean(self) -> float | None:
        ratios = [c.ratio for c in self.cells if c.metric == "aggregate" and c.ratio]
        return math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else None


def compare(
    runs: Mapping[str, Sequence[RunResult]],
    *,
    baseline: str,
    price_per_hour: float | None,
) -> list[ArmVerdict]:
    """Every arm but the baseline, cell by cell and metric by metric, ranked: most cells better
    on aggregate throughput minus cells worse, then the geometric mean of its throughput ratios."""
    base_runs = runs[baseline]
    verdicts = []
    for name, arm_runs in runs.items():
        cells = []
        for metric in METRICS:
            arm_cells, base_cells = _values(arm_runs, metric), _values(base_runs, metric)
            for key in sorted(set(arm_cells) | set(base_cells)):
                cells.append(judge(arm_cells.get(key, []), base_cells.get(key, []), metric, key))
        aggregate = next(m for m in METRICS if m.key == "aggregate")
        medians = [statistics.median(v) for v in _values(arm_runs, aggregate).values()]
        best = max(medians) if medians else None
        per_million = (
            cost_per_million(best, price_per_hour) if best and price_per_hour is not None else None
        )
        rates: dict[tuple[int, int], list[float]] = {}
        for run in arm_runs:
            if run.acceptance_rate is not None:
                rates.setdefault((run.context, run.clients), []).append(run.acceptance_rate)
        acceptance = {key: statistics.median(v) for key, v in sorted(rates.items())}
        verdicts.append(ArmVerdict(name, tuple(cells), best, per_million, acceptance))
    arms = [v for v in verdicts if v.name != baseline]
    arms.sort(key=lambda v: (-(v.count(BETTER) - v.count(WORSE)), -(v.geomean or 0), v.name))
    return [next(v for v in verdicts if v.name == baseline), *arms]
