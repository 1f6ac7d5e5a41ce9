"""Synthetic `make tune` results with known effects: the tests' fixtures and docs/tuning.md's
example verdict (labelled synthetic there). `python -m tools.tune_example` rewrites that example.

Each arm is a throughput factor and a coefficient of variation; repetition r of a cell measures
the build log's figure x factor x (1 + cv x (-1, 0, +1)[r % 3]), so the sample cv of three
repetitions is exactly the cv asked for, and every effect is known in advance.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tpudeploy import facts
from tpudeploy.bench.commands import META_CLIENTS, META_CONFIG, META_CONTEXT, META_IMAGE, META_REP
from tpudeploy.bench.specmetrics import SPEC_KEYS
from tpudeploy.tune.bootverdict import BOOT_SUFFIX
from tpudeploy.tune.ranking import STATUS_SUFFIX, write_report

DOC = Path(__file__).resolve().parent.parent / "docs" / "tuning.md"
BEGIN, END = "<!-- BEGIN synthetic verdict -->", "<!-- END synthetic verdict -->"
README = DOC.parent.parent / "README.md"
README_BEGIN = "<!-- BEGIN synthetic ranked verdict -->"
README_END = "<!-- END synthetic ranked verdict -->"
OFFSETS = (-1.0, 0.0, 1.0)
IMAGE = "vllm/vllm-tpu@sha256:" + "0" * 64  # synthetic: no such image


@dataclass(frozen=True)
class Effect:
    factor: float  # throughput x, TTFT and TPOT / (the arm is this much faster)
    cv: float
    fails: bool = False  # the arm dies at boot (make wait fails), as the build log's 0.95 did
    # At these client counts the factor is this instead (a speculative arm: faster alone,
    # slower when the batch is full).
    by_clients: Mapping[int, float] = field(default_factory=dict)
    # A speculative arm's acceptance rate per client count: the spec-decode counters written.
    acceptance: Mapping[int, float] = field(default_factory=dict)
    # The boot check's figures for each boot: (seconds to ready, compile seconds); None: no
    # boot record (results measured by hand).
    boot: tuple[float, float] | None = None
    kv_cache_groups: int = 1

    def at(self, clients: int) -> float:
        return self.by_clients.get(clients, self.factor)


def record(
    context: int, clients: int, rep: int, effect: Effect, arm: str, round_: int
) -> dict[str, object]:
    """One run as `vllm bench serve --save-result` saves it (the keys the report reads)."""
    jitter = 1 + effect.cv * OFFSETS[(rep + round_) % 3]
    factor = effect.at(clients)
    tok_s = facts.AGGREGATE_TOK_S[(context, clients)] * factor * jitter
    ttft = facts.MEDIAN_TTFT_MS[(context, clients)] / (factor * jitter)
    tpot = 1000.0 / (facts.PER_STREAM_TOK_S[(context, clients)] * factor * jitter)
    prompts = max(clients * 8, 32)
    spec = {}
    if clients in effect.acceptance:
        drafted = prompts * 256  # what the counters grew by: 256 output tokens a request
        spec = {
            SPEC_KEYS["spec_drafted"]: drafted,
            SPEC_KEYS["spec_accepted"]: round(drafted * effect.acceptance[clients]),
        }
    return {
        **spec,
        "date": f"20261201-{round_:02d}{clients % 60:02d}{context % 60:02d}",
        "backend": "openai-chat",
        "model_id": facts.MODEL,
        "num_prompts": prompts,
        META_CONTEXT: str(context),
        META_CLIENTS: str(clients),
        META_REP: str(rep),
        META_CONFIG: arm,
        META_IMAGE: IMAGE,
        "request_rate": "inf",
        "max_concurrency": clients,
        "completed": prompts,
        "failed": 0,
        "total_input_tokens": prompts * context,
        "output_throughput": tok_s,
        "median_ttft_ms": ttft,
        "median_tpot_ms": tpot,
    }


def write(
    out: Path,
    effects: Mapping[str, Effect],
    *,
    rounds: int = facts.REPETITIONS,
    cells: Sequence[tuple[int, int]] = ((128, 1), (128, 16), (1024, 1), (1024, 16)),
) -> Path:
    """OUT laid out as `make tune` leaves it: OUT/<arm>/round-<r>/ and its status file."""
    for arm, effect in effects.items():
        for r in range(1, rounds + 1):
            boot = out / arm / f"round-{r}"
            boot.parent.mkdir(parents=True, exist_ok=True)
            status: dict[str, object] = {"arm": arm, "round": r, "status": "done"}
            if effect.fails:
                status.update(
                    status="failed",
                    step="wait",
                    reason="vLLM exited during compile: RuntimeProgramAllocationFailure: "
                    "Attempting to reserve 384.11M at the bottom of memory (synthetic)",
                )
            else:
                boot.mkdir(exist_ok=True)
                for context, clients in cells:
                    rec = record(context, clients, 1, effect, arm, r)
                    name = f"ctx{context}-c{clients}-r1.json"
                    (boot / name).write_text(json.dumps(rec), encoding="utf-8")
            if effect.boot is not None and not effect.fails:
                write_boot(boot.with_name(boot.name + BOOT_SUFFIX), effect, warm=r > 1)
            status_file = boot.with_name(boot.name + STATUS_SUFFIX)
            status_file.write_text(json.dumps(status), encoding="utf-8")
    return out


def write_boot(path: Path, effect: Effect, *, warm: bool) -> None:
    """A boot record as `make boot-record` keeps it: the node's boot check of a boot whose log
    says `effect.boot` (tpudeploy/bootcheck.py parses the log; this is its output's shape)."""
    assert effect.boot is not None
    ready, compile_s = effect.boot
    measured = {
        "compile_s": compile_s,
        "kv_cache_groups": effect.kv_cache_groups,
        "num_blocks": facts.KV_POOL_TOKENS // 64,
        "block_size": 64,
        "kv_tokens": facts.KV_POOL_TOKENS,
        "kv_dtype": "bfloat16",
        "weights_dtype": "bfloat16",
    }
    if warm:  # the compile cache kept: the build log's warm boot against its cold one
        ready, compile_s = (x * facts.WARM_BOOT_S / facts.COLD_BOOT_S for x in (ready, compile_s))
        measured["compile_s"] = compile_s
    timings = {"vllm_s": ready, "cache": "hit" if warm else "miss"}
    path.write_text(json.dumps({"measured": measured, "timings": timings}), encoding="utf-8")


COLD = (facts.COLD_BOOT_S, facts.COMPILE_S)
EXAMPLE: Mapping[str, Effect] = {
    "baseline": Effect(1.0, 0.01, boot=COLD),
    "batched-tokens-8192": Effect(1.05, 0.01, boot=(facts.COLD_BOOT_S + 43, facts.COMPILE_S + 43)),
    "bucket-padding-128": Effect(1.05, 0.20, boot=COLD),
    "max-model-len-65536": Effect(1.005, 0.02, boot=COLD),
    "gpu-0.95": Effect(1.0, 0.0, fails=True),
}


def example_markdown(tmp: Path) -> str:
    """The report of EXAMPLE at the build log's flex-start rate, as docs/tuning.md shows it."""
    write(tmp, EXAMPLE)
    price = facts.PRICES["us-west4"].per_chip_hour["flex-start"]
    path = write_report(tmp, baseline="baseline", price_per_hour=price, plots=False)
    text = path.read_text(encoding="utf-8")
    # The doc shows the summary and the throughput tables; the plots and the latency tables are
    # in every real report.
    text = re.sub(r"\n{3,}", "\n\n", re.sub(r"\n!\[[^\n]*\]\([^)]*\)\n", "\n", text))
    return text[: text.index("\n## Median time-to-first-token")].rstrip() + "\n"


def ranked_table(example: str) -> str:
    """The ranked summary's table alone: what the README shows of the example."""
    rows = example[example.index("## Ranked") :].split("\n\n")[1]
    return rows.strip() + "\n"


def _write(path: Path, begin: str, end: str, text: str) -> None:
    doc = path.read_text(encoding="utf-8")
    start, stop = doc.index(begin) + len(begin), doc.index(end)
    path.write_text(doc[:start] + "\n" + text + doc[stop:], encoding="utf-8")


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        example = example_markdown(Path(tmp))
    _write(DOC, BEGIN, END, example)
    _write(README, README_BEGIN, README_END, ranked_table(example))
    print(f"wrote the synthetic verdict into {DOC} and its ranking into {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
