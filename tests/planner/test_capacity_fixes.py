"""Every capacity message names a change that fits (issue 23 item 3): the suggested value,
applied, passes the same check; the model's own context limit is checked before boot."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tpudeploy import facts
from tpudeploy.config import parse_config
from tpudeploy.planner import check_settings
from tpudeploy.planner.capacity import kv_pool
from tpudeploy.planner.tables import synth_summary


def _errors(data: dict[str, Any]) -> list[str]:
    return [str(f) for f in check_settings(parse_config(data)) if f.severity == "error"]


def _safe_line(data: dict[str, Any]) -> str:
    (line,) = [x for x in synth_summary(parse_config(data)) if x.startswith("safe concurrency")]
    return line


def test_the_models_own_context_limit_is_checked() -> None:
    """262,144 tokens passed before; vLLM refuses a --max-model-len over max_position_embeddings
    at boot, after billing started."""
    limit = facts.GEMMA_4_E2B_GEOMETRY["max_position_embeddings"]
    assert limit == 131_072  # the model card's 128K
    (error,) = _errors({"vllm": {"max_model_len": 2 * limit}})
    assert error.startswith(f"error: vllm.max_model_len = {2 * limit}: ")
    assert f"max_position_embeddings {limit:,}" in error and f"Use {limit} or less" in error
    assert _errors({"vllm": {"max_model_len": limit}}) == []


def test_a_context_over_the_pool_is_never_told_to_use_the_value_it_has() -> None:
    """At the 0.92 ceiling the old message said "Use 0.92"; the fix is a shorter context. The
    model limit is lifted here so that only the pool refuses."""
    data = {
        "vllm": {"max_model_len": 524_288},
        "model_geometry": {"max_position_embeddings": 1 << 20},
    }
    (error,) = _errors(data)
    assert "Use 0.92" not in error and "gpu_memory_utilization to" not in error
    (suggested,) = re.findall(r"Set vllm.max_model_len = (\d+) or less", error)
    data["vllm"]["max_model_len"] = int(suggested)
    assert _errors(data) == []


@pytest.mark.parametrize(
    ("vllm", "fix"),
    [
        ({"gpu_memory_utilization": 0.7}, r"raise vllm.gpu_memory_utilization to (0\.92)"),
        ({"kv_cache_memory_bytes": 2_000_000_000}, r"raise vllm.kv_cache_memory_bytes to (\d+)"),
    ],
)
def test_each_suggested_fix_for_a_small_pool_fits(vllm: dict[str, Any], fix: str) -> None:
    data = {"vllm": {"max_model_len": 131_072, **vllm}}
    (error,) = _errors(data)
    shorter = re.findall(r"Set vllm.max_model_len = (\d+) or less", error)
    (bigger,) = re.findall(fix, error)
    assert _errors({"vllm": {**data["vllm"], "max_model_len": int(shorter[0])}}) == []
    key = fix.split(" ")[1].removeprefix("vllm.")
    value = float(bigger) if "." in bigger else int(bigger)
    assert _errors({"vllm": {**data["vllm"], key: value}}) == []


def test_safe_concurrency_never_contradicts_itself() -> None:
    """ "1 safe client (clients x context < 250,149)" at a context over 250,149: the line now says
    none fits under it and names a context that brings one client under it."""
    data = {"vllm": {"max_model_len": 131_072, "gpu_memory_utilization": 0.75}}
    line = _safe_line(data)
    pool = kv_pool(max_model_len=131_072, gpu_memory_utilization=0.75)
    assert pool.safe_tokens <= 131_072  # the case the old line got wrong
    assert line.startswith("safe concurrency: none at 131,072 tokens")
    (shorter,) = re.findall(r"\[vllm\] max_model_len = (\d+) brings one client under it", line)
    fixed = {"vllm": {**data["vllm"], "max_model_len": int(shorter)}}
    clients, bound = re.findall(r"(\d+) client\(s\) at .* < ([\d,]+)\)", _safe_line(fixed))[0]
    assert int(clients) >= 1 and int(clients) * int(shorter) < int(bound.replace(",", ""))


@pytest.mark.parametrize(("clients", "context"), [(64, 8192), (2, 200_000), (1, 131_072)])
def test_load_warnings_name_loads_under_the_line(clients: int, context: int) -> None:
    data = {
        "vllm": {"max_model_len": 131_072, "gpu_memory_utilization": 0.75},
        "load": {"expected_clients": clients, "expected_context": min(context, 131_072)},
    }
    findings = [f for f in check_settings(parse_config(data)) if f.key.startswith("load.")]
    assert findings, data
    text = str(findings[0])
    assert "at most 0 client" not in text
    suggested = re.findall(r"(\d+) client\(s\) at ([\d,]+) tokens of context", text)
    assert suggested, text
    for n, ctx in suggested:
        load = {"expected_clients": int(n), "expected_context": int(ctx.replace(",", ""))}
        assert [
            f
            for f in check_settings(parse_config({**data, "load": load}))
            if f.key.startswith("load.")
        ] == [], load
