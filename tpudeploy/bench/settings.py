"""What a sweep measures: `[bench]` validated into SweepSettings (default: the build log)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tpudeploy import facts

MODEL = facts.MODEL
CONTAINER = "vllm-gemma4"
# The seed's max-model-len; a cell whose prompt + output exceeds it would be refused per request.
MAX_MODEL_LEN = facts.MAX_MODEL_LEN


# At least a tenth of every prompt stays random: a prompt that is all shared prefix is one
# request repeated, which prefix caching turns into a cache benchmark.
MAX_SHARED_PREFIX_PERCENT = 90


class BenchConfigError(ValueError):
    """A `[bench]` setting is invalid; the message names the key, the value and the fix."""


def check_shared_prefix_percent(value: int) -> int:
    if not 0 <= value <= MAX_SHARED_PREFIX_PERCENT:
        raise BenchConfigError(
            f"SHARED_PREFIX={value}: the percent of each prompt that all requests share must be "
            f"0 to {MAX_SHARED_PREFIX_PERCENT} (the rest stays random); agent turns that resend "
            "a long system prompt and tools are e.g. 75"
        )
    return value


@dataclass(frozen=True)
class SweepSettings:
    """What to measure: the grid, repetitions and request shape (default: the build log's)."""

    contexts: tuple[int, ...] = facts.CONTEXTS
    clients: tuple[int, ...] = facts.CLIENTS
    repetitions: int = facts.REPETITIONS
    output_len: int = 256
    # num_prompts = max(clients * prompts_per_client, min_prompts): every client sends several
    # requests, so the cell is measured in steady state rather than during ramp-up and drain.
    prompts_per_client: int = 8
    min_prompts: int = 32
    model: str = MODEL
    container: str = CONTAINER
    host: str = "127.0.0.1"
    port: int = 8000
    save_detailed: bool = False
    # Which server the sweep measures: the compile-cache key of the deployment's serving config
    # (image, accelerator, runtime, every `vllm serve` flag and container variable), so results
    # of two configs in one directory are never averaged together. None without a config file.
    config_hash: str | None = None
    # The name the server answers to when the deployment sets --served-model-name (extra_args);
    # `model` stays the Hugging Face id, which the client also loads the tokenizer from.
    served_model_name: str | None = None
    # The share of each prompt that is one prefix every request of a run shares (`vllm bench
    # serve --random-prefix-len`): an agent resends its system prompt and tool definitions every
    # turn, which is what prefix-aware routing and prefix caching exploit. 0: the build log's
    # prompts, random from the first token.
    shared_prefix_percent: int = 0
    # Where the client sends: None, the replica's own vLLM (host:port, one chip); or the
    # Gateway's https URL (make bench ROUTE=gateway): the whole pool behind the picker.
    base_url: str | None = None
    # Recorded with each run through the Gateway: the picker's [routing] scoring and how many
    # replicas were ready when the sweep started (the HPA may change it during the sweep).
    scoring: str | None = None
    replicas: int | None = None
    # The server decodes speculatively: each cell also records vLLM's spec-decode counters'
    # growth (tpudeploy/bench/specmetrics.py), its acceptance rate.
    spec_metrics: bool = False

    def shared_prefix_len(self, context: int) -> int:
        return context * self.shared_prefix_percent // 100

    def num_prompts(self, clients: int) -> int:
        return max(clients * self.prompts_per_client, self.min_prompts)


PROFILES: Mapping[str, SweepSettings] = {
    "full": SweepSettings(),
    "quick": SweepSettings(contexts=(128, 1024), clients=(1, 16), repetitions=1),
}


_INT_KEYS = ("repetitions", "output_len", "prompts_per_client", "min_prompts", "port")
_LIST_KEYS = ("contexts", "clients")
_STR_KEYS = ("model", "container", "host")
_KNOWN_KEYS = frozenset(_INT_KEYS + _LIST_KEYS + _STR_KEYS + ("save_detailed", "profile", "quick"))


def _positive_int(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BenchConfigError(f"bench.{key}: {value!r} is not a positive whole number; set e.g. 1")
    return value


def _apply(base: SweepSettings, table: Mapping[str, Any], prefix: str) -> SweepSettings:
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise BenchConfigError(
            f"{prefix}.{unknown[0]}: unknown key; known keys are {', '.join(sorted(_KNOWN_KEYS))}"
        )
    changes: dict[str, Any] = {}
    for key in _INT_KEYS:
        if key in table:
            changes[key] = _positive_int(key, table[key])
    for key in _LIST_KEYS:
        if key in table:
            values = table[key]
            if not isinstance(values, list) or not values:
                raise BenchConfigError(
                    f"{prefix}.{key}: {values!r} must be a non-empty list, e.g. [1, 4, 16, 64]"
                )
            ints = tuple(_positive_int(key, v) for v in values)
            if len(set(ints)) != len(ints):
                raise BenchConfigError(
                    f"{prefix}.{key}: {values!r} repeats a value; list each once"
                )
            changes[key] = tuple(sorted(ints))
    for key in _STR_KEYS:
        if key in table:
            if not isinstance(table[key], str) or not table[key].strip():
                raise BenchConfigError(f"{prefix}.{key}: {table[key]!r} must be a non-empty string")
            changes[key] = table[key]
    if "save_detailed" in table:
        if not isinstance(table["save_detailed"], bool):
            raise BenchConfigError(
                f"{prefix}.save_detailed: {table['save_detailed']!r} must be true or false"
            )
        changes["save_detailed"] = table["save_detailed"]
    return replace(base, **changes)


def settings_from_table(
    table: Mapping[str, Any] | None,
    *,
    profile: str | None = None,
    max_model_len: int = MAX_MODEL_LEN,
) -> tuple[str, SweepSettings]:
    """Return (profile, settings) from a `[bench]` config table; `profile` overrides the table's.

    `full` takes `[bench]` over the build log's sweep; `quick` takes `[bench.quick]` over the quick
    defaults, sharing the request shape (output_len, prompts, model, container) with `[bench]`.
    """
    table = dict(table or {})
    chosen = profile or table.get("profile", "full")
    if chosen not in PROFILES:
        raise BenchConfigError(
            f"bench.profile: {chosen!r} is not a profile; use one of {', '.join(PROFILES)}"
        )
    quick = table.pop("quick", {})
    table.pop("profile", None)
    if not isinstance(quick, Mapping):
        raise BenchConfigError(f"bench.quick: {quick!r} must be a table ([bench.quick])")
    settings = _apply(PROFILES["full"], table, "bench")
    if chosen == "quick":
        shared = {k: v for k, v in table.items() if k not in (*_LIST_KEYS, "repetitions")}
        settings = _apply(_apply(PROFILES["quick"], shared, "bench"), quick, "bench.quick")
    longest = max(settings.contexts) + settings.output_len
    if longest > max_model_len:
        raise BenchConfigError(
            f"bench.contexts: {max(settings.contexts)} + output_len {settings.output_len} = "
            f"{longest} tokens exceeds max-model-len {max_model_len}; the server would refuse "
            "every request of that cell. Lower the context or output_len."
        )
    return chosen, settings
