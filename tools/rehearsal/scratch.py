"""A scratch copy of the repository for one rehearsal: its own deploy.toml, state and cdktf.out.

The user's state files and deploy.toml are never read or written: the copy gets the tracked
(and untracked, not ignored) files of the working tree, links to the installed .venv and
node_modules, and a config file of its own.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
from pathlib import Path

# Never copied: the user's deployment, its state and everything generated.
_SKIP_NAMES = {"deploy.toml"}
_SKIP_DIRS = {".git", ".venv", "node_modules", "cdktf.out", "build", "bench-results"}
REHEARSAL_PROJECT = "tpudeploy-rehearsal"
# The TPU VM rehearsal's [access] clients (issue 37): the keys stage rotates the first with an
# overlap and revokes the second's old key at once, while a stream of the first runs.
REHEARSAL_CLIENTS = ("default", "ci")


def _tracked(repo: Path) -> list[str]:
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=repo,
            capture_output=True,
            check=True,
        ).stdout
        return sorted({p for p in listing.decode().split("\0") if p})
    except (OSError, subprocess.CalledProcessError):
        found = []
        for root, dirs, files in os.walk(repo):
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
            found += [os.path.relpath(Path(root, f), repo) for f in files]
        return sorted(found)


def copy_repository(repo: Path, dest: Path) -> None:
    """Copy the working tree's files to `dest`; link .venv and node_modules to the installed
    ones."""
    for rel in _tracked(repo):
        parts = Path(rel).parts
        if rel in _SKIP_NAMES or parts[0] in _SKIP_DIRS or rel.endswith((".tfstate", ".backup")):
            continue
        source = repo / rel
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        # copy2 keeps modification times, so make sees the same dependency order as in `repo`.
        shutil.copy2(source, target, follow_symlinks=False)
    for link in (".venv", "node_modules"):
        installed = (repo / link).resolve()
        if not installed.is_dir():
            raise FileNotFoundError(f"{repo / link} is not installed: run `make install` first")
        (dest / link).symlink_to(installed)


def free_port() -> int:
    """A loopback port nobody listens on right now (for the node's vLLM)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_config(
    dest: Path,
    *,
    provisioning: str,
    port: int,
    proxy_port: int,
    state_bucket: str = "",
    pipeline: bool = False,
    ladder: tuple[str, ...] = (),
    idle_stop_after: str = "",
) -> Path:
    """The rehearsed deployment: the seed's defaults, this provisioning model, a fake project,
    vLLM and its proxy on free loopback ports and the firewall opened to loopback (the smoke
    test's caller), two [access] clients. With `state_bucket`, remote state; with `pipeline` as
    well, a pipeline deployment (SCENARIO=pipeline). With `ladder` (zones), a capacity ladder of
    this provisioning model, one rung per zone, instead of the top-level provisioning
    (SCENARIO=ladder)."""
    rungs = ", ".join(f'{{provisioning = "{provisioning}", zone = "{z}"}}' for z in ladder)
    path = dest / "deploy.toml"
    path.write_text(
        "# Written by `make rehearse` for its scratch copy: the build log's deployment with\n"
        "# the provisioning model asked for, in the fake cloud's project.\n"
        f'project = "{REHEARSAL_PROJECT}"\n'
        + (f"capacity = [{rungs}]\n" if ladder else f'provisioning = "{provisioning}"\n')
        + (f'state_bucket = "{state_bucket}"\n' if state_bucket else "")
        + ("pipeline = true\n" if pipeline else "")
        + "\n[network]\n"
        'allowed_cidrs = ["127.0.0.1/32"]\n'
        # The on-demand rehearsal is a private node: no external address, egress by Cloud NAT.
         + ("enable_external_ip = false\n" if provisioning == "on-demand" else "") + "\n[vllm]\n"
        f"port = {port}\n"
        "\n[proxy]\n"
        f"port = {proxy_port}\n"
        "\n[access]\n"
        f"clients = {json.dumps(list(REHEARSAL_CLIENTS))}\n"
        # ci capped small, as a CI client would be: default keeps the planner's share of the
        # rest (14 streams, 840 requests a minute, a burst of 14). With an even split (8, burst
        # 8) `make accept`'s 17 requests in about a second against the instant fake engine
        # meet the rate limit (429 at its determinism row); on the chip they take seconds.
        f"\n[access.limits.{REHEARSAL_CLIENTS[1]}]\n"
        "streams = 2\n"
        # The fake Cloud Scheduler has only the locations its page confirms (not us-west4).
        + ("" if provisioning == "flex-start" else '\n[deadline]\nregion = "us-central1"\n')
        # SCENARIO=idle: the node deletes itself when idle (the boot is given seconds instead).
        + (f'\n[idle]\nstop_after = "{idle_stop_after}"\n' if idle_stop_after else "")
    )
    return path


