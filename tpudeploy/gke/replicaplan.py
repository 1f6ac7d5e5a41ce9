"""Replicas: the TPU VM planner's KV pool and prices, multiplied, plus what GKE bills at idle."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.planner import KvPool, NoPricesError, kv_pool, lookup_accelerator, price_table
from tpudeploy.planner.cost import HOURS_PER_MONTH, SEED_BOOT
from tpudeploy.terraform import StateResource

# The HPA scales on vllm:num_requests_waiting, Google's vLLM-on-TPU signal. At the KV wall a
# replica runs its safe clients and queues the rest; each waiting request waits for a running
# one to finish. A queue of a quarter of the running streams adds about a quarter of one
# request's time: past that, a new replica (a warm boot away) is worth its chip-hour.
QUEUE_FRACTION_OF_SAFE_CLIENTS = 0.25
# Scale-down waits longer than a warm boot (build log: 497 s): dropping a replica that the next
# burst needs back costs a compile. 25% over it, rounded up to whole minutes.
SCALE_DOWN_MARGIN = 1.25
# Startup probe budget: the cold boot (857 s, 80% of it XLA compilation) with 50% margin; the
# probe starts after the image pull, which the node's image streaming shortens.
STARTUP_MARGIN = 1.5
PROBE_PERIOD_S = 10


@dataclass(frozen=True, slots=True)
class Autoscaling:
    """The HorizontalPodAutoscaler's numbers, from the planner."""

    min_replicas: int
    max_replicas: int
    waiting_target: int
    scale_down_window_s: int


@dataclass(frozen=True, slots=True)
class ReplicaPlan:
    pool: KvPool
    context: int
    safe_clients_per_replica: int
    clients: int | None
    replicas_needed: int | None
    autoscaling: Autoscaling
    chip_model: str
    chip_rate: float | None
    idle_items: tuple[tuple[str, float], ...]
    throughput_cell: tuple[int, int]
    throughput_tok_s: float

    @property
    def idle_floor_per_hour(self) -> float:
        return sum(rate for _, rate in self.idle_items)

    def hourly(self, replicas: int) -> float | None:
        """$ per hour with `replicas` TPU nodes up, idle floor and one NAT VM each included."""
        if self.chip_rate is None:
            return None
        nat = facts.GKE_IDLE_PRICES["us-west4"][1].per_hour
        return self.idle_floor_per_hour + replicas * (self.chip_rate + nat)

    def per_million(self, replicas: int) -> float | None:
        """$ per million output tokens with every replica at the measured per-chip rate."""
        hourly = self.hourly(replicas)
        if hourly is None or replicas == 0:
            return None
        return hourly / (replicas * self.throughput_tok_s * 3600) * 1e6


def startup_budget_s() -> int:
    return math.ceil(SEED_BOOT.cold_s * STARTUP_MARGIN)


def startup_failure_threshold() -> int:
    return math.ceil(startup_budget_s() / PROBE_PERIOD_S)


def scale_down_window_s() -> int:
    return math.ceil(SEED_BOOT.warm_s * SCALE_DOWN_MARGIN / 60) * 60


def _pool(cfg: DeployConfig) -> KvPool:
    # Each replica runs the same build as a TPU VM would: a build that windows its sliding
    # layers holds the pool its boot log measured (`[vllm] measured_kv_pool`, issue 40), and
    # the KV wall, the replica count and the HPA's targets follow it as the TPU VM's do.
    return kv_pool(
        max_model_len=cfg.vllm.max_model_len,
        gpu_memory_utilization=cfg.vllm.gpu_memory_utilization,
        kv_cache_memory_bytes=cfg.vllm.kv_cache_memory_bytes,
        model=cfg.model_geometry,
        chip=lookup_accelerator(cfg.accelerator_type).chip,
        measured=cfg.vllm.measured_pool,
    )


def measured_cell(context: int, clients: int) -> tuple[int, int]:
    """The measured sweep cell for this load: the first context at or above it (the longest
    measured when beyond), the most clients at or below what one replica runs."""
    ctx = next((c for c in facts.CONTEXTS if c >= context), facts.CONTEXTS[-1])
    cl = max((c for c in facts.CLIENTS if c <= max(clients, 1)), default=facts.CLIENTS[0])
    return ctx, cl


def idle_items(cfg: DeployConfig) -> tuple[tuple[str, float], ...]:
    """The always-on items, $ per hour; raises NoPricesError for a region without rates."""
    region = cfg.effective_region
    floor = facts.GKE_IDLE_PRICES.get(region)
    system = facts.SYSTEM_NODE_PRICES.get((region, cfg.gke.system_machine_type))
    if floor is None or system is None:
        raise NoPricesError(
            f"no GKE idle-floor prices for {region} / system_machine_type "
            f"{cfg.gke.system_machine_type}: this project read us-west4 with e2-standard-2 only"
        )
    items = [(p.item, p.per_hour) for p in floor]
    items.append((system.item, system.per_hour))
    return tuple(items)


