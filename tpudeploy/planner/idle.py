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
    """One line for `make check`'s summary; None where the idle stop does not apply (GKE,
    flex-start, no deadline: the config refuses [idle] there and says why)."""
    deadline_s = cfg.deadline_seconds
    if not cfg.section.one_node or cfg.flex_start_node or deadline_s is None or hourly is None:
        return None
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
    boot = (
        f"the next make deploy boots the node again ({facts.WARM_BOOT_S:.0f} s warm with the "
        f"compile cache, {facts.COLD_BOOT_S:.0f} s cold: ${facts.WARM_BOOT_S / 3600 * hourly:.2f}"
        f"-${facts.COLD_BOOT_S / 3600 * hourly:.2f}, and the agents wait for it)"
    )
    if seconds is None:
        return (
            f'idle stop: off; [idle] stop_after = "{after_s // 60}m" would end the billing after '
            f"{after_s // 60} min with no request, saving ${hourly:.4f} per idle hour before the "
            f"deadline{example}; its cost: {boot}"
        )
    return (
        f"idle stop: after {after_s // 60} min with no request the node deletes itself, saving "
        f"${hourly:.4f} per idle hour before the deadline{example}; its cost: {boot}; and the "
        "node's account holds tpu.nodes.delete on every TPU node of the project until the "
        "deadline (no condition can name one node: docs/security.md, residual risk)"
    )
