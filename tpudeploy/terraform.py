"""Where Terraform's files live for a deployment, which Terraform the stacks need, and what its
local state holds. Plain files and one `terraform version` call: no cdktf here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tpudeploy.config import DeployConfig

REPO_ROOT = Path(__file__).resolve().parent.parent

# terraform_data (flex-start) needs 1.4; 1.5 is the oldest release documented. The tests and the
# workflows run 1.11.4.
MIN_VERSION = (1, 5, 0)
REQUIRED_VERSION = ">= 1.5.0"
TESTED_VERSION = "1.11.4"

# Every deployment synthesizes into its own folder: a synth of one (DEPLOY_CONFIG=...) never
# removes or replaces the stacks another one's deploy reads.
SYNTH_ROOT = Path("cdktf.out") / "deployments"


def synth_outdir(cfg: DeployConfig) -> Path:
    """The deployment's synth output, relative to the repository root (where make runs)."""
    return SYNTH_ROOT / cfg.name


def local_state_path(stack: str, root: Path = REPO_ROOT) -> Path:
    """Where a stack without a state bucket keeps its state: the repository root, outside the
    synth output (`make clean` removes that), whatever folder it was synthesized into."""
    return root / f"terraform.{stack}.tfstate"


def local_state_reference(stack_dir: Path, stack: str) -> str:
    """The local backend's `path` for a stack synthesized into `stack_dir`: the state file at the
    repository root, relative to where Terraform runs (portable across machines).

    Synthesized inside the repository (the Makefile's folder, or cdktf.json's `cdktf.out` for a
    plain `cdktf deploy`), it is the real relative path, so state never moves with the output
    folder. Synthesized elsewhere (a test's temporary folder) it is the path the Makefile's
    layout gives, so the JSON does not depend on where it was written."""
    state = local_state_path(stack)
    stack_dir = stack_dir.resolve()
    if not stack_dir.is_relative_to(REPO_ROOT):
        stack_dir = REPO_ROOT / SYNTH_ROOT / "deployment" / "stacks" / stack
    return os.path.relpath(state, stack_dir)


class TerraformMissing(Exception):
    """Terraform is not on PATH, or does not run."""


def installed_version(binary: str = "terraform") -> tuple[str, tuple[int, ...]]:
    """(path, version) of the Terraform on PATH; raises TerraformMissing."""
    path = shutil.which(binary)
    if path is None:
        raise TerraformMissing(f"{binary} is not on PATH")
    try:
        result = subprocess.run(
            [path, "version", "-json"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            env=_quiet_env(),
        )
        text = json.loads(result.stdout)["terraform_version"]
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as exc:
        raise TerraformMissing(f"{path} does not run ({type(exc).__name__})") from None
    numbers = tuple(int(n) for n in re.findall(r"\d+", text)[:3])
    return path, numbers


def _quiet_env() -> dict[str, str]:
    # No update check: `terraform version` would otherwise ask checkpoint-api.hashicorp.com.
    return {**os.environ, "CHECKPOINT_DISABLE": "1"}


@dataclass(frozen=True, slots=True)
class StateResource:
    """One managed resource in a state file."""

    address: str
    type: str
    tainted: bool


def state_resources(path: Path) -> list[StateResource] | None:
    """The managed resources a local state file holds; None when there is no state file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return []
    found = []
    for resource in data.get("resources") or []:
        if resource.get("mode") != "managed":
            continue
        instances = resource.get("instances") or []
        if not instances:
            continue
        found.append(
            StateResource(
                address=f"{resource.get('type')}.{resource.get('name')}",
                type=str(resource.get("type")),
                tainted=any(i.get("status") == "tainted" for i in instances),
            )
        )
    return found
