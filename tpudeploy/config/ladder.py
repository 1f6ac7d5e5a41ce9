"""The capacity ladder of one TPU VM: `capacity = [{provisioning, zone}, ...]`, tried in order.

`make deploy` tries the first rung; on a capacity or quota error Google documents for the TPU API
it removes what that rung left and tries the next (tpudeploy/tpuvm/ladder.py walks it). The
rung that runs is the deployment's `provisioning` and `zone`: loading fills them in from the
chosen rung, so every stack, deadline job, price and command sees the rung's values, and the
compile-cache bucket stays in the home region (the first rung's: `DeployConfig.home_region`).

A leaf of the config package: the shape, which rung applies, and the rules that span rungs. The
per-zone rules (Google's v5e zone list, flex-start's known-good zones, a flex-start run's end)
are loading's, applied to each rung in turn under the rung's own key (capacity[N].zone).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator

from tpudeploy import facts, names
from tpudeploy.config import checks
from tpudeploy.config.base import Strict
from tpudeploy.config.messages import problem

# `make deploy`'s walker names the rung it is trying; every command after it reads the rung the
# walker recorded (tpudeploy/tpuvm/ladder.py), else the first.
RUNG_ENV = "TPUDEPLOY_RUNG"
# The label the node carries: which rung it is, so `make status` can say so from the node itself.
RUNG_LABEL = "tpudeploy-rung"

# The quota each rung draws on, as Google's TPU quota page names it for v5e serving types
# (https://cloud.google.com/tpu/docs/quota, read 2026-12-03: "Creating a v5e instance for
# inference (v5litepod-1, v5litepod-4, v5litepod-8) requires serving quota types:
# tpu-v5s-litepod-serving for on-demand TPUs, tpu-v5s-litepod-serving-preemptible for
# preemptible TPUs"; its quota-type table files spot under preemptible: "preemptible (spot)").
# The deployment's default name (the schema's `name`), here so the record's path is known before
# the schema has judged the file.
DEFAULT_NAME = "gemma4-v5e"
# Flex-start's quota type is not on the stored copies of that page: named as unknown, not guessed.
QUOTA_SOURCE = "cloud.google.com/tpu/docs/quota (v5e serving quota types)"
QUOTA_BY_PROVISIONING: Mapping[str, str] = {
    "on-demand": "tpu-v5s-litepod-serving",
    "spot": "tpu-v5s-litepod-serving-preemptible",
    "flex-start": "unnamed (Google's quota page, as stored, names none for flex-start)",
}

# Cloud Storage, a read from a bucket in one region by a VM in another: "Data transfer within
# Google Cloud" between regions of one continent is billed per GiB (cloud.google.com/storage/
# pricing, network usage; the Cloud Billing API's CloudStorageEgressWorkload: "Data moves between
# different locations on the same continent"); same-region reads are free. The stored copies of
# the pricing page show its storage table but not the network row's figure: $0.02/GiB between
# regions within North America is the rate the page listed when last read by hand, not re-read
# here, so the summary says "about" and docs/capacity-and-cost.md says where to check it.
GCS_INTER_REGION_NA_PER_GIB = 0.02
NORTH_AMERICA_REGION_PREFIXES = ("us-", "northamerica-")

PROVISIONING = ("flex-start", "spot", "on-demand")


class Rung(Strict):
    """One rung: how the node is provisioned, and where."""

    provisioning: Literal["flex-start", "spot", "on-demand"]
    """flex-start, spot or on-demand"""
    zone: str
    """a zone Google lists for TPU v5e (flex-start: a known-good one)"""

    @field_validator("zone")
    @classmethod
    def _zone(cls, v: str) -> str:
        return checks.check_zone(v)

    @property
    def region(self) -> str:
        return names.region_of(self.zone)

    def label(self) -> str:
        return f"{self.provisioning} in {self.zone}"


def record_path(config_file: Path, name: str) -> Path:
    """Where the walker records the rung that runs: beside the config file, one per deployment
    name (git ignores it). Local, like local state: with a state bucket a teammate's machine has
    none, and its commands use the first rung unless TPUDEPLOY_RUNG says otherwise; the node's
    label (RUNG_LABEL) is what `make status` shows either way."""
    return config_file.parent / f"tpudeploy.{name}.rung.json"


def rung_in_use(config_file: Path, data: Mapping[str, Any]) -> int:
    """The rung a command acts on: TPUDEPLOY_RUNG (the walker sets it while it tries a rung),
    else the recorded one, else the first. A value that is not a number is left for select()
    to refuse by name (0 is out of range)."""
    if not data.get("capacity"):
        return 1
    given = os.environ.get(RUNG_ENV, "").strip()
    if given:
        return int(given) if given.isdigit() else 0
    name = data.get("name", DEFAULT_NAME)
    try:
        recorded = json.loads(record_path(config_file, str(name)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 1
    rung = recorded.get("rung") if isinstance(recorded, dict) else None
    return rung if isinstance(rung, int) and rung >= 1 else 1


def check_capacity(v: object) -> object:
    """The ladder's shape, each rung worded by its number: a list of {provisioning, zone}
    tables. Raises ValueError("reason; fix") as the schema's checks do."""
    if not isinstance(v, list | tuple):
        raise ValueError(
            "not a list of rungs; write e.g. capacity = "
            '[{provisioning = "spot", zone = "us-west4-a"}]'
        )
    for i, rung in enumerate(v):
        where = f"rung {i + 1}"
        if isinstance(rung, Rung):
            continue
        if not isinstance(rung, Mapping):
            raise ValueError(
                f"{where} is not a table; write it as "
                '{provisioning = "spot", zone = "us-west4-a"}'
            )
        unknown = sorted(set(rung) - {"provisioning", "zone"})
        missing = [k for k in ("provisioning", "zone") if k not in rung]
        if unknown or missing:
            raise ValueError(
                f"{where} has "
                + (f"unknown key {unknown[0]!r}" if unknown else f"no {missing[0]}")
                + "; a rung takes exactly provisioning and zone"
            )
        if rung["provisioning"] not in PROVISIONING:
            raise ValueError(
                f"{where}'s provisioning {rung['provisioning']!r} is not one of "
                f"{', '.join(PROVISIONING)}; use one of them"
            )
        if not isinstance(rung["zone"], str) or not names.ZONE_RE.fullmatch(rung["zone"]):
            raise ValueError(
                f"{where}'s zone {rung['zone']!r} is not a zone name; write e.g. us-west4-a"
            )
    return tuple(v)


