"""`[vllm] speculative_config`: the speculative-decoding methods offered, as data with sources.

Each method names the SpeculativeConfig keys vLLM reads for it, whether it downloads a second
checkpoint (a draft), and the drafts it may take. A draft is another gated checkpoint: it must
be named here with its size (the node's HF_HOME tmpfs holds both), so a config cannot ask the
node for a download nobody sized.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from tpudeploy import facts

INT_KEYS: Final = ("num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min")


@dataclass(frozen=True)
class Draft:
    """A draft checkpoint: the model it drafts for, its download size and where that is read."""

    target: str
    bytes: int
    gated: bool
    source: str


@dataclass(frozen=True)
class Method:
    """One `method` value: the keys vLLM reads for it and whether it needs a draft `model`."""

    int_keys: tuple[str, ...]
    draft: bool
    example: str
    source: str


METHODS: Final[Mapping[str, Method]] = MappingProxyType(
    {
        # The build log: n-gram "needs no draft checkpoint and is marked fully passing on TPU";
        # its keys are vLLM's own n-gram example (docs.vllm.ai, features/speculative_decoding/
        # n_gram: method, num_speculative_tokens, prompt_lookup_max); vllm/config/speculative.py
        # adds prompt_lookup_min.
        "ngram": Method(INT_KEYS, False, "5 (vLLM's n-gram example)", "docs.vllm.ai n_gram"),
        # vllm/config/speculative.py (vllm-project/vllm, stored commit 002e77c1): MTPModelTypes
        # lists "mtp" and "gemma4_mtp" among SpeculativeMethod; `model` is "the name of the
        # draft model". tpu-inference's own CI runs this model with it
        # (tests/e2e/test_speculative_decoding.py, test_gemma4_mtp_performance, commit
        # b8692ff of 2026-08-22: {"model": "google/gemma-4-E2B-it-assistant",
        # "num_speculative_tokens": 4, "method": "mtp"}, min_acceptance_rate=0.80), and its
        # runner compiles MTP helpers when `speculative_config.method == "mtp"`
        # (tpu_inference/runner/compilation_manager.py).
        "mtp": Method(
            ("num_speculative_tokens",),
            True,
            "4 (tpu-inference's Gemma 4 MTP test)",
            "vllm/config/speculative.py MTPModelTypes; tpu-inference test_gemma4_mtp_performance",
        ),
    }
)

# The acceptance rate upstream's CI requires of the Gemma 4 MTP draft (test_gemma4_mtp_performance,
# min_acceptance_rate=0.80): the bar a speculative arm's measured rate is read against.
UPSTREAM_MTP_ACCEPTANCE: Final = 0.80

DRAFTS: Final[Mapping[str, Draft]] = MappingProxyType(
    {
        # Gated like the main model (Gemma terms). Its size is not in the stored copies of the
        # Hub: the sibling E4B assistant is "78.8M (assistant) / 8B target", 165.8 MB as F16
        # (a GGUF mirror's model card of google/gemma-4-E4B-it-assistant). The E2B assistant is
        # no larger; 0.5 GB is a stated upper bound, three times that. Before any spend the
        # Hub's own file sizes are measured against it (tpudeploy/tune/hubcheck.py): a draft
        # over the bound is refused with the measured size, the figure to put here.
        "google/gemma-4-E2B-it-assistant": Draft(
            target=facts.MODEL,
            bytes=500 * 10**6,
            gated=True,
            source="upper bound: 3x the E4B assistant's 165.8 MB F16 (GGUF mirror model card)",
        ),
    }
)


def check_speculative_config(v: dict[str, str | int] | None) -> dict[str, str | int] | None:
    """The method, its keys and (for a draft method) a known draft; ValueError("reason; fix")."""
    if v is None:
        return v
    method = v.get("method")
    offered = ", ".join(f'"{m}"' for m in METHODS)
    spec = METHODS.get(method) if isinstance(method, str) else None
    if spec is None:
        raise ValueError(
            f"method {method!r} is not offered; use method = {offered} (each is vLLM's "
            "SpeculativeConfig method with a source in tpudeploy/config/speculative.py)"
        )
    allowed = {"method", *spec.int_keys, *(("model",) if spec.draft else ())}
    unknown = sorted(set(v) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed - {"method"}))
        raise ValueError(f"unknown key {unknown[0]!r}; the {method} method takes {takes}")
    for key in spec.int_keys:
        if key in v:
            value = v[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} = {value!r} must be a whole number of at least 1")
    if "num_speculative_tokens" not in v:
        raise ValueError(f"num_speculative_tokens is required; e.g. {spec.example}")
    if spec.draft:
        draft = v.get("model")
        known = ", ".join(DRAFTS)
        if draft not in DRAFTS:
            raise ValueError(
                f"the {method} method needs model = a draft checkpoint sized here, not "
                f"{draft!r}; use one of: {known}"
            )
    low, high = v.get("prompt_lookup_min"), v.get("prompt_lookup_max")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise ValueError(f"prompt_lookup_min {low} is above prompt_lookup_max {high}; swap them")
    return v


def draft_of(v: Mapping[str, str | int] | None) -> tuple[str, Draft] | None:
    """The draft checkpoint a (checked) speculative_config downloads, or None."""
    if not v:
        return None
    name = v.get("model")
    if isinstance(name, str) and name in DRAFTS:
        return name, DRAFTS[name]
    return None
