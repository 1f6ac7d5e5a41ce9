"""Scale to zero on GKE (tpudeploy/gke/zero.py): the no-traffic cost at each min_replicas, the
first request's wait, the break-even, and what a client is told while no replica is ready: a
503 whose Retry-After, followed, reaches the replica once it is ready (a real HTTP exchange on
loopback under a fake clock)."""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tpudeploy import facts
from tpudeploy.config import parse_config
from tpudeploy.gke import summary, wake, zero
from tpudeploy.planner import price_table

GKE = {"platform": "gke", "zone": "us-west4-a", "load": {"expected_clients": 64}}


def _cfg(**gke: Any) -> Any:
    return parse_config({**GKE, "gke": gke})


def _floor_and_replica(cfg: Any) -> tuple[float, float]:
    """The idle floor and one replica's hour, added up here from the rates' own tables."""
    floor = sum(p.per_hour for p in facts.GKE_IDLE_PRICES["us-west4"])
    floor += facts.SYSTEM_NODE_PRICES[("us-west4", "e2-standard-2")].per_hour
    nat_per_vm = next(p.per_hour for p in facts.GKE_IDLE_PRICES["us-west4"] if "NAT" in p.item)
    return floor, price_table(cfg).rate("spot") + nat_per_vm


def test_no_traffic_cost_counts_the_replicas_not_the_floor_alone() -> None:
    cfg = _cfg()
    floor, replica = _floor_and_replica(cfg)
    (line,) = [s for s in summary.summary(cfg) if s.startswith("no traffic:")]
    assert f"${floor:.4f}/h at min_replicas = 0" in line, line
    assert f"${floor + replica:.4f}/h at min_replicas = 1 (configured)" in line, line
    # The reading: one replica and the floor cost about $0.78/h, the floor $0.20/h.
    assert round(floor + replica, 2) == 0.78 and round(floor, 2) == 0.20


def test_a_larger_floor_of_replicas_is_priced_at_its_count() -> None:
    cfg = _cfg(min_replicas=3)
    floor, replica = _floor_and_replica(cfg)
    (line,) = [s for s in summary.summary(cfg) if s.startswith("no traffic:")]
    assert f"${floor + 3 * replica:.4f}/h at min_replicas = 3 (configured)" in line, line


def test_the_first_request_waits_for_detection_a_node_and_a_warm_boot() -> None:
    assert zero.first_request_s() == 30 + zero.NODE_PROVISION_ASSUMED_S + 497
    (line,) = [s for s in summary.summary(_cfg()) if s.startswith("from zero:")]
    assert f"~{30 + zero.NODE_PROVISION_ASSUMED_S + 497} s" in line and "not measured" in line


def test_break_even_counts_each_wake_overhead() -> None:
    overhead_h = (zero.NODE_PROVISION_ASSUMED_S + 497 + 660 + 600) / 3600
    assert zero.break_even_active_hours(1) == pytest.approx(24 - overhead_h)
    assert zero.break_even_active_hours(4) == pytest.approx(24 - 4 * overhead_h)
    (line,) = [s for s in summary.summary(_cfg()) if s.startswith("break-even:")]
    assert f"below {24 - overhead_h:.1f} active hours a day with one wake" in line, line


def test_retry_after_counts_down_the_timeline_between_a_floor_and_a_minute() -> None:
    total = zero.first_request_s()
    assert zero.retry_after_s(0) == wake.MAX_RETRY_AFTER_S == 60
    assert zero.retry_after_s(total - 40) == 40
    assert zero.retry_after_s(total - 5) == zero.MIN_RETRY_AFTER_S
    assert zero.retry_after_s(total + 300) == zero.MIN_RETRY_AFTER_S
    assert zero.retry_after_s(-5) == 60  # a clock behind the wake never asks for more


