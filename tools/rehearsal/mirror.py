"""Installs the stand-in google-beta for Terraform: a local provider mirror and a CLI config file
that only the rehearsal's own processes read (TF_CLI_CONFIG_FILE), never the user's ~/.terraformrc.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from tools.rehearsal.schema import PROVIDER_SOURCE, PROVIDER_VERSION

PLATFORM = "linux_amd64"


def write_mirror(root: Path, *, python: str, repo: Path, schema: Path) -> Path:
    """Write root/mirror (unpacked layout) and root/terraform.rc; return the CLI config path.

    The mirror is the only installation method: Terraform cannot fetch any other provider, so a
    resource that binds to hashicorp/google (instead of the pinned google-beta) fails `init`
    without a byte leaving the machine.
    """
    package = root / "mirror" / PROVIDER_SOURCE / PROVIDER_VERSION / PLATFORM
    package.mkdir(parents=True, exist_ok=True)
    home = root / "provider-home"
    home.mkdir(exist_ok=True)
    executable = package / f"terraform-provider-google-beta_v{PROVIDER_VERSION}"
    executable.write_text(
        "#!/bin/sh\n"
        "# The stand-in google-beta (tools/rehearsal/provider.py), started by Terraform.\n"
        f"export PYTHONPATH={shlex.quote(str(repo))}\n"
        f"export TPUDEPLOY_REHEARSAL_SCHEMA={shlex.quote(str(schema))}\n"
        "# tf keeps its plugin TLS certificate under $HOME/.cache: the rehearsal's, not yours.\n"
        f"export HOME={shlex.quote(str(home))}\n"
        f'exec {shlex.quote(python)} -m tools.rehearsal.provider "$@"\n'
    )
    executable.chmod(0o755)
    config = root / "terraform.rc"
    config.write_text(
        "# Written by the rehearsal for its own Terraform runs (TF_CLI_CONFIG_FILE).\n"
        "disable_checkpoint = true\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{root / "mirror"}"\n'
        f'    include = ["{PROVIDER_SOURCE}"]\n'
        "  }\n"
        "}\n"
    )
    return config


def lock_file(root: Path, *, env: dict[str, str]) -> Path:
    """A .terraform.lock.hcl for the mirrored provider, computed offline (-fs-mirror).

    The cdktf CLI runs `terraform providers lock` before a stack's first init, and that command
    asks the origin registry whatever the CLI config says; a lock file already in the stack's
    directory that matches the pinned version makes it skip the call.
    """
    work = root / "lock"
    work.mkdir(parents=True, exist_ok=True)
    (work / "main.tf.json").write_text(
        json.dumps(
            {
                "terraform": {
                    "required_providers": {
                        "google-beta": {
                            "source": "hashicorp/google-beta",
                            "version": PROVIDER_VERSION,
                        }
                    }
                }
            }
        )
    )
    subprocess.run(
        [
            "terraform",
            "providers",
            "lock",
            f"-fs-mirror={root / 'mirror'}",
            f"-platform={PLATFORM}",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        check=True,
    )
    return work / ".terraform.lock.hcl"
