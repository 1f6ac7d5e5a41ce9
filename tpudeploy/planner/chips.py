"""TPU chip data and the accelerator_type -> (chip, chip count) lookup (home: tpudeploy.facts)."""

from __future__ import annotations

from tpudeploy.facts import (
    CHIPS,
    GIB,
    V5E,
    Accelerator,
    AcceleratorError,
    ChipSpec,
    lookup_accelerator,
)

__all__ = [
    "CHIPS",
    "GIB",
    "V5E",
    "Accelerator",
    "AcceleratorError",
    "ChipSpec",
    "lookup_accelerator",
]
