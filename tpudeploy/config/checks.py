"""The schema's field checks, as plain functions of the value.

Each returns the value or raises ValueError("reason; fix"), which loading turns into "key =
value: reason. Fix: fix". The models' validators only call them: pydantic needs its decorators,
and a plain function can be tested, and mutation-tested (mutmut skips decorated functions), on
its own. Checks of [network] and media hosts live in network.py, of [prices] in prices.py, of
extra_args in serveflags.py, of docker names and sizes in containers.py.
"""

from __future__ import annotations

import re

from tpudeploy import facts, names
from tpudeploy.config import speculative
from tpudeploy.durations import DurationError, parse_duration

# The explicit opt-out of max_run_duration: a spot or on-demand node with no deadline (billing
# until `make destroy`).
NO_END = "none"
# Labels the project sets itself on the node (and the provider on every resource); a user label
# with one of these keys would silently replace it, or (tpudeploy-spec, the flex-start spec's
# fingerprint) break the spec check.
RESERVED_LABEL_KEYS = (
    "deployment",
    "provisioning",
    "managed_by",
    "component",
    "tpudeploy-spec",
    "tpudeploy-rung",  # a ladder's rung (config/ladder.py RUNG_LABEL)
)
_PARSER_RE = re.compile(r"^[A-Za-z0-9_]+$")
_MODEL_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?")
MODALITIES = ("image", "audio", "video")


def as_tuple(v: object) -> object:
    """TOML arrays arrive as lists; the strict models hold tuples (immutable, hashable)."""
    return tuple(v) if isinstance(v, list) else v


def check_model_id(v: str) -> str:
    if not _MODEL_ID_RE.fullmatch(v):
        raise ValueError("not a Hugging Face model id; write e.g. google/gemma-4-E2B-it")
    return v


def check_choice_name(v: str) -> str:
    """A vLLM parser or dtype name: one word, so it stays one argument on the command line."""
    if not _PARSER_RE.match(v):
        raise ValueError("not a vLLM choice name; write one word of letters, digits and '_'")
    return v


def check_mm_limits(v: dict[str, int]) -> dict[str, int]:
    for modality, count in v.items():
        if modality not in MODALITIES:
            raise ValueError(f"unknown modality {modality!r}; use image, audio or video")
        if count < 0:
            raise ValueError(f"{modality} limit {count} is negative; use 0 to disable")
    return v


def check_speculative_config(v: dict[str, str | int] | None) -> dict[str, str | int] | None:
    # The methods and drafts are data with their sources (tpudeploy/config/speculative.py).
    return speculative.check_speculative_config(v)


MEASURED_POOL_KEYS = ("tokens", "kv_cache_groups", "source")


def check_measured_kv_pool(v: dict[str, int | str] | None) -> dict[str, int | str] | None:
    """A build's measured KV pool (make tune-report prints it from a boot's log): tokens, the
    KV cache groups it had, and where it was read."""
    if v is None:
        return v
    unknown = sorted(set(v) - set(MEASURED_POOL_KEYS))
    missing = [k for k in MEASURED_POOL_KEYS if k not in v]
    if unknown or missing:
        raise ValueError(
            f"takes exactly {', '.join(MEASURED_POOL_KEYS)} "
            f"({'unknown ' + repr(unknown[0]) if unknown else 'missing ' + repr(missing[0])}); "
            "copy the line make tune-report prints"
        )
    for key in ("tokens", "kv_cache_groups"):
        value = v[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} = {value!r} must be a whole number of at least 1")
    if v["kv_cache_groups"] == 1:
        raise ValueError(
            "kv_cache_groups = 1: sliding windows off, the pool the planner computes (the build "
            "log's, within 1%, which every boot check verifies); remove measured_kv_pool"
        )
    if not isinstance(v["source"], str) or not v["source"].strip():
        raise ValueError("source must say which boot measured it (a boot record's path)")
    return v


def check_distinct(v: list[int] | None) -> list[int] | None:
    if v is not None and len(set(v)) != len(v):
        raise ValueError(f"{v!r} repeats a value; list each once")
    return v


def check_duration(v: object) -> object:
    """The duration grammar's own reason and fix, without its key (loading adds the key). Runs
    before the type check: a value of neither type (true, 1.5) gets this one message."""
    try:
        parse_duration(v)  # type: ignore[arg-type]
    except DurationError as exc:
        raise ValueError(f"{exc.reason}; {exc.fix}") from None
    return v


def check_run_duration(v: object) -> object:
    """max_run_duration: a duration, unset (the provisioning model's default) or "none"."""
    if v is None or (isinstance(v, str) and v.strip().lower() == NO_END):
        return v
    try:
        parse_duration(v)  # type: ignore[arg-type]
    except DurationError as exc:
        fix = f'{exc.fix}; or "{NO_END}" (spot, on-demand) to bill until make destroy'
        raise ValueError(f"{exc.reason}; {fix}") from None
    return v


def check_bucket(v: str) -> str:
    if v and not names.BUCKET_RE.fullmatch(v):
        raise ValueError("not a Cloud Storage bucket name; write the bare name, no gs://")
    return v


def check_project(v: str) -> str:
    if v and not names.PROJECT_ID_RE.fullmatch(v):
        raise ValueError(
            "not a Google Cloud project id; use the id (6-30 lowercase letters, digits, "
            "hyphens), not the display name or number"
        )
    return v


def check_zone(v: str) -> str:
    if not names.ZONE_RE.fullmatch(v):
        raise ValueError("not a zone name; write e.g. us-west4-a (the build log's zone)")
    return v


def check_deployment_name(v: str) -> str:
    if not names.DEPLOYMENT_NAME_RE.fullmatch(v):
        raise ValueError(
            "not a usable deployment name (it prefixes the node, the service account and "
            "the secrets); use 3-24 lowercase letters, digits and hyphens, starting with a "
            "letter, e.g. gemma4-v5e"
        )
    return v


def check_accelerator(v: str) -> str:
    # One judge of accelerator types (tpudeploy.facts): one message for an unknown chip.
    try:
        facts.lookup_accelerator(v)
    except facts.AcceleratorError as exc:
        raise ValueError(exc.reason) from None
    return v


def check_labels(v: dict[str, str]) -> dict[str, str]:
    for key, value in v.items():
        if key in RESERVED_LABEL_KEYS:
            raise ValueError(
                f"label key {key!r} is set by tpudeploy itself; rename it (reserved: "
                + ", ".join(RESERVED_LABEL_KEYS)
                + ")"
            )
        if not names.LABEL_KEY_RE.fullmatch(key) or not names.LABEL_VALUE_RE.fullmatch(value):
            raise ValueError(
                f"label {key!r} = {value!r} is not a valid Google Cloud label; use lowercase "
                "letters, digits, '_' and '-', keys starting with a letter, at most 63 "
                "characters"
            )
    return v
