"""`make tune-plan`: each arm's change against the baseline, the run order, the time and the cost.

Nothing here starts anything. The time is the planner's boot figures (the build log: 857 s cold,
497 s warm with the compile cache) plus the bench sweep's own estimate, capacity wait aside; the
cost is that time at the configured provisioning model's rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tpudeploy.bench.commands import plan_cells
from tpudeploy.bench.settings import BenchConfigError, SweepSettings, settings_from_table
from tpudeploy.bench.sweep import expected_seconds
from tpudeploy.config import DeployConfig
from tpudeploy.planner.cost import SEED_BOOT, NoPricesError, hourly_cost, price_table
from tpudeploy.render import vllm_serve_args
from tpudeploy.timefmt import format_seconds
from tpudeploy.tune import armchecks
from tpudeploy.tune.arms import Arm

# GKE's TPU pools default to spot first (the scale-out design): the side-by-side estimate uses
# the spot rate.
GKE_RATE_MODEL = "spot"


def flag_groups(argv: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`vllm serve MODEL --a 1 --b` as {"--a": ("1",), "--b": ()}: what a diff compares."""
    groups: dict[str, tuple[str, ...]] = {}
    current: str | None = None
    for arg in argv[3:]:
        if arg.startswith("--"):
            current = arg
            groups[current] = ()
        elif current is not None:
            groups[current] = (*groups[current], arg)
    return groups


@dataclass(frozen=True)
class Change:
    """One difference from the baseline: a flag or a container variable, before and after."""

    what: str  # "flag" or "env"
    key: str
    before: str | None
    after: str | None

    def describe(self) -> str:
        if self.before is None:
            return f"+ {self.key} {self.after}".rstrip()
        if self.after is None:
            return f"- {self.key} {self.before}".rstrip()
        return f"~ {self.key} {self.before} -> {self.after}"


def changes(baseline: DeployConfig, arm: DeployConfig) -> list[Change]:
    """The `vllm serve` line and container environment of `arm` against `baseline`."""
    out: list[Change] = []
    before, after = (
        flag_groups(vllm_serve_args(baseline.vllm)),
        flag_groups(vllm_serve_args(arm.vllm)),
    )
    if baseline.vllm.model != arm.vllm.model:
        out.append(Change("flag", "model", baseline.vllm.model, arm.vllm.model))
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if b != a:
            out.append(
                Change(
                    "flag",
                    key,
                    None if b is None else " ".join(b),
                    None if a is None else " ".join(a),
                )
            )
    env_b, env_a = baseline.vllm.container_env(), arm.vllm.container_env()
    for key in sorted(set(env_b) | set(env_a)):
        if env_b.get(key) != env_a.get(key):
            out.append(Change("env", key, env_b.get(key), env_a.get(key)))
    if baseline.vllm.image != arm.vllm.image:
        out.append(Change("image", "image", baseline.vllm.image, arm.vllm.image))
    return out


