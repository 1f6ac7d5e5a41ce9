"""The one seam between the two platforms: what differs by platform is asked of a Platform.

Callers (the CLI, main.py, stacks/app.py) never branch on `cfg.platform` themselves; they take
`platform_for(cfg)` and ask it. The TPU VM's implementation calls what existed before GKE;
GKE's lives in tpudeploy.gke.
"""

from __future__ import annotations

import datetime
from typing import Protocol

from tpudeploy import planner
from tpudeploy.config import DeployConfig


class Platform(Protocol):
    name: str

    def stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        """Every stack, in the order `make deploy` applies them (destroy runs it backwards)."""
        ...

    def billing_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        """What `make destroy` removes: everything that bills per hour of chip."""
        ...

    def protected_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        """Stacks with a `deletion_protection` variable that `make destroy-all` sets false
        (an apply) before destroying them."""
        ...

    def describe(self, cfg: DeployConfig) -> str:
        """One line: what runs where."""
        ...

    def recover_note(self, cfg: DeployConfig) -> str | None:
        """None where `tpudeploy recover` (the first step of make deploy, and make recover)
        applies; else why this platform has nothing for it to replace."""
        ...

    def summary(self, cfg: DeployConfig, *, today: datetime.date | None) -> list[str]:
        """The cost and capacity lines `make synth`, `make check` and `make cost` end with."""
        ...


class TpuVm:
    name = "tpu-vm"

    def stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return (cfg.secrets_stack_name, cfg.node_stack_name)

    def billing_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return (cfg.node_stack_name,)

    def protected_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return ()

    def describe(self, cfg: DeployConfig) -> str:
        return f"{cfg.provisioning} {cfg.accelerator_type} in {cfg.zone}"

    def recover_note(self, cfg: DeployConfig) -> str | None:
        return None

    def summary(self, cfg: DeployConfig, *, today: datetime.date | None) -> list[str]:
        return planner.synth_summary(cfg, today=today)


class Gke:
    name = "gke"

    def stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return (cfg.secrets_stack_name, cfg.gke_stack_name, cfg.serving_stack_name)

    def billing_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        # The serving objects: with no pod asking for google.com/tpu, the cluster autoscaler
        # removes the TPU nodes (both pools scale from 0), so the chip-hours stop. The cluster
        # (deletion protection on) and its idle floor stay until make destroy-all; the secrets
        # and the compile cache stay like on the TPU VM.
        return (cfg.serving_stack_name,)

    def protected_stacks(self, cfg: DeployConfig) -> tuple[str, ...]:
        return (cfg.gke_stack_name,)

    def describe(self, cfg: DeployConfig) -> str:
        g = cfg.gke
        return (
            f"GKE: {g.min_replicas}-{g.max_replicas} replicas of {cfg.accelerator_type} "
            f"({g.capacity}) in {cfg.zone}"
        )

    def recover_note(self, cfg: DeployConfig) -> str | None:
        # A preempted spot node or a recycled flex-start node is the node pool's: GKE's auto-repair
        # and the cluster autoscaler replace it while the Deployment asks for the replica. There is
        # no queued resource or VM in Terraform's state to replace (make rehearse PLATFORM=gke
        # found make deploy failing here: recover looked for the TPU VM's node stack).
        return (
            f"{cfg.name} runs on GKE: the node pools replace preempted or recycled TPU nodes "
            "themselves; nothing to recover"
        )

    def summary(self, cfg: DeployConfig, *, today: datetime.date | None) -> list[str]:
        from tpudeploy.gke.plan import summary

        return summary(cfg)


PLATFORMS: dict[str, Platform] = {"tpu-vm": TpuVm(), "gke": Gke()}


def platform_for(cfg: DeployConfig) -> Platform:
    return PLATFORMS[cfg.platform]
