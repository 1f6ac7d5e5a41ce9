"""`tpudeploy recover`, the first step of `make deploy`, on platform = "gke": nothing of the TPU
VM's to inspect or replace, and it says so instead of failing the deploy (make rehearse
PLATFORM=gke found `make deploy` exiting 1 here: recover ran `terraform init` in a <name>-node
stack that a GKE deployment never has)."""

from __future__ import annotations

import os
import subprocess

from tests import cli_fork
from tests.conftest import REPO_ROOT


def test_recover_on_gke_touches_no_api_and_passes() -> None:
    env = {
        **os.environ,
        "DEPLOY_CONFIG": str(REPO_ROOT / "deployments" / "gke.toml"),
        "GOOGLE_CLOUD_PROJECT": "my-proj-123",
        # Any call would go to a closed loopback port and fail.
        "TPU_EMULATOR_HOST": "127.0.0.1:9",
        "CLOUD_SCHEDULER_EMULATOR_HOST": "127.0.0.1:9",
    }

    def recover(*extra: str) -> subprocess.CompletedProcess[str]:
        return cli_fork.run(
            ["recover", *extra],
            env=env,
            timeout=60,
        )

    # make deploy's first step: nothing to do, said, and the deploy goes on
    done = recover()
    assert done.returncode == 0, done.stderr
    assert "runs on GKE" in done.stderr and "nothing to recover" in done.stderr
    assert "queued resource" not in done.stderr
    # make recover, asked for by name: refused with what replaces a replica on GKE
    done = recover("--apply")
    assert done.returncode == 1
    assert "the Deployment replaces a lost replica by itself" in done.stderr
    assert "queued resource" not in done.stderr and "Traceback" not in done.stderr
