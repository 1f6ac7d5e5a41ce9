"""The node's boot, on this machine: the startup script from the created node's metadata, run
under bash against the fake metadata server, Secret Manager and Cloud Storage, with the real
curl and a stand-in `docker` whose `run` starts tools/rehearsal/fake_vllm.py on loopback."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAND_IN = HERE / "stubs" / "stand_in.py"
FAKE_VLLM = HERE / "fake_vllm.py"


@dataclass
class BootResult:
    returncode: int
    log: Path


class BootSandbox:
    """One TPU VM's disk and processes, under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.stub_dir = root / "stub"
        self.bin = root / "bin"
        self.run_dir = root / "run" / "tpudeploy"
        for folder in (self.home, self.stub_dir, self.bin, self.run_dir.parent):
            folder.mkdir(parents=True, exist_ok=True)
        # Only docker is a stand-in; curl, tar, sleep and the rest are the machine's own.
        (self.bin / "docker").symlink_to(STAND_IN)
        (self.bin / "python3").symlink_to(os.path.realpath(sys.executable))

    def boot(
        self,
        script: str,
        *,
        metadata_url: str,
        secretmanager_host: str,
        storage_host: str,
        hf_token_sha256: str,
    ) -> BootResult:
        """Run the startup script once, like the guest agent does at boot."""
        (self.stub_dir / "config.json").write_text(
            json.dumps(
                {
                    "serve": [
                        os.path.realpath(sys.executable),
                        "-S",
                        str(FAKE_VLLM),
                        "--hf-token-sha256",
                        hf_token_sha256,
                    ]
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
        }
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

    def stop(self) -> None:
        """The VM is gone: stop what its container started."""
        state_path = self.stub_dir / "state.json"
        if not state_path.exists():
            return
        pid = json.loads(state_path.read_text()).get("pid")
        if pid:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGTERM)


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()
