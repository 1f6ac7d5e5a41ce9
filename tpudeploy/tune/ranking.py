"""The tune's report: a ranked summary, a table and a plot per context, and the arms that failed.

It reads results the way `make report` does (tpudeploy.bench.results.load_results), one
directory per arm holding one sub-directory per boot, so arms measured by hand with `make bench`
can be compared by laying their result directories out the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tpudeploy.bench.results import ReportError, RunResult, load_results
from tpudeploy.bench.stats import CV_LIMIT, METRICS
from tpudeploy.config.speculative import UPSTREAM_MTP_ACCEPTANCE
from tpudeploy.tune import bootverdict
from tpudeploy.tune.bootverdict import Boot
from tpudeploy.tune.verdict import BETTER, NOISY, WORSE, ArmVerdict, CellVerdict, compare

STATUS_SUFFIX = ".status.json"  # beside each boot: {"status": "done" | "failed", "step", "reason"}
REPORT_FILE = "tune-report.md"


@dataclass(frozen=True)
class Failure:
    arm: str
    round: int | None
    step: str
    reason: str
    rows: tuple[str, ...] = ()  # step "accept": the acceptance rows that failed


@dataclass(frozen=True)
class Collected:
    runs: Mapping[str, tuple[RunResult, ...]]
    failures: tuple[Failure, ...]
    images: Mapping[str, tuple[str, ...]]  # arm -> the image(s) its runs were served by
    boots: Mapping[str, tuple[Boot, ...]] = field(default_factory=dict)  # each boot's log

    @property
    def ranked_out(self) -> dict[str, tuple[str, ...]]:
        """Arms that failed `make accept` in any round -> the rows that failed: a build that
        answers wrongly is out of the ranking, however fast (issue 42)."""
        out: dict[str, tuple[str, ...]] = {}
        for f in self.failures:
            if f.step == "accept":
                out[f.arm] = tuple(dict.fromkeys((*out.get(f.arm, ()), *f.rows)))
        return out

    def ranked(self) -> dict[str, tuple[RunResult, ...]]:
        """The runs the verdict ranks: every arm's but those ranked out by acceptance."""
        return {arm: runs for arm, runs in self.runs.items() if arm not in self.ranked_out}


