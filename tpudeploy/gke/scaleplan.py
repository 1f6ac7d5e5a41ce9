"""`make plan-scale`: replicas, $/hour, $/M tokens and the autoscaler's targets for a load.

Built on tpudeploy.gke.replicaplan (the KV pool, the idle floor, the chip rate) and the build log's
measured sweep in tpudeploy.facts: nothing here is a second copy of either. Two limits decide
the replicas: the KV wall (clients x context under ~78% of one replica's pool) and, when a
median TTFT target is given, the most clients per replica whose median TTFT the sweep measured
(piecewise linear between its 1, 4, 16 and 64-client cells) at or under the target.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.errors import UserError
from tpudeploy.gke import replicaplan
from tpudeploy.planner import Finding, NoPricesError, cost_per_million_tokens, price_table

# The make variables behind each input, for messages (`make plan-scale CLIENTS=...`).
CLIENTS_KEY, CONTEXT_KEY, TTFT_KEY = "CLIENTS", "CONTEXT", "TTFT_MS"
# KV-cache use is published by vLLM as a fraction (1 means 100 percent); the threshold is
# written with two decimals, rounded down, so a replica at its plan sits just under it.
_KV_DECIMALS = 2


class ScalePlanError(UserError):
    """An input `make plan-scale` cannot plan for: the message names it, says why and the fix."""


@dataclass(frozen=True, slots=True)
class Targets:
    """What the autoscaler and the picker's saturation check read, per replica.

    `waiting_per_replica`: vllm:num_requests_waiting (requests vLLM could not admit: the KV
    pool is full). `running_per_replica`: vllm:num_requests_running, the streams a replica is
    planned to run (the KV wall, lowered by a TTFT target: under it the pool is not full, so
    nothing waits while TTFT already grows). `kv_cache_usage`: vllm:kv_cache_usage_perc, a
    fraction of the pool, at the KV wall.
    """

    waiting_per_replica: int
    running_per_replica: int
    kv_cache_usage: float


@dataclass(frozen=True, slots=True)
class ScalePlan:
    clients: int
    context: int
    ttft_target_ms: float | None
    base: replicaplan.ReplicaPlan
    replicas_by_kv_wall: int
    ttft_clients_per_replica: int | None
    replicas: int
    load_per_replica: int
    ttft_row: int
    predicted_ttft_ms: float | None
    cell: tuple[int, int]
    tok_s_per_replica: float
    targets: Targets
    notes: tuple[str, ...]

    def hourly(self) -> float | None:
        return self.base.hourly(self.replicas)

    def per_million(self) -> float | None:
        """$ per million output tokens: chips, NAT and the idle floor over every replica's
        measured throughput at its share of the load."""
        return replace(self.base, throughput_tok_s=self.tok_s_per_replica).per_million(
            self.replicas
        )


def ttft_row(context: int) -> int:
    """The measured context the TTFT of `context` is read at: the first at or above it (TTFT
    grows with context), the longest measured when beyond (then a lower bound)."""
    return next((c for c in facts.CONTEXTS if c >= context), facts.CONTEXTS[-1])


def median_ttft_ms(context: int, clients: float) -> float | None:
    """Median TTFT at `clients` per replica, linear between the sweep's measured cells; None
    past the most clients measured (64): nothing there to read."""
    row = ttft_row(context)
    points = [(c, facts.MEDIAN_TTFT_MS[(row, c)]) for c in facts.CLIENTS]
    if clients <= points[0][0]:
        return points[0][1]
    for (c0, t0), (c1, t1) in itertools.pairwise(points):
        if clients <= c1:
            return t0 + (t1 - t0) * (clients - c0) / (c1 - c0)
    return None


def _cells_read(clients: int) -> tuple[int, ...]:
    """The measured client counts the interpolation at `clients` reads."""
    if clients in facts.CLIENTS:
        return (clients,)
    above = next((c for c in facts.CLIENTS if c > clients), None)
    below = max((c for c in facts.CLIENTS if c < clients), default=None)
    return tuple(c for c in (below, above) if c is not None)


def clients_within_ttft(context: int, target_ms: float) -> int:
    """The most clients per replica whose interpolated median TTFT is at or under the target,
    at most the sweep's 64; 0 when even one client's measured median is above it."""
    best = 0
    for clients in range(1, facts.CLIENTS[-1] + 1):
        ttft = median_ttft_ms(context, clients)
        if ttft is None or ttft > target_ms:
            break
        best = clients
    return best


def _whole(key: str, value: object, *, example: int, what: str) -> int:
    fix = f"write e.g. make plan-scale {key}={example}"
    if isinstance(value, bool):
        raise ScalePlanError(f"{key}={value!r}: not a number of {what}; {fix}")
    try:
        number = int(str(value).strip().replace("_", "").replace(",", ""))
    except ValueError:
        raise ScalePlanError(f"{key}={value!r}: not a whole number of {what}; {fix}") from None
    if number <= 0:
        raise ScalePlanError(f"{key}={value!r}: {what} must be at least 1; {fix}")
    return number


def resolve_inputs(
    cfg: DeployConfig, *, clients: str | None, context: str | None, ttft_ms: str | None
) -> tuple[int, int, int | None]:
    """The command's inputs, each falling back to its [load] key; refused with the key, the
    value, the reason and the fix."""
    values: list[int | None] = []
    for key, raw, loaded, name, example in (
        (CLIENTS_KEY, clients, cfg.load.expected_clients, "expected_clients", 64),
        (CONTEXT_KEY, context, cfg.load.expected_context, "expected_context", 8192),
        (TTFT_KEY, ttft_ms, cfg.load.target_ttft_ms, "target_ttft_ms", 250),
    ):
        if raw is not None and str(raw).strip():
            values.append(_whole(key, raw, example=example, what=_WHAT[key]))
        elif loaded is not None or key == TTFT_KEY:
            values.append(loaded)
        else:
            raise ScalePlanError(
                f"{key} is unset and the config has no [load] {name}: the planner needs the "
                f"load to plan for; run make plan-scale CLIENTS=64 CONTEXT=8192 (TTFT_MS=250 "
                f"optional) or set [load] {name}"
            )
    n_clients, n_context, ttft = values
    assert n_clients is not None and n_context is not None
    if n_context > cfg.vllm.max_model_len:
        raise ScalePlanError(
            f"{CONTEXT_KEY}={n_context}: longer than vllm.max_model_len = "
            f"{cfg.vllm.max_model_len}, so no replica would accept such a request; lower "
            f"{CONTEXT_KEY} or raise vllm.max_model_len"
        )
    if ttft is not None:
        row = ttft_row(n_context)
        floor = facts.MEDIAN_TTFT_MS[(row, facts.CLIENTS[0])]
        if ttft < floor:
            raise ScalePlanError(
                f"{TTFT_KEY}={ttft}: below the build log's median TTFT for one client alone at "
                f"{row:,} tokens of context ({floor:g} ms), so no number of replicas reaches "
                f"it; raise {TTFT_KEY} to {math.ceil(floor)} or more, or plan a shorter "
                f"{CONTEXT_KEY}"
            )
    return n_clients, n_context, ttft


_WHAT = {CLIENTS_KEY: "clients", CONTEXT_KEY: "tokens", TTFT_KEY: "milliseconds"}


def scale_plan(cfg: DeployConfig, *, clients: int, context: int, ttft_ms: int | None) -> ScalePlan:
    """Replicas for `clients` at `context` (and a median TTFT target), what they cost, and the
    autoscaler targets that keep each replica at its planned share."""
    load = cfg.load.model_copy(update={"expected_clients": clients, "expected_context": context})
    base = replicaplan.replica_plan(cfg.model_copy(update={"load": load}))
    safe = base.safe_clients_per_replica
    if safe < 1:
        raise ScalePlanError(
            f"{CONTEXT_KEY}={context}: one request of it does not fit the "
            f"{base.pool.tokens:,}-token KV pool{base.pool.measured_note}; lower {CONTEXT_KEY}"
        )
    by_wall = math.ceil(clients / safe)
    notes: list[str] = []
    row = ttft_row(context)
    if context > facts.CONTEXTS[-1]:
        notes.append(
            f"TTFT at {context:,} tokens was not measured: the {row:,}-token row is a lower bound"
        )
    within: int | None = None
    per_replica_cap = safe
    if ttft_ms is not None:
        within = clients_within_ttft(context, ttft_ms)
        per_replica_cap = min(safe, within)
        if within == facts.CLIENTS[-1]:
            notes.append(
                f"the sweep measured up to {within} clients per replica: more per replica "
                "under this TTFT target is not known here"
            )
    if per_replica_cap > facts.CLIENTS[-1]:
        notes.append(
            f"{per_replica_cap} streams per replica is the KV wall's figure: the sweep measured "
            f"{facts.CLIENTS[-1]} clients at most, so TTFT and tok/s past that are not known here"
        )
    replicas = max(by_wall, math.ceil(clients / per_replica_cap))
    share = math.ceil(clients / replicas)
    cell = replicaplan.measured_cell(context, share)
    shaky = sorted(c for r, c in facts.UNTRUSTWORTHY_TTFT if r == row and c in _cells_read(share))
    if shaky:
        notes.append(
            f"the TTFT read here leans on the build log's {row}-token/{shaky[0]}-client median, "
            "which it marks untrustworthy (cv 56% across repetitions)"
        )
    planned = per_replica_cap
    if ttft_ms is None:
        # Issue 25's rule: a queue of a quarter of the running streams adds about a quarter
        # of one request's time; past that a new replica is worth its chip-hour.
        waiting = max(1, math.ceil(planned * replicaplan.QUEUE_FRACTION_OF_SAFE_CLIENTS))
    else:
        # A waiting request is admitted only when a running one finishes: seconds at the
        # sweep's per-stream rates (10 to 125 tok/s), past any TTFT target the sweep reaches
        # below its worst cell. Under a TTFT target any queue is a miss: scale on the first.
        waiting = 1
    kv = base.pool.safe_tokens / base.pool.tokens
    return ScalePlan(
        clients=clients,
        context=context,
        ttft_target_ms=ttft_ms,
        base=base,
        replicas_by_kv_wall=by_wall,
        ttft_clients_per_replica=within,
        replicas=replicas,
        load_per_replica=share,
        ttft_row=row,
        predicted_ttft_ms=median_ttft_ms(context, share),
        cell=cell,
        tok_s_per_replica=facts.AGGREGATE_TOK_S[cell],
        targets=Targets(
            waiting_per_replica=waiting,
            running_per_replica=planned,
            kv_cache_usage=math.floor(kv * 10**_KV_DECIMALS) / 10**_KV_DECIMALS,
        ),
        notes=tuple(notes),
    )


def report(cfg: DeployConfig, p: ScalePlan) -> list[str]:
    """The lines `make plan-scale` prints and the GKE synth summary ends with."""
    target = f", median TTFT <= {p.ttft_target_ms} ms" if p.ttft_target_ms else ""
    lines = [f"scale plan: {p.clients} client(s) at {p.context:,} tokens of context{target}"]
    why = f"KV wall {p.replicas_by_kv_wall} at {p.base.safe_clients_per_replica} per replica"
    if p.base.pool.measured_from is not None:
        why += f" of a {p.base.pool.tokens:,}-token pool{p.base.pool.measured_note}"
    if p.ttft_clients_per_replica is not None:
        by_ttft = math.ceil(p.clients / max(1, p.ttft_clients_per_replica))
        why += f", TTFT {by_ttft} at {p.ttft_clients_per_replica} per replica"
    fits = (
        "within"
        if p.replicas <= cfg.gke.max_replicas
        else "MORE than; raise [gke] max_replicas or expect queueing past"
    )
    lines.append(
        f"  replicas: {p.replicas} ({why}); {fits} [gke] max_replicas = {cfg.gke.max_replicas}"
    )
    ttft = f"{p.predicted_ttft_ms:,.0f} ms" if p.predicted_ttft_ms is not None else "not measured"
    ctx, cl = p.cell
    lines.append(
        f"  each replica: {p.load_per_replica} client(s), median TTFT ~{ttft} (sweep, "
        f"{p.ttft_row:,}-token row), {p.tok_s_per_replica:,} output tok/s (measured cell {ctx:,} "
        f"ctx, {cl} clients)"
    )
    hourly, per_m = p.hourly(), p.per_million()
    if hourly is None or per_m is None:
        lines.append(f"  cost: not estimated: no {p.base.chip_model} or idle-floor prices here")
    else:
        try:
            chip = cost_per_million_tokens(
                p.base.chip_model, p.tok_s_per_replica, prices=price_table(cfg)
            )
            chip_text = f"; the chips alone ${chip:.3f}/M"
        except NoPricesError:
            chip_text = ""
        lines.append(
            f"  cost: ${hourly:.4f}/hour ({p.replicas} x {p.base.chip_model} "
            f"${p.base.chip_rate:.4f}/chip-hour + the ${p.base.idle_floor_per_hour:.4f}/h idle "
            f"floor), ${per_m:.3f} per million output tokens{chip_text}"
        )
    t = p.targets
    lines.append(
        f"  autoscaler targets per replica: vllm:num_requests_waiting {t.waiting_per_replica}, "
        f"vllm:num_requests_running {t.running_per_replica}, vllm:kv_cache_usage_perc "
        f"{t.kv_cache_usage:.2f} (the KV wall)"
    )
    lines += [f"  note: {n}" for n in p.notes]
    return lines


def load_targets(cfg: DeployConfig) -> Targets:
    """The targets for [load] (one client when unset: the per-replica figures do not depend on
    the client count), which the HPA and the picker's saturation check are given."""
    context = cfg.load.expected_context or cfg.vllm.max_model_len
    clients = cfg.load.expected_clients or 1
    return scale_plan(
        cfg, clients=clients, context=context, ttft_ms=cfg.load.target_ttft_ms
    ).targets


