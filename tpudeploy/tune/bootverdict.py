"""The verdict's boot side: each arm's boot and compile time and its build's own capabilities,
read from the boot check the node published for each of its boots (OUT/<arm>/round-<r>.boot.json,
tpudeploy/tpuvm/bootrecord.py), never from the config that asked for them.

The build log's first lesson holds here too: a flag can be accepted and change nothing (fp8 KV
gave 1.000x), so whether sliding windows are on, how large the KV pool is and what dtype the KV
cache and the weights have are what the boot log says (tpudeploy/bootcheck.py parses those
lines: tpu-inference's `Hybrid KV cache layout: num_kv_cache_groups=`, `Init kv-cache |
... regular_attn_dtype=`, vLLM's `Initializing a V1 LLM engine ... with config: ... dtype=`).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tpudeploy import facts

BOOT_SUFFIX = ".boot.json"  # beside each boot: the node's boot check (tpudeploy/bootcheck.py)
# The boot check's timings say how the compile cache was found (templates/startup.sh.j2).
WARM_CACHE = ("hit", "local")


@dataclass(frozen=True)
class Capabilities:
    """What one boot's log says the build did: sliding windows, the KV pool, the dtypes."""

    kv_cache_groups: int | None
    kv_tokens: int | None
    kv_dtype: str | None
    weights_dtype: str | None
    quantization: str | None

    @property
    def sliding_windows(self) -> bool | None:
        """More than one KV cache group is the hybrid layout with windowed sliding layers (the
        build log: num_kv_cache_groups=1 is "sliding windows still off")."""
        return None if self.kv_cache_groups is None else self.kv_cache_groups > 1

    @classmethod
    def of(cls, measured: Mapping[str, object]) -> Capabilities:
        def num(key: str) -> int | None:
            value = measured.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        def word(key: str) -> str | None:
            value = measured.get(key)
            return str(value) if isinstance(value, str) and value else None

        return cls(
            num("kv_cache_groups"),
            num("kv_tokens") or num("kv_size_tokens"),
            word("kv_dtype"),
            word("weights_dtype"),
            word("quantization"),
        )


@dataclass(frozen=True)
class Boot:
    """One boot of one arm: seconds to ready, how the compile cache was found, the compile
    seconds (the memory line to ready, as the boot check times it) and the capabilities."""

    round: int | None
    ready_s: float | None
    warm: bool
    compile_s: float | None
    capabilities: Capabilities


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def read_boot(path: Path) -> Boot | None:
    """One boot record; None when it is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    measured = data.get("measured") if isinstance(data.get("measured"), dict) else {}
    timings = data.get("timings") if isinstance(data.get("timings"), dict) else {}
    assert isinstance(measured, dict) and isinstance(timings, dict)
    digits = path.name.removesuffix(BOOT_SUFFIX).removeprefix("round-")
    return Boot(
        int(digits) if digits.isdigit() else None,
        _float(timings.get("vllm_s")),
        timings.get("cache") in WARM_CACHE,
        _float(measured.get("compile_s")),
        Capabilities.of(measured),
    )


def collect_boots(arm_dir: Path) -> tuple[Boot, ...]:
    found = (read_boot(p) for p in sorted(arm_dir.glob("*" + BOOT_SUFFIX)))
    return tuple(b for b in found if b is not None)


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} s"


def _one(values: Sequence[object]) -> str:
    """The value every boot agrees on, or each one when they differ (a moving image)."""
    kept = sorted({str(v) for v in values if v is not None})
    return " / ".join(kept) if kept else "-"


def markdown(boots: Mapping[str, Sequence[Boot]], *, baseline: str) -> list[str]:
    """The report's boot section: lines to append, none when no boot was recorded."""
    if not any(boots.values()):
        return []
    # Cold boots against cold boots: a warm boot's compile is mostly the cache's load.
    base_compile = _median([b.compile_s for b in boots.get(baseline, ()) if not b.warm])
    lines = [
        "",
        "## Boot, compile and the build's capabilities (each boot's own log)",
        "",
        f"Compile is the boot log's memory line to ready (the build log: "
        f"{facts.COMPILE_S:.0f} s of a {facts.COLD_BOOT_S:.0f} s cold boot); the KV pool is "
        f"blocks x page size as the engine allocated it (the build log: "
        f"{facts.KV_POOL_TOKENS:,} tokens, one KV cache group: sliding windows off).",
        "",
        "| arm | boots | cold to ready | warm to ready | cold compile | warm compile "
        "| cold compile vs baseline "
        "| KV cache groups | KV pool tokens | KV dtype | weights dtype |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    windowed: list[str] = []
    for arm, arm_boots in boots.items():
        if not arm_boots:
            continue
        for b in arm_boots:
            seen = b.capabilities
            if seen.sliding_windows and seen.kv_tokens and b.round is not None:
                windowed.append(
                    f"- **{arm}** (round {b.round}) windows its sliding layers: to plan and guard "
                    "with the pool it allocated, not the build log's, add to its config "
                    f"`[vllm] measured_kv_pool = {{ tokens = {seen.kv_tokens}, kv_cache_groups = "
                    f'{seen.kv_cache_groups}, source = "{arm}/round-{b.round}{BOOT_SUFFIX}" }}`'
                )
                break
        cold = _median([b.ready_s for b in arm_boots if not b.warm])
        warm = _median([b.ready_s for b in arm_boots if b.warm])
        compile_s = _median([b.compile_s for b in arm_boots if not b.warm])
        warm_compile = _median([b.compile_s for b in arm_boots if b.warm])
        versus = (
            f"{compile_s / base_compile:.2f}x"
            if compile_s is not None and base_compile and arm != baseline
            else "-"
        )
        caps = [b.capabilities for b in arm_boots]
        groups = _one([c.kv_cache_groups for c in caps])
        if any(c.sliding_windows for c in caps):
            groups += " (sliding windows ON)"
        pool = _one([f"{c.kv_tokens:,}" if c.kv_tokens else None for c in caps])
        weights = _one(
            [
                f"{c.weights_dtype}" + (f", {c.quantization}" if c.quantization else "")
                if c.weights_dtype
                else None
                for c in caps
            ]
        )
        lines.append(
            f"| {arm} | {len(arm_boots)} | {_seconds(cold)} | {_seconds(warm)} "
            f"| {_seconds(compile_s)} | {_seconds(warm_compile)} | {versus} | {groups} | {pool} "
            f"| {_one([c.kv_dtype for c in caps])} | {weights} |"
        )
    return lines + (["", *windowed] if windowed else [])
