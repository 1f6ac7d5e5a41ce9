"""Installs the stand-in providers for Terraform: a local provider mirror and a CLI config file
that only the rehearsal's own processes read (TF_CLI_CONFIG_FILE), never the user's ~/.terraformrc.

google-beta always; kubernetes too when a schema is given for it (platform = "gke": the serving
stack's objects). Both run tools/rehearsal/provider.py, told apart by TPUDEPLOY_REHEARSAL_PROVIDER.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from tools.rehearsal.bindings import GOOGLE_BETA, KUBERNETES, Binding

PLATFORM = "linux_amd64"
PROVIDER_ENV = "TPUDEPLOY_REHEARSAL_PROVIDER"


def write_mirror(
    root: Path,
    *,
    python: str,
    repo: Path,
    schema: Path,
    kubernetes_schema: Path | None = None,
) -> Path:
    """Write root/mirror (unpacked layout) and root/terraform.rc; return the CLI config path.

    The mirror is the only installation method: Terraform cannot fetch any other provider, so a
    resource that binds to hashicorp/google (instead of the pinned google-beta) fails `init`
    without a byte leaving the machine.
    """
    home = root / "provider-home"
    home.mkdir(parents=True, exist_ok=True)
    served = {GOOGLE_BETA: schema}
    if kubernetes_schema is not None:
        served[KUBERNETES] = kubernetes_schema
    for binding, schema_file in served.items():
        package = root / "mirror" / binding.source / binding.version / PLATFORM
        package.mkdir(parents=True, exist_ok=True)
        executable = package / f"terraform-provider-{binding.name}_v{binding.version}"
        executable.write_text(
            "#!/bin/sh\n"
            f"# The stand-in {binding.name} (tools/rehearsal/provider.py), started by Terraform.\n"
            f"export PYTHONPATH={shlex.quote(str(repo))}\n"
            f"export TPUDEPLOY_REHEARSAL_SCHEMA={shlex.quote(str(schema_file))}\n"
            f"export {PROVIDER_ENV}={binding.name}\n"
            "# tf keeps its plugin TLS certificate under $HOME/.cache: the rehearsal's.\n"
            f"export HOME={shlex.quote(str(home))}\n"
            f'exec {shlex.quote(python)} -m tools.rehearsal.provider "$@"\n'
        )
        executable.chmod(0o755)
    include = ", ".join(f'"{binding.source}"' for binding in served)
    config = root / "terraform.rc"
    config.write_text(
        "# Written by the rehearsal for its own Terraform runs (TF_CLI_CONFIG_FILE).\n"
        "disable_checkpoint = true\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{root / "mirror"}"\n'
        f"    include = [{include}]\n"
        "  }\n"
        "}\n"
    )
    return config


def lock_file(
    root: Path, *, env: dict[str, str], bindings: tuple[Binding, ...] = (GOOGLE_BETA,)
) -> Path:
    """A .terraform.lock.hcl for the mirrored providers, computed offline (-fs-mirror).

    The cdktf CLI runs `terraform providers lock` before a stack's first init, and that command
    asks the origin registry whatever the CLI config says; a lock file already in the stack's
    directory that matches the pinned versions makes it skip the call.
    """
    work = root / ("lock-" + "-".join(b.name for b in bindings) if len(bindings) > 1 else "lock")
    work.mkdir(parents=True, exist_ok=True)
    required = {b.name: {"source": f"hashicorp/{b.name}", "version": b.version} for b in bindings}
    (work / "main.tf.json").write_text(json.dumps({"terraform": {"required_providers": required}}))
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