def findings(cfg: DeployConfig) -> list[Finding]:
    """[load] target_ttft_ms below what one client alone measured: no replica count reaches it."""
    ttft = cfg.load.target_ttft_ms
    if ttft is None:
        return []
    row = ttft_row(cfg.load.expected_context or cfg.vllm.max_model_len)
    floor = facts.MEDIAN_TTFT_MS[(row, facts.CLIENTS[0])]
    if ttft >= floor:
        return []
    return [
        Finding(
            "error",
            "load.target_ttft_ms",
            ttft,
            f"below the build log's median TTFT for one client alone at {row:,} tokens of "
            f"context ({floor:g} ms), so no number of replicas reaches it; raise it to "
            f"{math.ceil(floor)} or more",
        )
    ]


def configured(cfg: DeployConfig) -> list[str]:
    """The scale plan for [load], for the GKE synth summary; nothing when [load] is unset."""
    if cfg.load.expected_clients is None:
        return []
    context = cfg.load.expected_context or cfg.vllm.max_model_len
    try:
        clients, context, ttft = resolve_inputs(
            cfg, clients=None, context=str(context), ttft_ms=None
        )
    except ScalePlanError as exc:
        return [f"scale plan: not made for [load]: {exc}"]
    return report(cfg, scale_plan(cfg, clients=clients, context=context, ttft_ms=ttft))