def replica_plan(cfg: DeployConfig) -> ReplicaPlan:
    """Replicas for [load] at its context, the HPA's numbers, and the cost at min and max."""
    pool = _pool(cfg)
    context = cfg.load.expected_context or cfg.vllm.max_model_len
    per_replica = pool.safe_clients(context)
    clients = cfg.load.expected_clients
    needed = math.ceil(clients / per_replica) if clients and per_replica else None
    model = cfg.gke.capacity_order[0]
    try:
        rate: float | None = price_table(cfg).rate(model)
        items = idle_items(cfg)
    except NoPricesError:
        rate, items = None, ()
    ctx, cl = measured_cell(context, per_replica)
    return ReplicaPlan(
        pool=pool,
        context=context,
        safe_clients_per_replica=per_replica,
        clients=clients,
        replicas_needed=needed,
        autoscaling=Autoscaling(
            min_replicas=cfg.gke.min_replicas,
            max_replicas=cfg.gke.max_replicas,
            waiting_target=max(1, math.ceil(per_replica * QUEUE_FRACTION_OF_SAFE_CLIENTS)),
            scale_down_window_s=scale_down_window_s(),
        ),
        chip_model=model,
        chip_rate=rate,
        idle_items=items,
        throughput_cell=(ctx, cl),
        throughput_tok_s=facts.AGGREGATE_TOK_S[(ctx, cl)],
    )


def billing_in_state(cfg: DeployConfig, resources: list[StateResource]) -> list[str]:
    """What of the cluster and serving stacks' state bills by the hour (a failed deploy or
    destroy names it): the cluster (the idle floor) and the Deployment (its replicas ask for
    TPU nodes, which bill while they run)."""
    found = []
    types = {r.type for r in resources}
    if "google_container_cluster" in types:
        try:
            floor = f"${sum(rate for _, rate in idle_items(cfg)):.4f}/h"
        except NoPricesError:
            floor = "its idle floor"
        found.append(
            f"GKE cluster {cfg.name} with its system node and NAT ({floor} until `make "
            "destroy-all`)"
        )
    if "kubernetes_deployment_v1" in types:
        plan = replica_plan(cfg)
        rate = f"${plan.chip_rate:.4f}/h" if plan.chip_rate is not None else "the chip rate"
        found.append(
            f"Deployment {cfg.name}: {cfg.gke.min_replicas} to {cfg.gke.max_replicas} replica(s), "
            f"each a TPU node at {rate} while it runs (`make destroy` removes it)"
        )
    return found


def deadline_line(cfg: DeployConfig, plan: ReplicaPlan) -> str:
    """What ends the billing if nobody runs make destroy-all: the deadline job, or (opted out)
    what forgetting it costs a month at min_replicas (the idle floor, the replicas' chips)."""
    replicas = cfg.gke.min_replicas
    if cfg.deadline_seconds is None:
        hourly = plan.hourly(replicas)
        cost = (
            f"forgetting it costs ${hourly * HOURS_PER_MONTH:,.0f}/month at {replicas} "
            f"replica(s) (${hourly:.4f}/h: the idle floor and {replicas} {plan.chip_model} "
            "chip(s))"
            if hourly is not None
            else "what forgetting it costs is not estimated here (no prices for this region)"
        )
        return (
            f'deadline: none (max_run_duration = "none"): nothing deletes the cluster; {cost}, '
            "until make destroy-all"
        )
    # What the deadline leaves bills on (clusters.delete leaves load balancers made after the
    # cluster: tpudeploy.gke.deadline_target.LEFT_AFTER_DEADLINE, with the quote).
    rule = next((rate for item, rate in plan.idle_items if "forwarding rule" in item), None)
    left = f"${rule:.4f}/h" if rule is not None else "its forwarding-rule rate (not priced here)"
    return (
        f"deadline: Cloud Scheduler job {cfg.deadline_job_name} deletes the cluster (its pools, "
        f"nodes and fee) at deploy time + {cfg.deadline_seconds / 3600:g} h; make extend BY=2h "
        f"moves it; it leaves the Service's load balancer rule ({left} until make destroy-all), "
        + (
            "the Gateway's load balancer (not priced here: see unfinished) and the proxy-only "
            "subnet, "
            if cfg.routing.gateway
            else ""
        )
        + "the router and NAT (nothing once no node is left), the secrets"
    )
