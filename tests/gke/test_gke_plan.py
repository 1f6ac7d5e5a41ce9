"""The replica planner against the build log's tables: KV wall, $/M tokens, boot budgets."""

from __future__ import annotations

import math

import pytest

from tpudeploy import facts
from tpudeploy.config import parse_config
from tpudeploy.gke import replicaplan, summary
from tpudeploy.planner import cost_per_million_tokens


def _cfg(clients: int, context: int, **gke: object) -> replicaplan.ReplicaPlan:
    cfg = parse_config(
        {
            "platform": "gke",
            "gke": gke,
            "load": {"expected_clients": clients, "expected_context": context},
        }
    )
    return replicaplan.replica_plan(cfg)


def test_64_clients_at_8k_need_more_than_one_replica_by_the_kv_wall() -> None:
    """Build log: 64 x 8,192 = 524,288 KV tokens against 321,344 resident: past the wall."""
    p = _cfg(64, 8192)
    assert p.safe_clients_per_replica == facts.SAFE_CLIENTS_X_CONTEXT // 8192  # 30
    assert p.replicas_needed == 3
    # each replica then runs at most 30 streams of 8K: the measured 16-client cell applies
    assert p.throughput_cell == (8192, 16)


def test_short_context_fits_one_replica() -> None:
    p = _cfg(64, 1024)
    assert p.replicas_needed == 1
    assert p.throughput_cell == (1024, 64)
    assert p.throughput_tok_s == facts.AGGREGATE_TOK_S[(1024, 64)]


def test_cost_is_the_chip_rate_per_replica_over_the_idle_floor() -> None:
    p = _cfg(64, 128, min_replicas=1, max_replicas=4)
    spot = facts.PRICES["us-west4"].per_chip_hour["spot"]
    floor = p.idle_floor_per_hour
    assert floor > 0.1  # at least the cluster fee
    lo, hi = p.hourly(1), p.hourly(4)
    assert lo is not None and hi is not None
    nat = facts.GKE_IDLE_PRICES["us-west4"][1].per_hour
    assert hi - lo == pytest.approx(3 * (spot + nat))
    # One chip's share without the floor is the build log's $0.107 per million at 1,496.5 tok/s
    per_chip = cost_per_million_tokens("spot", p.throughput_tok_s)
    assert per_chip == pytest.approx(0.107, abs=0.0005)
    m1, m4 = p.per_million(1), p.per_million(4)
    assert m1 is not None and m4 is not None
    # the floor spreads over more replicas: $/M falls toward the chip's own figure
    assert m1 > m4 > per_chip


def test_flex_start_alone_prices_at_flex_start() -> None:
    p = _cfg(16, 1024, capacity="flex-start")
    assert p.chip_model == "flex-start"
    assert p.chip_rate == facts.PRICES["us-west4"].per_chip_hour["flex-start"]


def test_boot_budgets_come_from_the_build_log() -> None:
    assert replicaplan.startup_budget_s() >= facts.COLD_BOOT_S * 1.2
    assert (
        replicaplan.startup_failure_threshold() * replicaplan.PROBE_PERIOD_S
        >= replicaplan.startup_budget_s()
    )
    assert replicaplan.scale_down_window_s() > facts.WARM_BOOT_S
    assert replicaplan.scale_down_window_s() % 60 == 0


def test_hpa_target_is_a_fraction_of_what_one_replica_runs() -> None:
    p = _cfg(64, 8192)
    assert p.autoscaling.waiting_target == math.ceil(
        30 * replicaplan.QUEUE_FRACTION_OF_SAFE_CLIENTS
    )
    assert (p.autoscaling.min_replicas, p.autoscaling.max_replicas) == (1, 4)


def test_the_summary_states_cost_idle_floor_and_the_billing_stop() -> None:
    cfg = parse_config(
        {"platform": "gke", "load": {"expected_clients": 64, "expected_context": 8192}}
    )
    text = "\n".join(summary.summary(cfg))
    assert "need 3 replica(s) by the KV wall (fits)" in text
    assert "idle floor: $" in text and "cluster management fee" in text
    assert "$/M output tokens:" in text
    # Issue 36 item 19: a recycled flex-start node is replaced while a replica wants it, so
    # "flex-start nodes end after 24 h" was a false cost sentence.
    assert "end after" not in text
    billing = next(line for line in text.splitlines() if line.startswith("billing stops:"))
    assert "recycled every 24 h and replaced while a replica wants it, so it bills on" in billing
    assert "when the deadline deletes the cluster" in billing


def test_too_few_max_replicas_is_said() -> None:
    cfg = parse_config(
        {
            "platform": "gke",
            "gke": {"max_replicas": 2},
            "load": {"expected_clients": 64, "expected_context": 8192},
        }
    )
    assert any("MORE than max_replicas = 2" in line for line in summary.summary(cfg))


def test_a_region_without_idle_prices_says_so() -> None:
    cfg = parse_config({"platform": "gke", "zone": "us-central1-a", "gke": {"capacity": "spot"}})
    lines = summary.summary(cfg)
    assert lines[-2].startswith("cost: not estimated")
    # and what ends the billing is still said; an opt-out's monthly cost cannot be
    assert lines[-1].startswith("deadline: Cloud Scheduler job")
    opted_out = parse_config(
        {
            "platform": "gke",
            "zone": "us-central1-a",
            "gke": {"capacity": "spot"},
            "max_run_duration": "none",
        }
    )
    assert "is not estimated here" in summary.summary(opted_out)[-1]


def test_with_routing_the_summary_says_what_the_costs_leave_out() -> None:
    """Issue 26: the Gateway is a regional Application Load Balancer, whose rates this project
    does not hold: the summary says it bills beyond the figures it prints, and that the
    deadline job (which deletes the cluster) leaves it."""
    plain = parse_config({"platform": "gke"})
    routed = parse_config(
        {
            "platform": "gke",
            "gke": {"min_version": facts.GKE_INFERENCE_CRDS_MIN_VERSION},
            "routing": {
                "gateway": True,
                "certificate": "gemma4-gateway",
                "proxy_subnet_cidr": "10.126.0.0/23",
                "scoring": "random",
            },
        }
    )
    assert not [line for line in summary.summary(plain) if line.startswith("routing:")]
    (line,) = [line for line in summary.summary(routed) if line.startswith("routing:")]
    assert "gke-l7-rilb, internal" in line and "scoring random" in line
    assert "bills beyond the cost and idle floor" in line and "not priced here" in line
    (deadline,) = [line for line in summary.summary(routed) if line.startswith("deadline:")]
    assert (
        "leaves the Service's load balancer rule ($0.0250/h until make destroy-all), the "
        "Gateway's load balancer (not priced here: see unfinished)" in deadline
    )
    assert "unfinished: the Gateway's load balancer is not priced" in "\n".join(
        summary.summary(routed)
    )
    (plain_deadline,) = [line for line in summary.summary(plain) if line.startswith("deadline:")]
    assert "Gateway" not in plain_deadline
