"""Text tables for `make capacity`, `make cost` and the four-line synth summary."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from tpudeploy.config import DeployConfig
from tpudeploy.planner.capacity import (
    TPU_PALLAS,
    BackendSpec,
    KvPool,
    bandwidth_efficiency,
    decode_floor_s,
    kv_memory_multiplier,
    kv_pool,
)
from tpudeploy.planner.chips import lookup_accelerator
from tpudeploy.planner.cost import (
    FLEX_START,
    HOURS_PER_MONTH,
    PROVISIONING_MODELS,
    SEED_BOOT,
    SEED_PRICES,
    SEED_THROUGHPUT,
    SPOT,
    BootTimes,
    NoPricesError,
    PriceTable,
    ThroughputPoint,
    cost_rows,
    hourly_cost,
    left_out,
    normalize_model,
    preemption_break_even,
    price_table,
)
from tpudeploy.planner.geometry import GIB, LayerType
from tpudeploy.planner.idle import idle_line
from tpudeploy.planner.money import ladder_lines, per_million_line, run_most

DEFAULT_CONTEXTS = (128, 1024, 8192)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def _pool(cfg: DeployConfig, backend: BackendSpec, mml: int) -> KvPool:
    chip = lookup_accelerator(cfg.accelerator_type).chip
    return kv_pool(
        max_model_len=mml,
        gpu_memory_utilization=cfg.vllm.gpu_memory_utilization,
        kv_cache_memory_bytes=cfg.vllm.kv_cache_memory_bytes,
        model=cfg.model_geometry,
        chip=chip,
        backend=backend,
        measured=cfg.vllm.measured_pool if mml == cfg.vllm.max_model_len else None,
    )


def capacity_table(
    cfg: DeployConfig | None = None,
    *,
    backend: BackendSpec = TPU_PALLAS,
    contexts: Sequence[int] = DEFAULT_CONTEXTS,
) -> str:
    """Memory budget, KV geometry, pool and safe concurrency for the deployment."""
    cfg = cfg or DeployConfig()
    model = cfg.model_geometry
    chip = lookup_accelerator(cfg.accelerator_type).chip
    pool = _pool(cfg, backend, cfg.vllm.max_model_len)
    by_type = model.kv_bytes_per_token_by_type()
    sources = sorted(set(model.shared_cache_sources.values()))
    floor = decode_floor_s(model, chip)
    budget = [
        ("visible HBM", _gib(pool.hbm_bytes)),
        (f"cap at gpu_memory_utilization {cfg.vllm.gpu_memory_utilization}", _gib(pool.cap_bytes)),
        ("weights (resident, bf16)", _gib(pool.weight_bytes)),
        ("KV pool", _gib(pool.pool_bytes)),
        ("outside the cap (compiled programs)", _gib(pool.outside_cap_bytes)),
        (
            "cache-owning layers",
            f"{len(model.cache_owning_layers)} of {model.num_hidden_layers} "
            f"(the other {model.num_hidden_layers - len(model.cache_owning_layers)} reuse the "
            f"caches of layers {' and '.join(map(str, sources))})",
        ),
        *(
            (
                f"KV bytes/token, {kind} ({model.cached_layer_count(kind)} layers x "
                f"head_dim {model.head_dim_for(kind)})",
                f"{by_type[kind]:,} B",
            )
            for kind in LayerType
        ),
        ("KV bytes/token, total", f"{pool.bytes_per_token:,} B"),
        (
            f"tensor parallel ({model.num_key_value_heads} KV head(s), padded up to TP)",
            ", ".join(
                f"TP={tp}: x{kv_memory_multiplier(tp, model):g} KV per token" for tp in (2, 4, 8)
            ),
        ),
        (
            f"blocks at max_model_len {cfg.vllm.max_model_len:,}",
            f"{pool.num_blocks:,} x {pool.block_size} tokens",
        ),
        ("KV pool tokens", f"{pool.tokens:,}{pool.measured_note}"),
        (
            f"safe clients x context (~{backend.safe_pool_fraction:.0%})",
            f"< {pool.safe_tokens:,}",
        ),
        (
            "decode floor (bytes moved / bandwidth)",
            f"{model.decode_bytes_per_step / GIB:.2f} GiB / "
            f"{chip.hbm_bandwidth_bytes_per_s / GIB:.0f} GiB/s = {floor * 1e3:.2f} ms",
        ),
        (
            f"measured TPOT {backend.measured_tpot_s * 1e3:.2f} ms",
            f"{bandwidth_efficiency(backend.measured_tpot_s, model, chip):.0%} of peak bandwidth",
        ),
    ]
    ctx = sorted(
        {
            *contexts,
            cfg.vllm.max_model_len,
            *([cfg.load.expected_context] if cfg.load.expected_context else []),
        }
    )
    concurrency = [
        (f"{c:,}", f"{pool.max_clients(c):,}", f"{pool.safe_clients(c):,}")
        for c in ctx
        if c <= cfg.vllm.max_model_len
    ]
    lengths = sorted({16_384, 32_768, 65_536, cfg.vllm.max_model_len})
    by_length = []
    for mml in lengths:
        p = _pool(cfg, backend, mml)
        by_length.append(
            (
                f"{mml:,}",
                str(p.block_size),
                str(p.blocks_per_request),
                f"{p.num_blocks:,}",
                f"{p.tokens:,}",
            )
        )
    return "\n\n".join(
        [
            f"Capacity: {cfg.vllm.model} on {cfg.accelerator_type}",
            _table(["item", "value"], budget),
            _table(["context", "clients that fit", "safe clients"], concurrency),
            _table(
                ["max_model_len", "block_size", "blocks/request", "KV blocks", "KV tokens"],
                by_length,
            ),
        ]
    )


# Rates older than this get a line saying where to check them (cloud rates change rarely, but
# they do change, and a table in a repository ages silently).
STALE_PRICE_DAYS = 180


def dated(prices: PriceTable, today: datetime.date | None = None) -> str:
    """ "as of 2026-08-09" with the age when `today` is given (None keeps generated text stable)."""
    if not prices.as_of:
        return f"undated: add as_of = <date> to [prices.{prices.region}]"
    text = f"as of {prices.as_of}"
    age = prices.age_days(today) if today is not None else None
    if age is not None:
        text += f" ({age} days old)"
        if age > STALE_PRICE_DAYS:
            text += (
                f"; check cloud.google.com/tpu/pricing and set [prices.{prices.region}] with "
                "today's as_of"
            )
    return text


def cost_table(
    *,
    chips: int = 1,
    prices: PriceTable = SEED_PRICES,
    points: Sequence[ThroughputPoint] = SEED_THROUGHPUT,
    boot: BootTimes = SEED_BOOT,
    today: datetime.date | None = None,
) -> str:
    """Rates, monthly cost, $ per million output tokens and the spot/flex-start break-even, for
    the models the price table has."""
    spot = prices.per_chip_hour.get(SPOT)
    rates = [
        (
            model,
            f"{rate:.4f}",
            "-" if model == SPOT or spot is None else f"{(rate / spot - 1):+.1%}",
            f"{rate * chips:.4f}",
            f"{rate * chips * HOURS_PER_MONTH:,.0f}",
        )
        for model, rate in sorted(prices.per_chip_hour.items(), key=lambda kv: kv[1])
    ]
    models = tuple(m for m in PROVISIONING_MODELS if prices.has(m))
    rows = [
        (
            r.point.label,
            f"{r.point.output_tok_s:,.1f}",
            *(f"${r.per_million[m]:.3f}" for m in models),
        )
        for r in cost_rows(models=models, points=tuple(points), chips=chips, prices=prices)
    ]
    parts = [
        f"Cost: {chips} chip(s), {prices.source}, {dated(prices, today)}",
        _table(
            ["model", "$/chip-hr", "vs spot", "$/hour", f"$/month ({HOURS_PER_MONTH} h)"], rates
        ),
        _table(["workload", "tok/s", *(f"{m} $/M" for m in models)], rows),
    ]
    if prices.has(SPOT) and prices.has(FLEX_START):
        lines = []
        for label, seconds in (
            ("cold", boot.cold_s),
            ("warm (compile cache mounted)", boot.warm_s),
        ):
            b = preemption_break_even(seconds, chips=chips, prices=prices)
            lines.append(
                f"- {label}: a preemption wastes {seconds:.0f} s = ${b.rebuild_cost:.4f}; "
                f"flex-start premium ${b.premium_per_hour:.4f}/h; spot wins only if preempted "
                f"less often than every {b.interval_h:.1f} h"
            )
        parts.append("Spot vs flex-start break-even:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def endpoint_line(cfg: DeployConfig) -> str:
    """Who can reach the API port: nobody until [network] allowed_cidrs names someone."""
    port = cfg.proxy.port
    if not cfg.network.allowed_cidrs:
        return (
            f"endpoint: port {port} (TLS proxy) open to: nobody; use make tunnel, or set "
            "[network] allowed_cidrs to your ranges"
        )
    return f"endpoint: port {port} (TLS proxy) open to: {', '.join(cfg.network.allowed_cidrs)}"


def synth_summary(
    cfg: DeployConfig | None = None,
    *,
    prices: PriceTable | None = None,
    backend: BackendSpec = TPU_PALLAS,
    today: datetime.date | None = None,
) -> list[str]:
    """Hourly cost, what stops the billing, what the cost leaves out, who reaches the endpoint,
    KV pool, safe concurrency; for spot, one more: what a preemption costs against flex-start."""
    cfg = cfg or DeployConfig()
    accel = lookup_accelerator(cfg.accelerator_type)
    pm = normalize_model(cfg.provisioning)
    max_run_duration_s = cfg.max_run_duration_seconds
    try:
        prices = prices or price_table(cfg)
        hourly: float | None = hourly_cost(pm, chips=accel.chips, prices=prices)
    except NoPricesError as exc:
        hourly = None
        cost = f"cost: not estimated: {exc}"
    else:
        cost = (
            f"cost: ${hourly:.4f}/h ({pm}, {accel.chips} chip(s), {prices.region}, prices "
            f"{dated(prices, today)})"
        )
    if pm == FLEX_START and max_run_duration_s:
        hours = max_run_duration_s / 3600
        most = run_most(hourly, hours, pm) if hourly is not None else ""
        stops = (
            f"billing stops: on its own after max run duration {hours:g} h{most}, or at "
            "make destroy"
        )
    elif max_run_duration_s:
        hours = max_run_duration_s / 3600
        most = run_most(hourly, hours, pm) if hourly is not None else ""
        stops = (
            f"billing stops: at the deadline, deploy time + {hours:g} h, when a Cloud Scheduler "
            f"job deletes the node{most}; make extend BY=2h moves it, make status shows it, "
            "make destroy stops it now"
        )
    else:
        monthly = (
            f" (${hourly * HOURS_PER_MONTH:,.0f}/month if forgotten)" if hourly is not None else ""
        )
        stops = (
            f"billing stops: NOTHING stops {pm} but make destroy "
            f'(max_run_duration = "none"){monthly}'
        )
    pool = _pool(cfg, backend, cfg.vllm.max_model_len)
    context = cfg.load.expected_context or cfg.vllm.max_model_len
    # Without both rates for the region there is no cost to compare a preemption against.
    extra: list[str] = []
    if pm == SPOT and prices is not None and hourly is not None:
        try:
            extra = [preemption_line(chips=accel.chips, prices=prices)]
        except NoPricesError:
            extra = []
    # What a million output tokens cost, named by the cell it assumes (planner/money.py).
    per_million = [per_million_line(cfg, pm, prices)] if prices and hourly is not None else []
    idle = idle_line(cfg, hourly)
    return [
        cost,
        stops,
        *per_million,
        *ladder_lines(cfg),
        *([idle] if idle else []),
        left_out(cfg),
        endpoint_line(cfg),
        f"KV pool: {pool.tokens:,} tokens{pool.measured_note} ({_gib(pool.pool_bytes)}, "
        f"{pool.num_blocks:,} blocks "
        f"x {pool.block_size}) at max_model_len {cfg.vllm.max_model_len:,}",
        safe_concurrency_line(cfg, pool, context),
        *extra,
    ]


def safe_concurrency_line(cfg: DeployConfig, pool: KvPool, context: int) -> str:
    """How many clients stay under the safe line at this context; when none does, say so and
    name the shorter context that brings one under it (never "1 client ... < line" for a
    context that is itself over the line)."""
    clients = (pool.safe_tokens - 1) // context
    if clients >= 1:
        return (
            f"safe concurrency: {clients} client(s) at {context:,} tokens of context "
            f"(clients x context < {pool.safe_tokens:,})"
        )
    key = "[load] expected_context" if cfg.load.expected_context else "[vllm] max_model_len"
    shorter = 1 << ((pool.safe_tokens - 1).bit_length() - 1)
    return (
        f"safe concurrency: none at {context:,} tokens of context: even one request is past the "
        f"safe line (clients x context < {pool.safe_tokens:,}, "
        f"~{TPU_PALLAS.safe_pool_fraction:.0%} of the {pool.tokens:,}-token pool); "
        f"{key} = {shorter} brings one client under it"
    )


def preemption_line(
    *,
    warm: bool | None = None,
    chips: int = 1,
    prices: PriceTable = SEED_PRICES,
    boot: BootTimes = SEED_BOOT,
) -> str:
    """What a spot preemption costs against flex-start. The compile cache outlives the node, so
    a recreated node boots warm once a predecessor saved the cache (`warm`: whether it has;
    None when unknown, as at synth time)."""
    cold = preemption_break_even(boot.cold_s, chips=chips, prices=prices)
    hot = preemption_break_even(boot.warm_s, chips=chips, prices=prices)
    if warm is None:
        return (
            f"preemptions: spot beats flex-start while they come less often than every "
            f"{hot.interval_h:.1f} h once the compile cache holds this config (a recreated node "
            f"boots warm, {boot.warm_s:.0f} s), every {cold.interval_h:.1f} h before "
            f"(cold, {boot.cold_s:.0f} s); make status says which applies"
        )
    b, kind = (hot, "warm") if warm else (cold, "cold")
    why = "the compile cache holds this config" if warm else "no compile cache saved for it yet"
    return (
        f"preemptions: a recreated node boots {kind} ({b.rebuild_s:.0f} s, ${b.rebuild_cost:.4f}; "
        f"{why}): spot beats flex-start while preemptions come less often than every "
        f"{b.interval_h:.1f} h"
    )
