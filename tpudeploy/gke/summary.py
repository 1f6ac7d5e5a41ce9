"""What `make synth`, `make check` and `make cost` print for platform = "gke": the replica plan,
its autoscaling, the Gateway when [routing] has one, the cost and what stops the billing."""

from __future__ import annotations

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.gke import metrics_adapter, reach, routing, zero
from tpudeploy.gke.replicaplan import ReplicaPlan, deadline_line, replica_plan
from tpudeploy.planner.cost import HOURS_PER_MONTH, SEED_BOOT


def summary(cfg: DeployConfig) -> list[str]:
    """What `make synth`, `make check` and `make cost` print for platform = "gke"."""
    plan = replica_plan(cfg)
    a = plan.autoscaling
    lines = [
        f"replicas: {a.min_replicas} to {a.max_replicas} x {facts.V5E.machine_type} "
        f"({cfg.gke.capacity.replace(',', ' first, then ')}), one v5e chip and one pod each",
        f"per replica: KV pool {plan.pool.tokens:,} tokens{plan.pool.measured_note}, "
        f"{plan.safe_clients_per_replica} safe "
        f"client(s) at {plan.context:,} tokens of context (clients x context < "
        f"{plan.pool.safe_tokens:,})",
    ]
    if plan.replicas_needed is not None:
        fits = (
            "fits"
            if plan.replicas_needed <= a.max_replicas
            else f"MORE than max_replicas = {a.max_replicas}: raise it or expect queueing"
        )
        lines.append(
            f"load: {plan.clients} client(s) at {plan.context:,} tokens need "
            f"{plan.replicas_needed} replica(s) by the KV wall ({fits})"
        )
    lines.append(
        f"autoscaling: HPA on vllm:num_requests_waiting, target {a.waiting_target} waiting per "
        f"replica, {a.min_replicas}..{a.max_replicas} replicas, scale-down after "
        f"{a.scale_down_window_s} s (a warm boot is {SEED_BOOT.warm_s:g} s)"
        + (
            f"; from 0 on the wake responder's {zero.external_metric_name()} (External)"
            if zero.scaled_to_zero(cfg)
            else ""
        )
    )
    lines += unfinished_lines(cfg)
    if cfg.routing.gateway:
        lines.append(routing_line(cfg))
    lines += [reach.control_plane_line(cfg), reach.endpoint_line(cfg)]
    if plan.chip_rate is None:
        lines.append(f"cost: not estimated: no {plan.chip_model} or idle-floor prices here")
        return [*lines, deadline_line(cfg, plan)]
    lo, hi = plan.hourly(a.min_replicas), plan.hourly(a.max_replicas)
    assert lo is not None and hi is not None
    ctx, cl = plan.throughput_cell
    lines += [
        f"cost: ${lo:.4f}/h at {a.min_replicas} replica(s), ${hi:.4f}/h at {a.max_replicas} "
        f"({plan.chip_model} ${plan.chip_rate:.4f}/chip-hour); ${lo * HOURS_PER_MONTH:,.0f} to "
        f"${hi * HOURS_PER_MONTH:,.0f}/month if left running",
        f"idle floor: ${plan.idle_floor_per_hour:.4f}/h with no replica ("
        + "; ".join(f"{item} ${rate:.4f}" for item, rate in plan.idle_items)
        + ")",
        # The floor alone was printed as if it were the no-traffic cost (issue 39): with
        # min_replicas >= 1 the replicas bill with no traffic too.
        *zero.lines(cfg),
        f"$/M output tokens: {_per_million_low(plan, a.min_replicas)}"
        f"${plan.per_million(a.max_replicas):.3f} at {a.max_replicas} replica(s), each at the "
        f"build log's {plan.throughput_tok_s:,} tok/s ({ctx:,} ctx, {cl} clients)",
        # A flex-start node's max_run_duration ends that node, not the billing: GKE recycles
        # it and the replica's pod, still wanted, asks the autoscaler for a new one (issue 36,
        # item 19: the old sentence said they "end after 24 h").
        "billing stops: TPU nodes (spot and flex-start alike) when make destroy removes the "
        "serving stack (the autoscaler then removes idle TPU nodes) or when the deadline deletes "
        f"the cluster; a flex-start node is recycled every "
        f"{cfg.gke.max_run_duration_seconds / 3600:g} h and replaced while a replica wants it, "
        "so it bills on; the idle floor at make destroy-all",
        deadline_line(cfg, plan),
    ]
    return lines


def _per_million_low(plan: ReplicaPlan, replicas: int) -> str:
    """$/M at the fewest replicas; at zero nothing is served, so from the first replica."""
    if replicas == 0:
        return f"none at 0 replicas (the floor bills alone), ${plan.per_million(1):.3f} at 1, "
    return f"${plan.per_million(replicas):.3f} at {replicas}, "


def routing_line(cfg: DeployConfig) -> str:
    """[routing] gateway: what answers, how it picks, and the load balancer the costs below leave
    out (its rates are in a section of Google's pricing page this project does not hold)."""
    kind = "internal" if routing.gateway_class(cfg) == routing.INTERNAL_CLASS else "external"
    return (
        f"routing: Gateway {cfg.name} ({routing.gateway_class(cfg)}, {kind}, TLS with Certificate "
        f"Manager certificate {cfg.routing.certificate or '(none set)'}) to InferencePool "
        f"{routing.pool_name(cfg)}; endpoint picker scoring {cfg.routing.scoring}, failing open. "
        "Its regional Application Load Balancer bills beyond the cost and idle floor below "
        "(forwarding rule, proxy instances, data processed; not priced here: "
        "cloud.google.com/load-balancing/pricing, its internal Application Load Balancer section)"
    )


def unfinished_lines(cfg: DeployConfig) -> list[str]:
    """What stays unfinished for every GKE config until someone pins it: said by `make check`,
    `make synth` and `make cost`, never only in a doc (issue 36, "Also")."""
    lines = []
    if not metrics_adapter.pinned(metrics_adapter.image()):
        lines.append(
            f"unfinished: metrics adapter {metrics_adapter.image()} is by tag, not pinned by "
            "digest (no published digest was found offline; set DIGEST in "
            "tpudeploy/gke/metrics_adapter.py)"
        )
    system = facts.SYSTEM_NODE_PRICES.get((cfg.effective_region, cfg.gke.system_machine_type))
    if system is None or "UNCONFIRMED" in system.item:
        lines.append(
            f"unfinished: the system node's price ({cfg.gke.system_machine_type} in "
            f"{cfg.effective_region}) is not confirmed from Google's page; the idle floor "
            "below uses "
            + (f"${system.per_hour:.4f}/h unconfirmed" if system else "no rate")
            + " (set it in tpudeploy/facts.py SYSTEM_NODE_PRICES from "
            "cloud.google.com/compute/vm-instance-pricing; [prices] holds chip rates only)"
        )
    if cfg.routing.gateway:
        lines.append(
            "unfinished: the Gateway's load balancer is not priced (the stored copies of "
            "cloud.google.com/load-balancing/pricing, read 2026-12-02, lack its Internal "
            "Application Load Balancer section): the costs below leave out its forwarding rule, "
            "proxy instances and data processed"
        )
    return lines