def rung_key(index: int) -> str:
    """A rung's key in messages, counting from 1 as the walker and `make status` do."""
    return f"capacity[{index + 1}]"


def select(data: dict[str, Any], rung: int) -> list[str]:
    """Fill `data`'s provisioning and zone from rung number `rung` (from 1) of its capacity list,
    in place; the problems that keep it from doing so. A malformed list is left to the schema."""
    ladder = data.get("capacity")
    if not ladder:
        return []  # none, or empty: no ladder (a dumped config carries an empty one)
    both = [key for key in ("provisioning", "zone") if key in data]
    if both:
        return [
            problem(
                both[0],
                data[both[0]],
                "set together with capacity: the ladder's rungs say how and where the node "
                "runs, so a top-level provisioning or zone would be ignored on every rung",
                f"remove {' and '.join(both)} and write the preferred choice as capacity's "
                'first rung, e.g. capacity = [{provisioning = "spot", zone = "us-west4-a"}, '
                '{provisioning = "flex-start", zone = "us-central1-a"}]; or remove capacity',
            )
        ]
    if not isinstance(ladder, list):
        return []  # the schema words it
    if not 1 <= rung <= len(ladder):
        return [
            problem(
                RUNG_ENV,
                rung,
                f"the ladder has {len(ladder)} rung(s), counted from 1",
                f"unset {RUNG_ENV}, or give a number from 1 to {len(ladder)}",
            )
        ]
    chosen = ladder[rung - 1]
    # Only a rung of the right shape is copied: a wrong one is the schema's to word, under
    # capacity, not as a top-level key the user never wrote.
    if (
        isinstance(chosen, dict)
        and chosen.get("provisioning") in PROVISIONING
        and isinstance(chosen.get("zone"), str)
        and names.ZONE_RE.fullmatch(chosen["zone"])
    ):
        data["provisioning"], data["zone"] = chosen["provisioning"], chosen["zone"]
    return []


def cache_read_cost(home_region: str, rung_region: str) -> float | None:
    """$ one boot of a rung in `rung_region` pays to read the compile-cache archive from the
    bucket in `home_region` (Cloud Storage's data transfer between regions); 0 in the same
    region; None where the rate read is not the pair's (it is North America's only)."""
    if home_region == rung_region:
        return 0.0
    if not all(r.startswith(NORTH_AMERICA_REGION_PREFIXES) for r in (home_region, rung_region)):
        return None
    return facts.COMPILE_CACHE_BYTES / 2**30 * GCS_INTER_REGION_NA_PER_GIB
