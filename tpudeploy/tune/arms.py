"""`make tune`'s arms: whole deployment configs, each your config with one overlay file's keys.

An arm is data: `tune/<arm>.toml` holds an `[arm]` table (its description) and the config keys it
changes. The build log's method is to "test the whole configuration, not a change to it": every
arm is merged into a complete config, validated by the same schema and guard rails as a deploy,
and booted from scratch. An arm the guard rails refuse is reported with their reason, never run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpudeploy import policy
from tpudeploy.config import ConfigError, DeployConfig
from tpudeploy.platform import guard_rails, parse_config
from tpudeploy.tune import armchecks

ARMS_DIR = Path(__file__).resolve().parent.parent.parent / "tune"
BASELINE = "baseline"
# Keys an arm may not change: they decide where and how the node runs and what is measured, not
# how it serves. A different zone, chip or sweep is another experiment, not an arm of this one.
FIXED_KEYS: Mapping[str, str] = {
    "project": "every arm runs in your project",
    "zone": "a zone changes the price and the capacity, not the server",
    "region": "a region changes the price and the capacity, not the server",
    "name": "every arm replaces the same node, one at a time",
    "provisioning": "the provisioning model changes the price, not the throughput",
    "accelerator_type": "the arms compare configurations on one chip",
    "runtime_version": "the arms compare configurations on one chip",
    "state_bucket": "every arm uses your deployment's state",
    "bench": "every arm must run the same sweep, or the ratios compare different workloads",
    "prices": "every arm is priced with your rates",
}


class ArmError(ValueError):
    """An arm file that cannot become a config; the message names the file, key and fix."""


@dataclass(frozen=True)
class Arm:
    """One arm: its name (the file's stem), what it changes, and the merged, validated config."""

    name: str
    description: str
    overlay: Mapping[str, Any]
    source: str
    data: Mapping[str, Any]  # the whole config as TOML data: your file with the overlay merged
    config: DeployConfig | None  # None when the schema or a guard rail refuses it
    refused: tuple[str, ...] = ()

    @property
    def runnable(self) -> bool:
        return self.config is not None and not self.refused

    @property
    def fingerprint(self) -> str:
        """Changes when the arm's whole config does: a resumed tune refuses a changed arm."""
        canonical = json.dumps(self.data, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """`overlay` over `base`, tables merged key by key, everything else replaced."""
    merged = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _validated(
    name: str, data: Mapping[str, Any], source: str
) -> tuple[DeployConfig | None, tuple[str, ...]]:
    try:
        cfg = parse_config(dict(data), source=source)
    except ConfigError as exc:
        return None, tuple(exc.problems)
    if name == BASELINE:
        return cfg, tuple(policy.refusals(guard_rails(cfg)))
    # An arm also passes what only a tune asks of it (tpudeploy/tune/armchecks.py): a pinned
    # vLLM that has its method, a draft that fits, compile threads the host has.
    return cfg, (*policy.refusals(guard_rails(cfg)), *armchecks.refusals(cfg))


def baseline(base: Mapping[str, Any], *, source: str) -> Arm:
    """Your config as it is: every ratio is against it (the seed's deployment by default)."""
    cfg, refused = _validated(BASELINE, base, source)
    return Arm(BASELINE, "your config as it is", {}, source, dict(base), cfg, refused)


def _read_overlay(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ArmError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    table = data.pop("arm", None)
    if not isinstance(table, dict) or not isinstance(table.get("description"), str):
        raise ArmError(
            f'{path}: no [arm] description; add `[arm]` with description = "what it tries"'
        )
    unknown = sorted(set(table) - {"description"})
    if unknown:
        raise ArmError(f"{path}: arm.{unknown[0]}: unknown key; [arm] takes description only")
    for key in data:
        if key in FIXED_KEYS:
            raise ArmError(
                f"{path}: {key}: an arm may not change it ({FIXED_KEYS[key]}); remove it from "
                "the arm, or change your own config and tune again"
            )
    if not data:
        raise ArmError(
            f"{path}: changes nothing; add the keys this arm tries (e.g. [vllm] max_model_len)"
        )
    return table["description"], data


def load_arms(
    base: Mapping[str, Any],
    *,
    source: str,
    arms_dir: Path = ARMS_DIR,
    only: Sequence[str] = (),
) -> list[Arm]:
    """The baseline first, then every `arms_dir/*.toml` (or those named in `only`), by name."""
    if not arms_dir.is_dir():
        raise ArmError(f"{arms_dir}: no such directory of arms; point TUNE_ARMS at one")
    files = {p.stem: p for p in sorted(arms_dir.glob("*.toml"))}
    if BASELINE in files:
        raise ArmError(
            f"{files[BASELINE]}: the name {BASELINE!r} is the baseline (your config); rename it"
        )
    missing = [name for name in only if name not in files]
    if missing:
        raise ArmError(
            f"ARMS: {missing[0]!r} is not an arm in {arms_dir}; known: {', '.join(files)}"
        )
    arms = [baseline(base, source=source)]
    for name, path in files.items():
        if only and name not in only:
            continue
        description, overlay = _read_overlay(path)
        data = merge(base, overlay)
        cfg, refused = _validated(name, data, f"{source} + {path.name}")
        arms.append(Arm(name, description, overlay, str(path), data, cfg, refused))
    return arms
