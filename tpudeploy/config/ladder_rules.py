"""The capacity ladder's rules over a whole deployment: each rung as the deployment it would be,
and what spans rungs (one TPU VM only, no rung twice, a region or subnetwork every rung can use).

Apart from config/ladder.py, which the schema imports (the rung's shape, which rung applies):
these judge a DeployConfig, so they sit above the schema.
"""

from __future__ import annotations

from tpudeploy.config.ladder import cache_read_cost, rung_key
from tpudeploy.config.messages import problem
from tpudeploy.config.schema import DeployConfig


def rungs(cfg: DeployConfig) -> list[tuple[str, DeployConfig]]:
    """Each rung as the deployment it would be, with its key; without a ladder, the config
    itself under no key (its own zone and provisioning are the keys then)."""
    if not cfg.capacity:
        return [("", cfg)]
    return [
        (rung_key(i), cfg.model_copy(update={"provisioning": r.provisioning, "zone": r.zone}))
        for i, r in enumerate(cfg.capacity)
    ]


def keyed(key: str, each: DeployConfig, found: list[str]) -> list[str]:
    """A rung's problems under the rung's key: its zone is capacity[N].zone; a rule on another
    key (max_run_duration for a flex-start rung) says which rung it judged."""
    if not key:
        return found
    out = []
    for line in found:
        if line.startswith("zone = "):
            out.append(f"{key}.{line}")
        else:
            out.append(f"{key} ({each.provisioning}, {each.zone}): {line}")
    return out


def ladder_problems(cfg: DeployConfig) -> list[str]:
    """The rules that span rungs: one TPU VM only, no rung twice, a region or a regional
    subnetwork that every rung can use."""
    if not cfg.capacity:
        # An empty list is no ladder: a whole config dumped and read back carries one.
        return []
    shown = [r.model_dump() for r in cfg.capacity]
    if not cfg.section.one_node:
        return [
            problem(
                "capacity",
                shown,
                "the ladder is for one TPU VM; GKE's TPU pools draw on [gke] capacity "
                "(spot, flex-start) and the cluster autoscaler finds their nodes",
                'remove capacity, or set platform = "tpu-vm"',
            )
        ]
    problems = []
    seen: dict[tuple[str, str], int] = {}
    for i, rung in enumerate(cfg.capacity):
        pair = (rung.provisioning, rung.zone)
        if pair in seen:
            problems.append(
                problem(
                    rung_key(i),
                    rung.model_dump(),
                    f"the same rung as {rung_key(seen[pair])}: a stockout there is a stockout "
                    "here, so the walk would only try it twice",
                    "remove one, or change its zone or provisioning",
                )
            )
        seen.setdefault(pair, i)
    for i, rung in enumerate(cfg.capacity):
        if cache_read_cost(cfg.home_region, rung.region) is None:
            problems.append(
                problem(
                    f"{rung_key(i)}.zone",
                    rung.zone,
                    f"its node would read the compile cache from {cfg.home_region} (the first "
                    "rung's region holds the bucket) across continents, at a rate this project "
                    "has not read (docs/capacity-and-cost.md prices reads within North America)",
                    "keep the ladder on one continent; a second deployment (another name, its "
                    "own bucket) can ladder on the other",
                )
            )
    regions = sorted({r.region for r in cfg.capacity})
    if cfg.region and any(r != cfg.region for r in regions):
        problems.append(
            problem(
                "region",
                cfg.region,
                f"the ladder's rungs are in {', '.join(regions)}: a rung outside region would "
                "never deploy",
                "leave region out (each rung's zone gives its region; the compile-cache bucket "
                "stays in the first rung's)",
            )
        )
    if cfg.network.subnetwork and len(regions) > 1:
        problems.append(
            problem(
                "network.subnetwork",
                cfg.network.subnetwork,
                f"a subnetwork is regional, and the ladder's rungs span {', '.join(regions)}: "
                "the node of a rung in another region cannot join it",
                "keep every rung in the subnetwork's region, or leave subnetwork unset (the "
                "auto-mode network has a subnet in every region)",
            )
        )
    return problems