def install_post_synth(dest: Path, hook: str, python: str) -> None:
    """Run `hook` (module:function) on cdktf.out after every synth of the scratch copy: how the
    tests break the synthesized JSON on purpose without touching the product."""
    config_path = dest / "cdktf.json"
    config = json.loads(config_path.read_text())
    wrapper = f"{shlex.quote(python)} -m tools.rehearsal.post_synth {shlex.quote(hook)}"
    config["app"] = f"{wrapper} -- {config['app']}"
    config_path.write_text(json.dumps(config, indent=2) + "\n")


def write_user_credentials(workdir: Path) -> Path:
    """An authorized-user credentials file of the kind gcloud writes (never sent anywhere)."""
    path = workdir / "application_default_credentials.json"
    path.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "rehearsal.apps.googleusercontent.com",
                "client_secret": "rehearsal-not-a-secret",
                "refresh_token": "rehearsal-not-a-token",
            }
        )
    )
    path.chmod(0o600)
    return path


def write_gke_config(
    dest: Path,
    *,
    name: str = "gemma4-gke",
    file: str = "deploy.toml",
    nat: bool = True,
    state_bucket: str = "",
    pipeline: bool = False,
    idle_stop_after: str = "",
) -> Path:
    """The shipped deployments/gke.toml's deployment, in the fake cloud's project."""
    path = dest / file
    shipped = dest / "deployments" / "gke.toml"
    if name == "gemma4-gke" and path != shipped:
        # This file is that deployment: the scratch copy keeps one file per name, as `make check`
        # and `make deploy` require (tpudeploy.stateinit.refuse_same_name).
        shipped.unlink(missing_ok=True)
    path.write_text(
        "# Written by `make rehearse PLATFORM=gke` for its scratch copy: deployments/gke.toml's\n"
        "# deployment in the fake cloud's project.\n"
        f'project = "{REHEARSAL_PROJECT}"\n'
        f'name = "{name}"\n'
        'platform = "gke"\n'
        'zone = "us-west4-a"\n'
        # A pipeline deployment (SCENARIO=pipeline): remote state, the bootstrap's objects.
        + (f'state_bucket = "{state_bucket}"\n' if state_bucket else "")
        + ("pipeline = true\n" if pipeline else "")
        + "\n[network]\n"
        'allowed_cidrs = ["127.0.0.1/32"]\n' + ("" if nat else "nat = false\n") + "\n[gke]\n"
        # One NAT per subnetwork: a second deployment on the same one uses the first's.
        "min_replicas = 1\n"
        "max_replicas = 4\n"
        'capacity = "spot,flex-start"\n'
        'max_run_duration = "1d"\n'
        'min_version = "1.33.0-gke.1712000"\n'
        # As deployments/gke.toml: the fake Cloud Scheduler lists no us-west4, as its page.
        '\n[deadline]\nregion = "us-central1"\n'
    )
    return path


# The targets run with the outer `make rehearse`'s install as is: never reinstall the shared
# .venv or node_modules from a scratch copy.
MAKE = ["make", "--no-print-directory", "-o", ".venv/.installed", "-o", "node_modules/.installed"]


def _plain(text: str) -> str:
    """Without the terminal colour codes Terraform and the cdktf CLI print."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _tail(log: Path, lines: int = 25) -> str:
    text = _plain(log.read_text(errors="replace")).splitlines() if log.exists() else []
    return "\n".join(f"      | {line}" for line in text[-lines:])
