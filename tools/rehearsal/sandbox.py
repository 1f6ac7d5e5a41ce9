"""The node's boot, on this machine: the startup script from the created node's metadata, run
under bash against the fake metadata server, Secret Manager and Cloud Storage, with the real
curl, openssl and coreutils and a stand-in `docker` whose `run` starts tools/rehearsal/fake_vllm.py
for the vLLM container and Debian's nginx, on the rendered config, for the proxy container."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tools.rehearsal.fakes.opsagent_rules import refusals

HERE = Path(__file__).resolve().parent
STAND_IN = HERE / "stubs" / "stand_in.py"
# The Ops Agent's installer (templates/_telemetry.sh.j2): a stand-in read from a file:// URL by the
# node's real curl. The rehearsal is offline; it never fetches Google's installer.
OPS_AGENT_INSTALLER = HERE / "stubs" / "ops_agent_installer.sh"
FAKE_VLLM = HERE / "fake_vllm.py"
# The key poller's period in the rehearsal (the node's is 30 s, tpudeploy/render.py): one second,
# so the keys stage measures a rotation's propagation in seconds.
KEY_POLL_SECONDS = 1
# How long a stopped process group may take to exit on SIGTERM before stop() kills it.
STOP_GRACE_SECONDS = 5.0
# A real tmpfs for the node's /run: the startup script refuses to write its secrets elsewhere.
SHM = Path("/dev/shm")  # noqa: S108 - only ever a mkdtemp (0700, unique) below it


SYSTEM_STAND_INS = (
    "docker",
    "iptables",
    "ip6tables",
    "mount",
    "mountpoint",
    "sshd",
    "systemctl",
    # The key poller's transient service: never one on the machine running the rehearsal.
    "systemd-run",
)


def nginx_binary() -> str | None:
    return shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


@dataclass
class BootResult:
    returncode: int
    log: Path


class BootSandbox:
    """One TPU VM's disk and processes, under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # What else lives as long as this VM (the metadata server its key poller reads its
        # token from): stopped by stop().
        self.companions: list[contextlib.AbstractContextManager[object]] = []
        self.stopped = False
        self.home = root / "home"
        self.stub_dir = root / "stub"
        self.bin = root / "bin"
        # The node's /run: a tmpfs like the VM's (the secrets and the proxy's key live there and
        # nowhere else), removed by stop().
        memory = SHM if SHM.is_dir() and os.access(SHM, os.W_OK) else None
        self.run_root = Path(tempfile.mkdtemp(prefix="tpudeploy-rehearsal-", dir=memory))
        self.run_dir = self.run_root / "tpudeploy"
        for folder in (self.home, self.stub_dir, self.bin):
            folder.mkdir(parents=True, exist_ok=True)
        # docker is a stand-in, and so are the commands that change this machine's own system
        # (packet filter, mounts, sshd): the boot may run as root here. curl, tar, sleep and the
        # rest are the machine's own.
        for command in SYSTEM_STAND_INS:
            (self.bin / command).symlink_to(STAND_IN)
        self.sshd_config = root / "etc" / "ssh" / "sshd_config"
        self.sshd_config.parent.mkdir(parents=True)
        self.sshd_config.write_text(f"Include {self.sshd_config}.d/*.conf\nUsePAM yes\n")
        (self.bin / "python3").symlink_to(os.path.realpath(sys.executable))

    def boot(
        self,
        script: str,
        *,
        metadata_url: str,
        secretmanager_host: str,
        storage_host: str,
        hf_token_sha256: str,
        internet: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> BootResult:
        """Run the startup script once, like the guest agent does at boot. Without `internet`
        (no external address and no Cloud NAT) the node reaches the Google API fakes only:
        a pull from Docker Hub fails as it would."""
        nginx = nginx_binary()
        if nginx is None:
            raise FileNotFoundError("nginx is not installed (apt-get install nginx)")
        engine = [os.path.realpath(sys.executable), "-S", str(FAKE_VLLM)]
        (self.stub_dir / "config.json").write_text(
            json.dumps(
                {
                    "serve": {
                        "vllm": [*engine, "--hf-token-sha256", hf_token_sha256],
                        "nginx": nginx,
                    },
                    "internet": internet,
                    # The key poller (a transient systemd unit on the node) runs for real: the
                    # keys stage rotates keys under it.
                    "run_units": True,
                }
            )
        )
        path = self.root / "startup-script"
        path.write_text(script)
        log = self.root / "boot.log"
        env = {
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.home),
            "STUB_DIR": str(self.stub_dir),
            "TPUDEPLOY_METADATA_URL": metadata_url,
            "TPUDEPLOY_SECRETMANAGER_URL": f"http://{secretmanager_host}/v1",
            "TPUDEPLOY_STORAGE_URL": f"http://{storage_host}",
            "TPUDEPLOY_RUNTIME_DIR": str(self.run_dir),
            # Seconds, not the production minutes: the fake engine is up in well under one.
            "TPUDEPLOY_RETRIES": "3",
            "TPUDEPLOY_BACKOFF_SECONDS": "1",
            "TPUDEPLOY_READY_TIMEOUT": "60",
            "TPUDEPLOY_POLL_SECONDS": "1",
            "TPUDEPLOY_KEY_POLL_SECONDS": str(KEY_POLL_SECONDS),
            "TPUDEPLOY_PULL_TIMEOUT": "60",
            "TPUDEPLOY_SSHD_CONFIG": str(self.sshd_config),
            "TPUDEPLOY_LOGIN_GATE": str(self.root / "sbin" / "tpudeploy-login"),
            "TPUDEPLOY_LOG_DIR": str(self.log_dir),
            "TPUDEPLOY_OPS_AGENT_CONFIG": str(self.ops_agent_config),
            "TPUDEPLOY_OPS_AGENT_INSTALLER_URL": OPS_AGENT_INSTALLER.as_uri(),
        }
        if self.run_root.parent != SHM:
            # No /dev/shm here: say which filesystem stands in for memory (as tests do).
            fs = subprocess.run(
                ["stat", "-f", "-c", "%T", str(self.run_root)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            env["TPUDEPLOY_MEMORY_FILESYSTEMS"] = fs
        # A scenario's own variables (SCENARIO=idle: the fake TPU API, seconds for minutes).
        env.update(extra_env or {})
        with open(log, "wb") as out:
            proc = subprocess.run(
                ["bash", str(path)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=180,
                check=False,
            )
        return BootResult(proc.returncode, log)

    @property
    def log_dir(self) -> Path:
        return self.root / "var" / "log" / "tpudeploy"

    @property
    def ops_agent_config(self) -> Path:
        return self.root / "etc" / "google-cloud-ops-agent" / "config.yaml"

    def agent_problems(self) -> list[str]:
        """What the Ops Agent would refuse in the config this boot wrote
        (fakes/opsagent_rules.py), and any scrape target off loopback: vLLM is scraped on the
        node itself, never through the front door or another host."""
        if not self.ops_agent_config.exists():
            return [f"the boot wrote no Ops Agent config ({self.ops_agent_config})"]
        config = json.loads(self.ops_agent_config.read_text())
        problems = refusals(config)
        for receiver in config.get("metrics", {}).get("receivers", {}).values():
            for scrape in (receiver.get("config") or {}).get("scrape_configs", []):
                for group in scrape.get("static_configs", []):
                    problems += [
                        f"scrape target {t} is not on loopback"
                        for t in group.get("targets", [])
                        if t.rpartition(":")[0] not in ("127.0.0.1", "localhost", "[::1]")
                    ]
        return problems

    def pids(self) -> dict[str, int]:
        """What the stand-ins started and this VM still runs: container or unit -> pid (the
        leader of its own process group)."""
        state_path = self.stub_dir / "state.json"
        if not state_path.exists():
            return {}
        return dict(json.loads(state_path.read_text()).get("pids", {}))

    def stop(self) -> list[str]:
        """The VM is gone: stop what its containers and units started, and its memory with it.
        Returns what was still running STOP_GRACE_SECONDS after SIGTERM (then killed): empty
        when nothing was left behind. Once only: the stand-in's record still names the groups
        this stopped, whose ids the kernel may have given to other processes since, so a second
        call (a destroy, then the rehearsal's `finally`) signals nothing."""
        if self.stopped:
            return []
        self.stopped = True
        groups = self.pids()
        for pid in groups.values():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        left = [name for name, pid in groups.items() if _group_alive(pid)]
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = [name for name in left if _group_alive(groups[name])]
        for name in left:
            with contextlib.suppress(OSError):
                os.killpg(groups[name], signal.SIGKILL)
        for companion in self.companions:
            companion.__exit__(None, None, None)
        self.companions = []
        shutil.rmtree(self.run_root, ignore_errors=True)
        return left


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (a zombie nobody reaped does not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(") ", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()
