"""What the idle stop ([idle] stop_after, issue 39) saves and costs, at the planner's rates.

The saving is the billing between the stop and the deadline; the cost is the boot the next
`make deploy` pays (facts: 497 s warm with the compile cache, 857 s cold), billed like any hour,
plus the agents' wait for it. The example run says what it assumes: the configured deadline,
BUSY_HOURS of traffic at its start, then silence.
"""

from __future__ import annotations

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.config.idle_table import MIN_STOP_AFTER_S

# The example: two busy hours (an afternoon of agent work), then nothing until the deadline.
BUSY_HOURS = 2.0
# What `make check` proposes when the stop is off: twice the floor (a cold boot, rounded up).
SUGGESTED_S = 2 * MIN_STOP_AFTER_S


def idle_line(cfg: DeployConfig, hourly: float | None) -> str | None:
    """One line for `make check`'s summary; None where the idle stop does not apply (GKE, no
    deadline, a pipeline deployment: the config refuses [idle] there and says why). Flex-start:
    the run's end is max_run_duration (its queued resource's run duration), at flex-start's
    rate, and the next deploy queues for capacity again."""
    flex = cfg.flex_start_node
    deadline_s = cfg.max_run_duration_seconds if flex else cfg.deadline_seconds
    if not cfg.section.one_node or cfg.gitops_managed or deadline_s is None or hourly is None:
        return None
    end = "the run's end (max_run_duration)" if flex else "the deadline"
    what = (
        "the node deletes its queued resource (and so itself)"
        if flex
        else "the node deletes itself"
    )
    deadline_h = deadline_s / 3600
    seconds = cfg.idle.seconds
    after_s = seconds if seconds is not None else SUGGESTED_S
    if BUSY_HOURS + after_s / 3600 >= deadline_h:
        example = ""
    else:
        stopped = (BUSY_HOURS + after_s / 3600) * hourly
        example = (
            f"; a run of {deadline_h:g} h busy for its first {BUSY_HOURS:g} h, then silent, bills "
            f"${stopped:.2f} instead of ${deadline_h * hourly:.2f}"
        )
    queue = (
        "queues for flex-start capacity again (a new run of max_run_duration), then "
        if flex
        else ""
    )
    boot = (
        f"the next make deploy {queue}boots the node again ({facts.WARM_BOOT_S:.0f} s warm "
        f"with the compile cache, {facts.COLD_BOOT_S:.0f} s cold: "
        f"${facts.WARM_BOOT_S / 3600 * hourly:.2f}-${facts.COLD_BOOT_S / 3600 * hourly:.2f}, "
        "and the agents wait for it)"
    )
    if seconds is None:
        return (
            f'idle stop: off; [idle] stop_after = "{after_s // 60}m" would end the billing after '
            f"{after_s // 60} min with no request, saving ${hourly:.4f} per idle hour before "
            f"{end}{example}; its cost: {boot}"
        )
    grant = (
        "tpu.queuedResources.delete on every queued resource of the project until the run's end"
        if flex
        else "tpu.nodes.delete on every TPU node of the project until the deadline"
    )
    return (
        f"idle stop: after {after_s // 60} min with no request {what}, saving "
        f"${hourly:.4f} per idle hour before {end}{example}; its cost: {boot}; and the "
        f"node's account holds {grant} (no condition can name one: docs/security.md, "
        "residual risk)"
    )
