"""Each [access] client's limits: what the config sets, else a share of the KV wall.

The front door (templates/nginx.conf.j2) enforces them per chip: on GKE each replica's front door
counts its own streams, as each replica has its own KV pool.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpudeploy.config import DeployConfig
from tpudeploy.planner.capacity import kv_pool
from tpudeploy.planner.chips import AcceleratorError, lookup_accelerator
from tpudeploy.planner.guards import Finding

# The build log sizes one chip for "a fleet of 8-16 concurrent lite agents": the streams the
# clients share when [load] names no context to divide the KV wall by.
FLEET_STREAMS = 16
# A request rate is a guard against a runaway loop, not a share of the pool: on average one new
# request per second per stream the client may hold.
REQUESTS_PER_MINUTE_PER_STREAM = 60


@dataclass(frozen=True, slots=True)
class ClientLimit:
    client: str
    streams: int
    requests_per_minute: int
    # "config" when [access.limits.CLIENT] sets it, else "planner".
    streams_from: str
    rate_from: str

    @property
    def rate_retry_after_s(self) -> int:
        """Seconds until the rate limit admits another request (nginx's leaky bucket)."""
        return max(1, -(-60 // self.requests_per_minute))


def wall_streams(cfg: DeployConfig) -> tuple[int, str]:
    """The streams one chip holds under the build log's safe line, and where the number came
    from: [load] expected_context divides the pool's safe tokens; without it, the seed's fleet."""
    context = cfg.load.expected_context
    if context is None or context > cfg.vllm.max_model_len:
        return FLEET_STREAMS, 'the build log\'s "fleet of 8-16 concurrent lite agents"'
    try:
        chip = lookup_accelerator(cfg.accelerator_type).chip
        pool = kv_pool(
            max_model_len=cfg.vllm.max_model_len,
            gpu_memory_utilization=cfg.vllm.gpu_memory_utilization,
            kv_cache_memory_bytes=cfg.vllm.kv_cache_memory_bytes,
            model=cfg.model_geometry,
            chip=chip,
            measured=cfg.vllm.measured_pool,
        )
    except (AcceleratorError, ValueError):
        return FLEET_STREAMS, 'the build log\'s "fleet of 8-16 concurrent lite agents"'
    streams = max(1, pool.safe_clients(context))
    return streams, (f"{pool.safe_tokens:,} safe KV tokens / load.expected_context {context:,}")


def client_limits(cfg: DeployConfig) -> list[ClientLimit]:
    """Every client's limits, in [access] clients order. Clients without a streams cap share
    what the capped ones leave of the wall, at least one stream each."""
    total, _ = wall_streams(cfg)
    access = cfg.access
    set_streams = {c: lim.streams for c, lim in access.limits.items() if lim.streams is not None}
    unset = [c for c in access.clients if c not in set_streams]
    left = total - sum(set_streams.values())
    share = max(1, left // len(unset)) if unset else 0
    out = []
    for client in access.clients:
        limits = access.limits.get(client)
        streams = set_streams.get(client, share)
        rate = limits.requests_per_minute if limits else None
        out.append(
            ClientLimit(
                client=client,
                streams=streams,
                requests_per_minute=rate or streams * REQUESTS_PER_MINUTE_PER_STREAM,
                streams_from="config" if client in set_streams else "planner",
                rate_from="config" if rate else "planner",
            )
        )
    return out


def check_access(cfg: DeployConfig) -> list[Finding]:
    """A warning when the clients' stream caps together cross the KV wall."""
    total, basis = wall_streams(cfg)
    limits = client_limits(cfg)
    streams = sum(lim.streams for lim in limits)
    if streams <= total:
        return []
    parts = ", ".join(f"{lim.client} {lim.streams}" for lim in limits)
    return [
        Finding(
            "warning",
            "access.limits",
            streams,
            f"the clients may hold {streams} streams at once ({parts}) against {total} under "
            f"the KV wall ({basis}): past it more streams buy queueing, not throughput (build "
            "log: 64 x 8,192 fell from 400 to 324 tok/s, median TTFT 11.7 s). Lower "
            "[access.limits.CLIENT] streams so they add up to at most "
            f"{total}, or drop clients",
        )
    ]
