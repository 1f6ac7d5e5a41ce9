"""The last lines of a failed `make deploy` or `make destroy`: only what is true about state and
billing, read from the state files themselves.

A failure before Terraform wrote anything (preflight, synth, init, plan, a refused apply) leaves
no state file: then nothing of the deployment was created here, and saying "may still bill"
would send the user hunting for a charge that does not exist. When state holds resources, the
message names the ones that bill and how to check them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from tpudeploy import terraform
from tpudeploy.config import DeployConfig
from tpudeploy.platform import platform_for


def _state_name(cfg: DeployConfig, stack: str) -> str:
    """The state file's name, as the user finds it at the repository root."""
    return terraform.local_state_path(stack).name


def _billing_state(
    cfg: DeployConfig, root: Path
) -> tuple[list[terraform.StateResource] | None, str]:
    """The resources of every billing-part stack's local state (None: no state file at all),
    and those files' names."""
    stacks = [s for s in platform_for(cfg).stacks(cfg) if s != cfg.secrets_stack_name]
    found: list[terraform.StateResource] | None = None
    for stack in stacks:
        resources = terraform.state_resources(terraform.local_state_path(stack, root))
        if resources is not None:
            found = (found or []) + resources
    return found, ", ".join(_state_name(cfg, s) for s in stacks)


def after_deploy(
    cfg: DeployConfig, *, out: TextIO | None = None, root: Path = terraform.REPO_ROOT
) -> None:
    """What a failed `make deploy` says last (`root`: where the state files are)."""
    out = out or sys.stderr
    again = "Fix the error above, then run `make deploy` again."
    if cfg.state_bucket:
        print(
            f"deploy failed. {again} State is remote (gs://{cfg.state_bucket}): `make status` "
            "shows whether a node or queued resource of this deployment exists; `make destroy` "
            "stops its billing.",
            file=out,
        )
        return
    platform = platform_for(cfg)
    node, names = _billing_state(cfg, root)
    secrets = terraform.state_resources(terraform.local_state_path(cfg.secrets_stack_name, root))
    if not node and not secrets:
        print(
            f"deploy failed before Terraform created anything (no resource in {names}): "
            f"nothing of this deployment bills. {again}",
            file=out,
        )
        return
    billing = platform.billing_in_state(cfg, node or [])
    if not billing:
        print(
            f"deploy failed. {again} Terraform's state holds no {platform.billing_noun} of "
            f"{cfg.name} ({names}), so no chip bills.",
            file=out,
        )
        return
    print(
        f"deploy failed. {again} In Terraform's state, and billing if it runs: "
        + "; ".join(billing)
        + ". `make status` shows its live state; `make destroy` stops the billing.",
        file=out,
    )


def after_destroy(
    cfg: DeployConfig,
    *,
    terraform_exit: int,
    cleanup_exit: int,
    out: TextIO | None = None,
    root: Path = terraform.REPO_ROOT,
) -> None:
    """What a failed `make destroy` says last: Terraform's part, then the by-name cleanup's."""
    out = out or sys.stderr
    if terraform_exit:
        if cfg.state_bucket:
            print(
                f"destroy failed. State is remote (gs://{cfg.state_bucket}): `make status` shows "
                "whether the node or queued resource still exists and bills. Fix the error above "
                "and run `make destroy` again.",
                file=out,
            )
        else:
            platform = platform_for(cfg)
            node, names = _billing_state(cfg, root)
            billing = platform.billing_in_state(cfg, node or [])
            stacks = ", ".join(s for s in platform.stacks(cfg) if s != cfg.secrets_stack_name)
            if node is None:
                print(
                    f"destroy failed, but Terraform has no state for {stacks} here (no {names}): "
                    "it created nothing on this machine that could bill.",
                    file=out,
                )
            elif not billing:
                print(
                    f"destroy failed; Terraform's state ({names}) holds no "
                    f"{platform.billing_noun}, so no chip bills. Fix the error above "
                    "and run `make destroy` again to remove the rest (firewall rules, which cost "
                    "nothing).",
                    file=out,
                )
            else:
                print(
                    "destroy failed. Still in Terraform's state, and billing if it runs: "
                    + "; ".join(billing)
                    + ". `make status` shows its live state; fix the error above and run "
                    "`make destroy` again.",
                    file=out,
                )
    if cleanup_exit and platform_for(cfg).replaces_dead_nodes:
        print(
            f"Whether queued resource {cfg.queued_resource_id} exists could not be checked (the "
            "error above); once that is fixed, run `make destroy` again, or `make status`.",
            file=out,
        )