def _status(path: Path) -> Mapping[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _failure(arm: str, status: Mapping[str, object]) -> Failure:
    round_ = status.get("round")
    rows = status.get("rows")
    return Failure(
        arm,
        round_ if isinstance(round_, int) else None,
        str(status.get("step", "?")),
        str(status.get("reason") or "no reason recorded"),
        tuple(str(r) for r in rows) if isinstance(rows, list) else (),
    )


def collect(results: Path, arms: Sequence[str] | None = None) -> Collected:
    """`results/<arm>/<boot>/` for every arm directory (or those named), each boot a results
    directory as `make bench` writes it. A boot's `<boot>.status.json` (make tune writes it
    last) saying failed makes it a failure; a boot without one is read as results (arms measured
    by hand); `*.interrupted-N` directories (partial units) are never read."""
    if not results.is_dir():
        raise ReportError(f"{results}: no such directory; pass the OUT of a make tune run")
    names = arms or sorted(p.name for p in results.iterdir() if p.is_dir() and p.name != "arms")
    runs: dict[str, tuple[RunResult, ...]] = {}
    failures: list[Failure] = []
    images: dict[str, tuple[str, ...]] = {}
    boots: dict[str, tuple[Boot, ...]] = {}
    for name in names:
        arm_dir = results / name
        if not arm_dir.is_dir():
            continue
        boots[name] = bootverdict.collect_boots(arm_dir)
        found: list[RunResult] = []
        for status_file in sorted(arm_dir.glob("*" + STATUS_SUFFIX)):
            status = _status(status_file)
            if status.get("status") == "failed":
                failures.append(_failure(name, status))
        for boot in sorted(p for p in arm_dir.iterdir() if p.is_dir()):
            if ".interrupted-" in boot.name:
                continue
            status = _status(boot.with_name(boot.name + STATUS_SUFFIX))
            if status.get("status") == "failed":
                continue
            try:
                found += load_results(boot).runs
            except ReportError:
                continue  # a boot that saved no result
        if found:
            runs[name] = tuple(found)
            images[name] = tuple(sorted({r.group.image or "not recorded" for r in found}))
    return Collected(runs, tuple(failures), images, boots)


def _per_context(
    verdicts: Sequence[ArmVerdict], metric: str
) -> dict[int, dict[str, list[CellVerdict]]]:
    table: dict[int, dict[str, list[CellVerdict]]] = {}
    for v in verdicts:
        for cell in v.cells:
            if cell.metric == metric:
                table.setdefault(cell.context, {}).setdefault(v.name, []).append(cell)
    return table


def _clients_text(where: Mapping[int, list[int]], every: int) -> str:
    parts = []
    for clients, contexts in where.items():
        at = "every context" if len(contexts) == every else ", ".join(f"{c:,}" for c in contexts)
        parts.append(f"{clients} client{'s' if clients > 1 else ''} ({at})")
    return ", ".join(parts)


def _where(arms: Sequence[ArmVerdict]) -> list[str]:
    """Where each arm wins and loses, by clients: a speculative arm can be faster at 1 client
    and slower at 64, and the ranking's sums would hide it."""
    lines = []
    for v in arms:
        every = len({c.context for c in v.cells if c.metric == "aggregate"})
        better = _clients_text(v.clients_where(BETTER), every)
        worse = _clients_text(v.clients_where(WORSE), every)
        if better or worse:
            lines.append(
                f"- **{v.name}**: better at {better or 'no cell'}; worse at {worse or 'no cell'}"
            )
    if not lines:
        return []
    return ["", "## Where each arm is better and worse (aggregate output tokens/s)", "", *lines]


def _acceptance(arms: Sequence[ArmVerdict]) -> list[str]:
    """Speculative arms' acceptance rate per cell (accepted / proposed draft tokens, vLLM's
    spec-decode counters), against upstream's bar for the Gemma 4 MTP draft."""
    rated = [v for v in arms if v.acceptance]
    if not rated:
        return []
    lines = [
        "",
        "## Speculative acceptance rate (accepted / proposed draft tokens, median per cell)",
        "",
        f"Upstream's CI requires at least {UPSTREAM_MTP_ACCEPTANCE:.2f} of the Gemma 4 MTP draft "
        "(tpu-inference test_gemma4_mtp_performance), on other chips; a rate that holds while "
        "throughput falls says the verify step, not the draft, is what costs.",
        "",
    ]
    for v in rated:
        contexts = sorted({ctx for ctx, _ in v.acceptance})
        clients = sorted({c for _, c in v.acceptance})
        lines += [
            f"**{v.name}**",
            "",
            "| context | "
            + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in clients)
            + " |",
            "|---|" + "---|" * len(clients),
        ]
        for ctx in contexts:
            row = [
                f"{v.acceptance[(ctx, c)]:.2f}" if (ctx, c) in v.acceptance else "-"
                for c in clients
            ]
            lines.append(f"| {ctx:,} | " + " | ".join(row) + " |")
        lines.append("")
    return lines[:-1]


