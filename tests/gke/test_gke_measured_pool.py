"""GKE's replica planner follows `[vllm] measured_kv_pool` as the TPU VM planner does (issue 40):
a build that windows its sliding layers holds a bigger pool, so each replica runs more safe
clients, the KV wall needs fewer replicas, the HPA's queue target follows, and every line that
prints the pool says it is the build's measured one, not the build log's."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests import boot_logs
from tpudeploy import bootcheck, facts, planner
from tpudeploy.config import parse_config
from tpudeploy.gke import pod, replicaplan, scaleplan, summary

# A windowed build's boot log: two KV cache groups, 14,000 blocks of 64 tokens (896,000).
MEASURED = bootcheck.parse_log(boot_logs.vllm_log(groups=2, blocks=14_000))
SOURCE = "tune-results/x/windowed/round-1.boot.json"
LOAD = {"expected_clients": 64, "expected_context": 8192}


def _data(measured: bool) -> dict[str, Any]:
    data: dict[str, Any] = {"platform": "gke", "gke": {"max_replicas": 4}, "load": LOAD}
    if measured:
        table = {
            "tokens": MEASURED["kv_tokens"],
            "kv_cache_groups": MEASURED["kv_cache_groups"],
            "source": SOURCE,
        }
        data["vllm"] = {"measured_kv_pool": table}
    return data


@pytest.fixture(scope="module")
def two() -> tuple[Any, Any]:
    """The same deployment without and with the windowed build's measurement."""
    return parse_config(_data(False)), parse_config(_data(True))


def test_each_replica_holds_what_the_tpu_vm_planner_says_the_build_holds(
    two: tuple[Any, Any],
) -> None:
    plain, windowed = two
    # The TPU VM planner's pool for each config is the reference: GKE multiplies it.
    for cfg in two:
        tpuvm = planner.kv_pool(
            max_model_len=cfg.vllm.max_model_len, measured=cfg.vllm.measured_pool
        )
        plan = replicaplan.replica_plan(cfg)
        assert plan.pool.tokens == tpuvm.tokens
        assert plan.safe_clients_per_replica == tpuvm.safe_clients(LOAD["expected_context"])
    a, b = replicaplan.replica_plan(plain), replicaplan.replica_plan(windowed)
    assert b.pool.tokens == 14_000 * 64 != a.pool.tokens
    # 64 x 8K is past one replica's wall on the build log's pool, within the windowed one's.
    safe = int(14_000 * 64 * facts.SAFE_POOL_FRACTION) // 8192
    assert b.safe_clients_per_replica == safe > LOAD["expected_clients"]
    assert (a.replicas_needed, b.replicas_needed) == (3, 1)
    # The HPA's queue target (what the serving stack writes) is a quarter of the safe clients.
    assert pod.hpa_waiting_target(windowed) == math.ceil(safe / 4)
    assert pod.hpa_waiting_target(plain) == math.ceil(a.safe_clients_per_replica / 4)


def test_every_line_that_prints_the_pool_says_whose_it_is(two: tuple[Any, Any]) -> None:
    plain, windowed = two
    said = (
        f"(the build's measured pool, 2 KV cache groups, sliding windows on: {SOURCE}; not the "
        f"build log's {facts.KV_POOL_TOKENS:,})"
    )
    (line,) = [x for x in summary.summary(windowed) if x.startswith("per replica: KV pool")]
    assert f"KV pool {14_000 * 64:,} tokens {said}" in line
    (plain_line,) = [x for x in summary.summary(plain) if x.startswith("per replica: KV pool")]
    assert "measured pool" not in plain_line
    p = scaleplan.scale_plan(windowed, clients=64, context=8192, ttft_ms=None)
    assert said in "\n".join(scaleplan.report(windowed, p))
    assert "measured pool" not in "\n".join(
        scaleplan.report(plain, scaleplan.scale_plan(plain, clients=64, context=8192, ttft_ms=None))
    )