def schedule(arm_names: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """(round, arm) in run order. Each round boots every arm once; round r starts with the r-th
    arm and odd rounds run backwards, so no arm always runs first or last: drift over the hours a
    tune takes (thermal, neighbours, a nightly image) does not favour one arm."""
    order: list[tuple[int, str]] = []
    names = list(arm_names)
    for r in range(rounds):
        # Round r starts with arm r: a backwards round starts one place further, reversed.
        shift = (r + r % 2) % len(names) if names else 0
        ring = names[shift:] + names[:shift]
        if r % 2:
            ring.reverse()
        order += [(r + 1, name) for name in ring]
    return order


def sweep_settings(cfg: DeployConfig, profile: str) -> tuple[SweepSettings, int]:
    """The sweep of one boot (every cell once) and the rounds: the profile's repetitions, each
    on a node booted from scratch, as the build log measured its final configuration."""
    _, settings = settings_from_table(
        cfg.bench.table(), profile=profile, max_model_len=cfg.vllm.max_model_len
    )
    return replace(settings, repetitions=1), settings.repetitions


def sweep_seconds(settings: SweepSettings) -> float:
    return sum(expected_seconds(settings, cell) for cell in plan_cells(settings, base_seed=0))


@dataclass(frozen=True)
class Estimate:
    """Hours and dollars of a whole tune on one platform; `rate` None when no price is known."""

    seconds: float
    chips: int
    rate: float | None
    rate_note: str

    @property
    def dollars(self) -> float | None:
        return None if self.rate is None else self.rate * self.chips * self.seconds / 3600


@dataclass(frozen=True)
class ArmPlan:
    arm: Arm
    changes: tuple[Change, ...]
    boot_seconds: float  # all of this arm's boots: the first cold, later rounds warm
    sweep_seconds: float  # all of its sweeps

    @property
    def seconds(self) -> float:
        return self.boot_seconds + self.sweep_seconds


@dataclass(frozen=True)
class TunePlan:
    profile: str
    rounds: int
    arms: tuple[ArmPlan, ...]
    refused: tuple[Arm, ...]
    order: tuple[tuple[int, str], ...]
    tpu_vm: Estimate
    gke: Estimate


def _rate(cfg: DeployConfig, model: str) -> tuple[float | None, str]:
    try:
        prices = price_table(cfg)
        return hourly_cost(model, prices=prices), f"{model} in {cfg.effective_region}"
    except (NoPricesError, KeyError) as exc:
        return None, f"no {model} rate for {cfg.effective_region} ({exc})"


def build_plan(arms: Sequence[Arm], *, profile: str, rounds: int | None = None) -> TunePlan:
    """The plan for `arms` (baseline first). Raises BenchConfigError for a sweep that does not
    fit the baseline's max-model-len."""
    base = arms[0].config
    if base is None or arms[0].refused:
        raise BenchConfigError(
            "the baseline (your config) is refused: "
            + "; ".join(arms[0].refused)
            + ". Fix your config first: every arm is measured against it"
        )
    runnable = [arm for arm in arms if arm.runnable]
    settings, profile_rounds = sweep_settings(base, profile)
    n = rounds or profile_rounds
    per_sweep = sweep_seconds(settings)
    plans = []
    for arm in runnable:
        assert arm.config is not None
        boots = SEED_BOOT.cold_s + (n - 1) * SEED_BOOT.warm_s
        plans.append(ArmPlan(arm, tuple(changes(base, arm.config)), boots, n * per_sweep))
    total = sum(p.seconds for p in plans)
    # Side by side: every arm on its own chip at once, so a round costs one boot and one sweep.
    side_by_side = SEED_BOOT.cold_s + (n - 1) * SEED_BOOT.warm_s + n * per_sweep
    vm_rate, vm_note = _rate(base, base.provisioning)
    gke_rate, gke_note = _rate(base, GKE_RATE_MODEL)
    return TunePlan(
        profile=profile,
        rounds=n,
        arms=tuple(plans),
        refused=tuple(arm for arm in arms if not arm.runnable),
        order=tuple(schedule([p.arm.name for p in plans], n)),
        tpu_vm=Estimate(total, 1, vm_rate, vm_note),
        gke=Estimate(side_by_side, len(plans), gke_rate, gke_note),
    )


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def plan_text(plan: TunePlan) -> str:
    """What `make tune-plan` prints."""
    lines = [
        f"make tune: {len(plan.arms)} arm(s), {plan.profile} profile, {plan.rounds} round(s); "
        "each round boots every arm from scratch (a replaced node, never patched in place) and "
        "runs every cell once; rounds alternate the order.",
        "",
    ]
    rate = plan.tpu_vm.rate
    for p in plan.arms:
        each = p.seconds / plan.rounds
        lines.append(f"{p.arm.name}: {p.arm.description}")
        if p.arm.name != plan.arms[0].arm.name:
            lines += [f"    {c.describe()}" for c in p.changes] or ["    (no change to the line)"]
            assert p.arm.config is not None
            lines += [f"    before spend: {note}" for note in armchecks.before_spend(p.arm.config)]
        cost = _money(None if rate is None else rate * p.seconds / 3600)
        lines.append(
            f"    about {format_seconds(p.seconds)} and {cost} on the TPU VM "
            f"({format_seconds(each)} a round: boot, then sweep)"
        )
    for arm in plan.refused:
        lines.append(f"{arm.name}: REFUSED, not run: {'; '.join(arm.refused)}")
    lines.append("")
    lines.append("Run order: " + ", ".join(f"{name} (round {r})" for r, name in plan.order))
    vm, gke = plan.tpu_vm, plan.gke
    lines += [
        "",
        f"On one TPU VM, one arm after another: about {format_seconds(vm.seconds)}, "
        f"{_money(vm.dollars)} at {vm.rate_note}.",
        f"On GKE, side by side (one chip per arm): about {format_seconds(gke.seconds)}, "
        f"{_money(gke.dollars)} for {gke.chips} chip(s) at {gke.rate_note}, plus the cluster's "
        "own costs while it runs.",
        "Capacity waits are not counted; the first boot of an arm is priced cold (the build log: "
        f"{format_seconds(SEED_BOOT.cold_s)}), later ones warm ({format_seconds(SEED_BOOT.warm_s)}"
        ", the compile cache kept).",
    ]
    return "\n".join(lines)