def markdown(
    collected: Collected, verdicts: Sequence[ArmVerdict], *, baseline: str, plots: Mapping[int, str]
) -> str:
    """The report's text; `plots` maps a context to its plot's file name."""
    arms = [v for v in verdicts if v.name != baseline]
    lines = [
        "# Tune verdict",
        "",
        f"Each ratio is the arm against `{baseline}`, oriented so that above 1 is better, with a "
        "95% bootstrap interval over the repetitions. An arm is **better** in a cell only where "
        f"the whole interval is above 1 and both sides' cv is under {CV_LIMIT:.0%} (the build "
        "log's bar); **noisy** where either cv is not.",
        "",
        "## Ranked (aggregate output tokens/s)",
        "",
        "| rank | arm | cells better | worse | noisy | geometric mean ratio | best tok/s "
        "| $/M tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = next(v for v in verdicts if v.name == baseline)
    for rank, v in enumerate([*arms, base], start=1):
        geo = f"{v.geomean:.3f}" if v.geomean and v.name != baseline else "1 (baseline)"
        best = f"{v.best_tok_s:,.1f}" if v.best_tok_s else "-"
        dollars = f"${v.dollars_per_million:.3f}" if v.dollars_per_million is not None else "-"
        shown_rank = str(rank) if v.name != baseline else "-"
        better = v.count(BETTER) if v.name != baseline else "-"
        worse = v.count(WORSE) if v.name != baseline else "-"
        noisy = v.count(NOISY) if v.name != baseline else "-"
        lines.append(
            f"| {shown_rank} | {v.name} | {better} | {worse} | {noisy} | {geo} | {best} "
            f"| {dollars} |"
        )
    failed: dict[str, list[Failure]] = {}
    for f in collected.failures:
        failed.setdefault(f.arm, []).append(f)
    out_of_ranking = collected.ranked_out
    for name, rows in out_of_ranking.items():
        named = ", ".join(rows) or "see below"
        lines.append(f"| - | {name} | ranked out: make accept failed ({named}) | | | | | |")
    for name in failed:
        if name not in collected.runs and name not in out_of_ranking:
            lines.append(f"| - | {name} | failed to boot | | | | | |")
    if failed:
        lines += [
            "",
            "## Boots that failed (each is data: the arm's configuration did not serve)",
            "",
        ]
        for name, fails in failed.items():
            rounds = ", ".join(str(f.round) for f in fails if f.round) or "?"
            reasons = sorted(
                {
                    f"make {f.step}: "
                    + (f"failed rows {', '.join(f.rows)}; " if f.rows else "")
                    + f.reason
                    for f in fails
                }
            )
            lines.append(f"- **{name}**, round(s) {rounds}: " + "; ".join(reasons))
    served = {image for images in collected.images.values() for image in images}
    if len(served) > 1:
        lines += [
            "",
            "**Warning: the arms ran on different images** ("
            + "; ".join(f"{a}: {', '.join(i)}" for a, i in collected.images.items())
            + "). A moving tag changes vLLM between boots: pin it (`make pin`) and tune again.",
        ]
    lines += _where(arms)
    lines += _acceptance(arms)
    lines += bootverdict.markdown(collected.boots, baseline=baseline)
    for metric in METRICS:
        table = _per_context(arms, metric.key)
        if not table:
            continue
        lines += ["", f"## {metric.title}", ""]
        for context, by_arm in sorted(table.items()):
            clients = sorted({c.clients for cells in by_arm.values() for c in cells})
            lines += [
                f"### {context:,} tokens of context",
                "",
                "| arm | "
                + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in clients)
                + " |",
                "|---|" + "---|" * len(clients),
            ]
            for name, cells in by_arm.items():
                by_clients = {c.clients: c for c in cells}
                row = [by_clients[c].text() if c in by_clients else "-" for c in clients]
                lines.append(f"| {name} | " + " | ".join(row) + " |")
            if metric.key == "aggregate" and context in plots:
                lines += ["", f"![aggregate ratio at {context:,} ctx]({plots[context]})"]
            lines.append("")
        lines.pop()
    return "\n".join(lines).rstrip() + "\n"


def write_report(
    results: Path,
    *,
    baseline: str,
    price_per_hour: float | None,
    out: Path | None = None,
    plots: bool = True,
) -> Path:
    """Read `results`, judge every arm, write the report (and a plot per context) into `out`."""
    collected = collect(results)
    if baseline not in collected.runs:
        raise ReportError(
            f"{results}: no results for the baseline ({baseline!r}); every ratio needs it. Run "
            "make tune again (it resumes) or add the baseline's results as "
            f"{results}/{baseline}/<dir>"
        )
    if baseline in collected.ranked_out:
        raise ReportError(
            f"{results}: the baseline ({baseline!r}) failed make accept ("
            + ", ".join(collected.ranked_out[baseline])
            + "): no arm is judged against a build that answers wrongly. Fix the baseline's "
            "config or image, then tune again"
        )
    verdicts = compare(collected.ranked(), baseline=baseline, price_per_hour=price_per_hour)
    target = out or results
    target.mkdir(parents=True, exist_ok=True)
    contexts = sorted({c.context for v in verdicts for c in v.cells})
    drawn = {}
    arms = [v for v in verdicts if v.name != baseline]
    if plots:
        from tpudeploy.tune.ratio_plots import plot  # matplotlib, only when drawing
    for context in contexts if plots else ():
        name = f"tune-ratio-ctx{context}.png"
        plot(arms, context, target / name)
        drawn[context] = name
    path = target / REPORT_FILE
    path.write_text(markdown(collected, verdicts, baseline=baseline, plots=drawn), encoding="utf-8")
    return path