def test_the_503_is_openai_shaped_and_names_the_whole_wait() -> None:
    status, headers, body = zero.waking_response(100)
    left = zero.first_request_s() - 100
    assert status == 503 and headers["Retry-After"] == "60"
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert f"about {left} s left); retry after 60 s" in error["message"]
    assert error["type"] == "service_unavailable"


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _serve(clock: _Clock, ready_at: float) -> ThreadingHTTPServer:
    """The load balancer's view: the responder's 503 while no replica is ready (the wake starting
    at the first request), a replica's answer once one is."""
    wake: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            if clock.now >= ready_at:
                status, headers, body = 200, {"Content-Type": "application/json"}, b'{"id":"x"}'
            else:
                if not wake:
                    wake.append(clock.now)
                status, headers, body = zero.waking_response(clock.now - wake[0])
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("late_s", [0, 200])
def test_a_client_that_follows_retry_after_is_served_once_a_replica_is_ready(late_s: int) -> None:
    """The replica is ready at the planner's estimate, or 200 s after it (a slower node): the
    client sleeps what each 503 says and is served on the first try after ready."""
    clock = _Clock()
    ready_at = zero.first_request_s() + late_s
    server = _serve(clock, ready_at)
    attempts = []
    try:
        while True:
            conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
            conn.request("POST", "/v1/chat/completions", body=b"{}")
            response = conn.getresponse()
            response.read()
            conn.close()
            attempts.append((clock.now, response.status))
            if response.status == 200:
                break
            assert response.status == 503 and len(attempts) < 50
            clock.sleep(int(response.headers["Retry-After"]))
    finally:
        server.shutdown()
    served_at = attempts[-1][0]
    assert ready_at <= served_at < ready_at + zero.MIN_RETRY_AFTER_S
    # A retry a minute at most: about eleven on time, a few more when late, never a hammering.
    most = -(-ready_at // wake.MAX_RETRY_AFTER_S) + late_s // zero.MIN_RETRY_AFTER_S + 2
    assert len(attempts) <= most, attempts


def test_the_docs_quote_the_figures_the_code_prints() -> None:
    """README and docs/scale-out.md state the example's no-traffic cost, the first request's
    wait and the break-even as literals: held to the code here, so a changed rate or boot fails."""
    from tests.conftest import REPO_ROOT, gke_local_raw
    from tpudeploy.gke.replicaplan import replica_plan

    cfg = parse_config(gke_local_raw())
    plan = replica_plan(cfg)
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    doc = " ".join((REPO_ROOT / "docs" / "scale-out.md").read_text(encoding="utf-8").split())
    one, floor = plan.hourly(1), plan.hourly(0)
    assert one is not None and floor is not None
    assert f"${one:.4f}/h with one and no traffic" in readme
    assert f"~{zero.first_request_s()} s" in readme
    assert f"${floor:.4f}/h at 0, ${one:.4f}/h at 1" in doc
    assert f"**First-request latency from zero: ~{zero.first_request_s()} s**" in doc
    assert f"~{zero.wake_overhead_s():,} s of a replica" in doc
    assert f"below {zero.break_even_active_hours(1):.1f} active hours a day with one" in doc


def test_the_summary_at_zero_prices_tokens_from_the_first_replica() -> None:
    cfg = _cfg(min_replicas=0, min_version="1.37")
    (line,) = [s for s in summary.summary(cfg) if s.startswith("$/M output tokens:")]
    plan = replicaplan_of(cfg)
    assert line.startswith(
        f"$/M output tokens: none at 0 replicas (the floor bills alone), "
        f"${plan.per_million(1):.3f} at 1, ${plan.per_million(4):.3f} at 4"
    ), line


def replicaplan_of(cfg: Any) -> Any:
    from tpudeploy.gke.replicaplan import replica_plan

    return replica_plan(cfg)


def test_the_system_node_offers_pods_what_gke_leaves_after_its_reservations() -> None:
    # e2-standard-2, by hand: 2,000m less 6% of one core and 1% of the next; 8 GiB less 25% of
    # the first 4 GiB and 20% of the next 4, less the 100 MiB eviction threshold.
    memory = int(8192 - 0.25 * 4096 - 0.20 * 4096) - 100  # whole MiB, rounded down
    assert zero.system_allocatable("e2-standard-2") == (2000 - 60 - 10, memory)
    cpu4, memory16 = zero.system_allocatable("e2-standard-4")
    # The next 2 cores at 0.5% each; the next 8 GiB at 10%.
    assert cpu4 == 4000 - 60 - 10 - 2 * 5
    assert memory16 == int(16 * 1024 - 1024 - 819.2 - 819.2) - 100
    with pytest.raises(KeyError):
        zero.system_allocatable("n2-standard-2")
