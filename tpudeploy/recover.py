"""Before a deploy: notice a node that only comes back by being created again, and mark it.

Terraform plans nothing for a flex-start queued resource whose run ended (SUSPENDED: the spec
did not change) or for a preempted spot VM (the provider only records the state), so `make
deploy` would leave a dead endpoint. This looks at the live resource through the TPU API and,
when it is dead, taints its Terraform address so the deploy that follows replaces it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tpudeploy import queued_resource as qr
from tpudeploy.addresses import QUEUED_RESOURCE_ADDRESS, VM_ADDRESS
from tpudeploy.config import DeployConfig
from tpudeploy.flex import queued_resource_spec

# A spot VM that was preempted cannot be restarted; it must be deleted and created again
# (Cloud TPU documentation), and it holds quota until then.
DEAD_NODE_STATES = frozenset({"PREEMPTED", "TERMINATED"})


class RecoverError(Exception):
    """A failure with a message meant for the user."""


@dataclass(frozen=True)
class Finding:
    """What the live resource looks like, and the address to replace (None: nothing to do)."""

    what: str
    state: str
    address: str | None
    # A missing queued resource needs replacing only when Terraform still thinks it exists.
    only_if_in_state: bool = False

    def describe(self) -> str:
        if self.address is None:
            return f"{self.what}: {self.state}; nothing to replace"
        if self.only_if_in_state:
            return f"{self.what}: {self.state}; replacing it if Terraform's state still has it"
        return f"{self.what}: {self.state}; it cannot come back by itself: replacing it"


def inspect(cfg: DeployConfig, project: str, api: qr.TpuApi) -> Finding:
    """Look at the deployment's live node or queued resource."""
    try:
        return _inspect(cfg, project, api)
    except qr.ApiError as exc:
        # Before the first deploy the secrets stack has not enabled the TPU API yet: then
        # nothing of this deployment can exist, and there is nothing to replace.
        if exc.status == 403 and "disabled" in exc.api_message.lower():
            return Finding("TPU API", "not enabled yet (first deploy)", None)
        raise qr.QueuedResourceError(f"{exc}") from None


def _inspect(cfg: DeployConfig, project: str, api: qr.TpuApi) -> Finding:
    spec = queued_resource_spec(cfg, project)
    if cfg.provisioning == "flex-start":
        found = api.get_queued_resource(spec.name)
        what = f"queued resource {spec.queued_resource_id}"
        if found is None:
            return Finding(what, "NOT_FOUND", QUEUED_RESOURCE_ADDRESS, only_if_in_state=True)
        state = str((found.get("state") or {}).get("state", "STATE_UNSPECIFIED"))
        return Finding(what, state, QUEUED_RESOURCE_ADDRESS if state in qr.DEAD_STATES else None)
    node = api.get_node(spec.node_name)
    what = f"{cfg.provisioning} node {spec.node_id}"
    if node is None:
        # The provider drops a VM that answers 404 from state and plans a create by itself.
        return Finding(what, "NOT_FOUND", None)
    state = str(node.get("state", "STATE_UNSPECIFIED"))
    return Finding(what, state, VM_ADDRESS if state in DEAD_NODE_STATES else None)


class Terraform:
    """The few Terraform commands recovery needs, run in one synthesized stack folder."""

    def __init__(self, stack_dir: Path, *, binary: str = "terraform") -> None:
        self.stack_dir = stack_dir
        self.binary = binary

    def _run(self, *args: str) -> str:
        env = {**os.environ, "TF_IN_AUTOMATION": "1", "TF_INPUT": "0"}
        try:
            result = subprocess.run(
                [self.binary, f"-chdir={self.stack_dir}", *args, "-no-color"],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
        except FileNotFoundError:
            raise RecoverError(f"{self.binary} is not on PATH; install Terraform") from None
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise RecoverError(
                f"terraform {args[0]} failed: " + " / ".join(detail[:1] + detail[-3:])
            )
        return result.stdout

    def init(self) -> None:
        self._run("init", "-input=false")

    def state_list(self) -> list[str]:
        try:
            return self._run("state", "list").split()
        except RecoverError as exc:
            # A stack's first deploy has no state file yet: nothing in it to replace.
            if "No state file was found" in str(exc):
                return []
            raise

    def taint(self, address: str) -> None:
        self._run("taint", address)


def recover(
    cfg: DeployConfig,
    project: str,
    *,
    api: qr.TpuApi,
    stack_dir: Callable[[], Path],
    terraform: str = "terraform",
    out: TextIO | None = None,
) -> Finding:
    """Inspect, and taint the dead resource's address so the next apply replaces it.

    `stack_dir` synthesizes (when needed) and returns the node stack's folder; it is called only
    when something must be replaced, so a healthy deploy pays for no extra synth.
    """
    out = out if out is not None else sys.stderr
    finding = inspect(cfg, project, api)
    print(f"tpudeploy: {finding.describe()}", file=out, flush=True)
    if finding.address is None:
        return finding
    tf = Terraform(stack_dir(), binary=terraform)
    tf.init()
    if finding.address not in tf.state_list():
        print(
            f"tpudeploy: {finding.address} is not in Terraform's state; the deploy creates it",
            file=out,
            flush=True,
        )
        return finding
    tf.taint(finding.address)
    print(
        f"tpudeploy: marked {finding.address} for replacement (same spec): the deploy deletes "
        "it and creates it again",
        file=out,
        flush=True,
    )
    return finding
