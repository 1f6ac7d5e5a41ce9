"""Issue 40's done-when: a synthetic sweep where MTP helps at low concurrency and hurts at 64
clients shows exactly that in the ranked verdict, with its acceptance rate per cell and its
boot and compile time beside the throughput."""

from __future__ import annotations

from pathlib import Path

from tools.tune_example import Effect, write
from tpudeploy import facts
from tpudeploy.tune.arms import BASELINE
from tpudeploy.tune.ranking import collect, write_report
from tpudeploy.tune.verdict import BETTER, UNCLEAR, WORSE, compare

CELLS = [(ctx, c) for ctx in (128, 1024) for c in (1, 4, 16, 64)]
# Known effects: 60% faster alone, 30% at 4 clients, even at 16, 20% slower at 64, all at a cv
# of 1% (well under the 10% bar); acceptance falls a little as the batch fills.
MTP = Effect(
    1.0,
    0.01,
    by_clients={1: 1.6, 4: 1.3, 16: 1.0, 64: 0.8},
    acceptance={1: 0.85, 4: 0.84, 16: 0.83, 64: 0.81},
    boot=(facts.COLD_BOOT_S + 60, facts.COMPILE_S + 55),
)
EFFECTS = {BASELINE: Effect(1.0, 0.01, boot=(facts.COLD_BOOT_S, facts.COMPILE_S)), "mtp": MTP}


def test_faster_at_one_client_slower_at_64_is_what_the_verdict_says(tmp_path: Path) -> None:
    write(tmp_path, EFFECTS, cells=CELLS)
    verdicts = compare(collect(tmp_path).runs, baseline=BASELINE, price_per_hour=None)
    mtp = next(v for v in verdicts if v.name == "mtp")
    labels = {(c.context, c.clients): c.label for c in mtp.cells if c.metric == "aggregate"}
    expected = {1: BETTER, 4: BETTER, 16: UNCLEAR, 64: WORSE}
    assert labels == {(ctx, c): expected[c] for ctx, c in CELLS}
    assert mtp.clients_where(BETTER) == {1: [128, 1024], 4: [128, 1024]}
    assert mtp.clients_where(WORSE) == {64: [128, 1024]}

    text = write_report(tmp_path, baseline=BASELINE, price_per_hour=None, plots=False).read_text()
    ranked = text.split("## Ranked", 1)[1].split("\n## ", 1)[0]
    assert "| 1 | mtp | 4 | 2 | 0 |" in ranked  # 4 cells better, 2 worse: the sums alone
    where = text.split("## Where each arm is better and worse", 1)[1].split("\n## ", 1)[0]
    assert (
        "- **mtp**: better at 1 client (every context), 4 clients (every context); "
        "worse at 64 clients (every context)"
    ) in where
    # The acceptance rate per cell, from the spec-decode counters each result carries.
    rates = text.split("## Speculative acceptance rate", 1)[1].split("\n## ", 1)[0]
    assert "| 128 | 0.85 | 0.84 | 0.83 | 0.81 |" in rates
    assert "| 1,024 | 0.85 | 0.84 | 0.83 | 0.81 |" in rates
    # Boot and compile beside throughput: the cold compile against the baseline's.
    boots = text.split("## Boot, compile", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in boots.splitlines() if line.startswith("| mtp |"))
    cold_compile = facts.COMPILE_S + 55
    assert f"| {cold_compile:,.0f} s |" in row
    assert f"| {cold_compile / facts.COMPILE_S:.2f}x |" in row


def test_an_arm_without_speculation_has_no_acceptance_rate(tmp_path: Path) -> None:
    write(tmp_path, {BASELINE: Effect(1.0, 0.01), "plain": Effect(1.05, 0.01)}, cells=CELLS)
    text = write_report(tmp_path, baseline=BASELINE, price_per_hour=None, plots=False).read_text()
    assert "## Speculative acceptance rate" not in text
    assert "## Boot, compile" not in text  # no boot recorded: nothing invented
