"""What bills in the TPU VM's node stack: the chip, as a TPU VM or a flex-start queued resource
(what a failed `make deploy` or `make destroy` names, tpudeploy/failures.py)."""

from __future__ import annotations

from tpudeploy import planner, terraform
from tpudeploy.config import DeployConfig
from tpudeploy.tpuvm.addresses import QUEUED_RESOURCE_ADDRESS

# Resource types that bill by the hour while they exist (the chip); the rest of the node stack
# (firewall rules, the queued resource's terraform_data bookkeeping aside) costs nothing.
CHIP_TYPES = ("google_tpu_v2_vm",)


def _rate(cfg: DeployConfig) -> str:
    return planner.rate_text(cfg)


def billing_resources(cfg: DeployConfig, resources: list[terraform.StateResource]) -> list[str]:
    """The node stack's resources in state that bill, each with what it costs (each platform
    names its own: tpudeploy.platform)."""
    found = []
    for r in resources:
        if r.address == QUEUED_RESOURCE_ADDRESS:
            text = (
                f"flex-start queued resource {cfg.queued_resource_id} ({_rate(cfg)} while its "
                "node runs)"
            )
            if r.tainted:
                text += (
                    "; its create failed, and the client deleted what it requested (its last "
                    "lines above say so), so it is likely gone"
                )
            found.append(text)
        elif r.type in CHIP_TYPES:
            found.append(
                f"TPU VM {cfg.node_id} ({cfg.provisioning}, {_rate(cfg)} until it is deleted)"
            )
    return found
