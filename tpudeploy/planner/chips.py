"""TPU chip facts as data and the accelerator_type -> (chip, chip count) lookup."""

from __future__ import annotations

import re
from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class ChipSpec:
    """One TPU chip as the runtime sees it (seed, "spec | v5e, one chip" table)."""

    generation: str
    gcloud_prefix: str
    runtime_version: str
    machine_type: str
    hbm_bytes: int
    # Bytes per second. Google quotes v5e in GiBps and v6e in GBps: store bytes, never "GB".
    hbm_bandwidth_bytes_per_s: int
    peak_bf16_flops: float
    peak_int8_ops: float
    native_formats: frozenset[str]
    slice_chip_counts: tuple[int, ...]


V5E = ChipSpec(
    generation="v5e",
    gcloud_prefix="v5litepod",
    runtime_version="v2-alpha-tpuv5-lite",
    machine_type="ct5lp-hightpu-1t",
    # 15.75 GiB is what the runtime reports; the "16 GB" vendor figure is not usable for sizing.
    hbm_bytes=round(15.75 * GIB),
    hbm_bandwidth_bytes_per_s=800 * GIB,
    peak_bf16_flops=197e12,
    peak_int8_ops=393e12,
    # fp8 and int4 widen back to bf16 before the MXU on v5e: storage only, no compute win.
    native_formats=frozenset({"bf16", "int8"}),
    slice_chip_counts=(1, 4, 8, 16, 32, 64, 128, 256),
)

CHIPS: dict[str, ChipSpec] = {V5E.gcloud_prefix: V5E}

# Prose spellings people type into CLI arguments; the seed: "v5e-1" is never valid there.
_PROSE_ALIASES = {"v5e": "v5litepod"}
_ACCELERATOR = re.compile(r"(?P<prefix>[a-z0-9]+)-(?P<count>\d+)")


@dataclass(frozen=True, slots=True)
class Accelerator:
    accelerator_type: str
    chip: ChipSpec
    chips: int


class AcceleratorError(ValueError):
    """An accelerator type the planner cannot use; `reason` is the message without key = value."""

    def __init__(self, key: str, value: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"{key} = {value!r}: {reason}")


def lookup_accelerator(accelerator_type: str, *, key: str = "accelerator_type") -> Accelerator:
    """Parse e.g. "v5litepod-1"; raise AcceleratorError naming the key, the value and the fix."""
    match = _ACCELERATOR.fullmatch(accelerator_type.strip().lower())
    known = ", ".join(f"{p}-N" for p in CHIPS)
    if match is None:
        raise AcceleratorError(
            key,
            accelerator_type,
            f"not '<generation>-<chips>'; use e.g. 'v5litepod-1' (known: {known})",
        )
    prefix, count = match["prefix"], int(match["count"])
    if prefix in _PROSE_ALIASES:
        fixed = f"{_PROSE_ALIASES[prefix]}-{count}"
        raise AcceleratorError(
            key,
            accelerator_type,
            f"'{prefix}' is the prose name; gcloud and the TPU API spell it "
            f"'{_PROSE_ALIASES[prefix]}' (seed). Use {fixed!r}",
        )
    chip = CHIPS.get(prefix)
    if chip is None:
        raise AcceleratorError(
            key,
            accelerator_type,
            f"unknown TPU generation '{prefix}'; this project carries chip data only for "
            f"{known}. Use 'v5litepod-1' or add a ChipSpec",
        )
    if count not in chip.slice_chip_counts:
        sizes = ", ".join(f"{prefix}-{n}" for n in chip.slice_chip_counts)
        raise AcceleratorError(
            key,
            accelerator_type,
            f"{chip.generation} slices come as {sizes}; use 'v5litepod-1' (the seed's one-chip "
            "slice)",
        )
    return Accelerator(accelerator_type=f"{prefix}-{count}", chip=chip, chips=count)
