"""A fake TPU VM for the rendered boot scripts: bash with stand-in docker/curl/gcloud/sleep
(tests/stubs) in front of the real python3, openssl, tar and coreutils.

    node = Node(tmp_path, cfg, health=["000", 200])   # scripted answers, see tests/stubs
    boot = node.run()                                 # startup.sh; node.run("shutdown.sh")
    node.docker_runs()[CONTAINER]                     # what `docker run` was given
    node.assert_no_secret_leaked(boot)

Shared by tests/render/test_startup_script.py and tests/render/test_proxy.py (which runs the real
nginx on the files a sandbox boot wrote).
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import boot_logs
from tpudeploy.config import DeployConfig
from tpudeploy.render import compile_cache_key, render_shutdown_script, render_startup_script
from tpudeploy.tlscert import make_bundle

STUBS = Path(__file__).parent / "stubs"
STAND_IN_SERVER = STUBS.parent.parent / "tools" / "rehearsal" / "stubs" / "stand_in_server.py"
# The Ops Agent's installer as the sandbox's stand-in curl serves it (never the internet).
OPS_AGENT_INSTALLER = STAND_IN_SERVER.with_name("ops_agent_installer.sh")
OPS_AGENT_INSTALLER_URL = "http://dl.test/cloudagents/add-google-cloud-ops-agent-repo.sh"
# Built at run time so no tracked file holds a token-shaped string (secret scanners, the
# before-stop hook); the values are fakes that prove the real ones never leak.
HF_TOKEN = "hf_" + "TESTtokenNeverPrinted0123456789"
API_KEY = "vk-TESTapiKeyNeverPrinted-9876543210abcdefg"  # 43, as `make api-key` makes
ACCESS_TOKEN = "ya29.TESTaccessTokenNeverInArgv"  # noqa: S105
SECRETS = (HF_TOKEN, API_KEY, ACCESS_TOKEN)
# The deployment's front-door certificate and key, as `make tls-cert` stores them (one per test
# process: every sandbox node of a deployment serves the same one, as re-created nodes must).
TLS = make_bundle("test-deployment")


def key_lines(key_pem: str) -> list[str]:
    """The base64 lines of a private key: any of them in a file or an output is a leak, however
    the PEM around it was cut."""
    return [line for line in key_pem.splitlines() if line and not line.startswith("-----")]


PROJECT = "test-proj"
# What the stand-in `docker image inspect` reports for a pulled image
# (tools/rehearsal/stubs/stand_in.py).
DEFAULT_DIGEST = "5" * 64


def sha(value: str | bytes) -> str:
    return hashlib.sha256(value.encode() if isinstance(value, str) else value).hexdigest()


def proxy_key_line(key: str, client: str = "default") -> str:
    """What api_keys.conf must hold for `key`: the key map's line (tpudeploy/node/keymap.py):
    the key's 11-character id, the client and nginx's secure_link digest of "Bearer <key>"
    (MD5, base64url without padding), computed here independently of the boot script."""
    digest = hashlib.md5(f"Bearer {key}".encode(), usedforsecurity=False).digest()
    return f'"{key[:11]}" "{client} {base64.urlsafe_b64encode(digest).decode().rstrip("=")}";\n'


def key_map_entries(text: str) -> list[str]:
    """A key map's entries (keymap.render's lines but its leading comment), each with its
    newline: what nginx's map reads from api_keys.conf."""
    return [line for line in text.splitlines(keepends=True) if not line.startswith("#")]


def filesystem_type(path: Path) -> str:
    """What `stat -f -c %T` says, as the startup script's tmpfs check reads it."""
    done = subprocess.run(
        ["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


_server: subprocess.Popen[bytes] | None = None
_server_port = ""


def stand_in_port() -> str:
    """The port of this process's stand-in server (tools/rehearsal/stubs/stand_in_server.py),
    started on first use: every Node's stand-in calls go to it, a few ms each instead of a new
    Python (~70 ms) per call. It stops when this process ends (its stdin closes)."""
    global _server, _server_port
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(
            [os.path.realpath(sys.executable), "-S", str(STAND_IN_SERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert _server.stdout is not None
        _server_port = _server.stdout.readline().decode().strip()
        if not _server_port.isdigit():
            raise RuntimeError(f"the stand-in server did not start (it printed {_server_port!r})")
        atexit.register(_server.kill)
    return _server_port


@dataclass
class Boot:
    returncode: int
    stdout: str
    stderr: str


class Node:
    """One fake TPU VM: a HOME, a runtime tmpfs stand-in, the stubs' state and a fake bucket."""

    def __init__(self, root: Path, cfg: DeployConfig, **config: object) -> None:
        self.root, self.cfg = root, cfg
        self.home = root / "home"
        self.run_dir = root / "run" / "tpudeploy"
        self.stub_dir = root / "stub"
        for d in (self.home, self.run_dir.parent, self.stub_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.config: dict[str, object] = {
            "access_token": ACCESS_TOKEN,
            "project": PROJECT,
            "secrets": {
                cfg.hf_token_secret_id: HF_TOKEN,
                cfg.api_key_secret_id: API_KEY,
                cfg.tls_secret_id: TLS.text,
            },
            "health": ["000", "000", 200],
            "proxy_name": cfg.proxy.container_name,
            # `docker logs` of the vLLM container: the build log's boot (tests/boot_logs.py).
            "logs": {cfg.vllm.container_name: boot_logs.vllm_log()},
            "exec": {
                cfg.vllm.container_name: {
                    "python3": {"stdout": json.dumps(boot_logs.IMAGE_VERSIONS)}
                },
                cfg.proxy.container_name: {"nginx": {"stderr": boot_logs.NGINX_V}},
            },
            "downloads": {OPS_AGENT_INSTALLER_URL: OPS_AGENT_INSTALLER.read_text()},
        }
        self.config.update(config)
        # The sandbox's runtime directory is on whatever filesystem the test's tmp_path is; the
        # real node's /run is a tmpfs. Tell the script which type stands in for "memory".
        self.env: dict[str, str] = {
            "TPUDEPLOY_MEMORY_FILESYSTEMS": filesystem_type(root),
            "TPUDEPLOY_SSHD_CONFIG": str(self.sshd_config),
            "TPUDEPLOY_LOGIN_GATE": str(self.login_gate),
        }
        # Ubuntu's sshd_config starts by including its drop-in directory.
        self.sshd_config.parent.mkdir(parents=True, exist_ok=True)
        self.sshd_config.write_text(
            f"Include {self.sshd_config}.d/*.conf\nKbdInteractiveAuthentication no\nUsePAM yes\n"
        )
        # python3 the real interpreter, not a version-manager shim: the stubs and the script's
        # JSON helpers start dozens of times per boot.
        # The node's python3 is the image's, without this project's packages: the script may use
        # the standard library only. A pyvenv.cfg one directory above the executable makes this
        # folder an empty virtual environment ("If a file named pyvenv.cfg exists one directory
        # above sys.executable, sys.prefix and sys.exec_prefix are set to that directory",
        # https://docs.python.org/3/library/site.html): no site-packages and none of their .pth
        # start-up hooks, which cost a Python with them 50 ms more per start (17 ms, not 68 ms,
        # measured here), a dozen starts per boot.
        self.bin = root / "bin"
        self.bin.mkdir(exist_ok=True)
        real_python = Path(os.path.realpath(sys.executable))
        (self.bin / "python3").symlink_to(real_python)
        (root / "pyvenv.cfg").write_text(
            f"home = {real_python.parent}\ninclude-system-site-packages = false\n"
        )
        self.scripts = root / "scripts"
        self.scripts.mkdir(exist_ok=True)
        (self.scripts / "startup.sh").write_text(render_startup_script(cfg))
        (self.scripts / "shutdown.sh").write_text(render_shutdown_script(cfg))

    @property
    def config_file(self) -> Path:
        # Holds the secret values the fake Secret Manager serves: the one file allowed to.
        return self.stub_dir / "config.json"

    @property
    def sshd_config(self) -> Path:
        return self.root / "etc" / "ssh" / "sshd_config"

    @property
    def login_gate(self) -> Path:
        return self.root / "usr" / "local" / "sbin" / "tpudeploy-login"

    @property
    def log_dir(self) -> Path:
        """The node's /var/log/tpudeploy: what the Ops Agent reads."""
        return self.root / "var" / "log" / "tpudeploy"

    @property
    def ops_agent_config(self) -> Path:
        return self.root / "etc" / "google-cloud-ops-agent" / "config.yaml"

    def boot_entries(self) -> list[dict[str, Any]]:
        """The boot log's structured entries (the tpudeploy-boot log), in order."""
        path = self.log_dir / "boot.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]

    @property
    def hf_dir(self) -> Path:
        return self.run_dir / "hf"

    @property
    def cache_dir(self) -> Path:
        return self.home / ".cache" / "vllm"

    @property
    def proxy_dir(self) -> Path:
        return self.run_dir / "proxy"

    def run(self, script: str = "startup.sh", **env: str) -> Boot:
        """Run a script of the node (a name under scripts/, or an absolute path such as the
        key poller the boot wrote to its tmpfs) with the stand-ins, to its end."""
        proc = subprocess.run(
            ["bash", str(self.scripts / script)],
            env=self.environment(**env),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        return Boot(proc.returncode, proc.stdout, proc.stderr)

    def environment(self, **env: str) -> dict[str, str]:
        """The environment a script of this node runs in; writes the stand-ins' config first."""
        self.config_file.write_text(json.dumps(self.config))
        return {
            "PATH": f"{STUBS}:{self.bin}:{os.environ['PATH']}",
            "HOME": str(self.home),
            "STUB_DIR": str(self.stub_dir),
            "STAND_IN_PORT": stand_in_port(),
            "TPUDEPLOY_METADATA_URL": "http://metadata.test/computeMetadata/v1",
            "TPUDEPLOY_SECRETMANAGER_URL": "http://secretmanager.test/v1",
            "TPUDEPLOY_STORAGE_URL": "http://storage.test",
            "TPUDEPLOY_RUNTIME_DIR": str(self.run_dir),
            "TPUDEPLOY_RETRIES": "3",
            "TPUDEPLOY_BACKOFF_SECONDS": "1",
            "TPUDEPLOY_READY_TIMEOUT": "100",
            "TPUDEPLOY_POLL_SECONDS": "10",
            "TPUDEPLOY_LOG_DIR": str(self.log_dir),
            "TPUDEPLOY_OPS_AGENT_CONFIG": str(self.ops_agent_config),
            "TPUDEPLOY_OPS_AGENT_INSTALLER_URL": OPS_AGENT_INSTALLER_URL,
            **self.env,
            **env,
        }

    def calls(self, cmd: str | None = None) -> list[dict[str, Any]]:
        path = self.stub_dir / "calls.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        entries = [json.loads(line) for line in lines]
        return [e for e in entries if cmd is None or e["cmd"] == cmd]

    def docker(self, sub: str) -> list[dict[str, Any]]:
        return [c for c in self.calls("docker") if c["argv"][0] == sub]

    def docker_runs(self) -> dict[str, dict[str, Any]]:
        """{container name: the parsed options of its last `docker run`}."""
        return {c["run"]["name"]: c["run"] for c in self.docker("run")}

    def pulls(self, image: str) -> int:
        return sum(1 for c in self.docker("pull") if c["argv"][-1] == image)

    def guest_attributes(self) -> list[tuple[str, str]]:
        path = self.stub_dir / "guest_attributes.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [(e["key"], e["value"]) for e in map(json.loads, lines)]

    def attribute(self, key: str) -> str | None:
        """The last value the boot set for tpudeploy/KEY."""
        values = [v for k, v in self.guest_attributes() if k == f"tpudeploy/{key}"]
        return values[-1] if values else None

    def phases(self) -> list[str]:
        return [v for k, v in self.guest_attributes() if k == "tpudeploy/phase"]

    def reasons(self) -> list[str]:
        return [v for k, v in self.guest_attributes() if k == "tpudeploy/reason" and v]

    def cache_object(self, digest: str = DEFAULT_DIGEST) -> Path:
        bucket = self.cfg.compile_cache_bucket(PROJECT)
        key = compile_cache_key(self.cfg)
        return self.stub_dir / "gcs" / bucket / "xla" / key / f"{digest}.tar.gz"

    def seed_bucket(self, files: dict[str, bytes], digest: str = DEFAULT_DIGEST) -> Path:
        """Put an archive of regular files into the fake bucket, as an earlier boot would."""
        obj = self.cache_object(digest)
        obj.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(obj, "w:gz") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(f"./{name}")
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        return obj

    def tls_key_lines(self) -> list[str]:
        """The base64 lines of every private key the fake Secret Manager serves this node."""
        secrets = self.config.get("secrets")
        assert isinstance(secrets, dict)
        bundle = str(secrets.get(self.cfg.tls_secret_id, ""))
        return key_lines(bundle[bundle.find("-----BEGIN PRIVATE KEY-----") :])

    def client_keys(self) -> list[str]:
        """Every key of every [access] client the fake Secret Manager serves (current and
        previous: each line's first word, tpudeploy/node/keymap.py)."""
        secrets = self.config.get("secrets")
        assert isinstance(secrets, dict)
        payloads = [str(secrets.get(s, "")) for s in self.cfg.client_key_secret_ids.values()]
        return [line.split()[0] for p in payloads for line in p.splitlines() if line.split()]

    def assert_no_secret_leaked(self, *boots: Boot) -> None:
        """No secret in any output, argument list, environment passed to a command, or file;
        no client's key in any file at all (the proxy holds digests and 11-character ids), the
        token and the TLS key only in the runtime tmpfs."""
        tls_key = self.tls_key_lines()
        keys = [k for k in self.client_keys() if len(k) >= 32]
        for boot in boots:
            for secret in (*SECRETS, *keys):
                assert secret not in boot.stdout and secret not in boot.stderr
            for line in tls_key:
                assert line not in boot.stdout and line not in boot.stderr, "TLS key printed"
        hashes = {sha(s): s for s in (*SECRETS, *keys)}
        for call in self.calls():
            flat = json.dumps(call["argv"])
            for secret in (*SECRETS, *keys, *tls_key):
                assert secret not in flat, f"secret in argv of {call['cmd']}: {call['argv']}"
            leaked = {name for name, h in call["env_sha256"].items() if h in hashes}
            assert not leaked, f"secret in the environment of {call['cmd']}: {sorted(leaked)}"
            for value in (call.get("run") or {}).get("env", {}).values():
                assert value not in SECRETS, "secret passed to docker run with -e"
        for path in self.root.rglob("*"):
            if not path.is_file() or path.is_symlink() or path == self.config_file:
                continue
            data = path.read_bytes()
            for key in (API_KEY, *keys):
                assert key.encode() not in data, f"a client's API key written to {path}"
            assert ACCESS_TOKEN.encode() not in data, f"access token written to {path}"
            if self.run_dir not in path.parents:
                assert HF_TOKEN.encode() not in data, f"token written to {path}"
                for line in tls_key:
                    assert line.encode() not in data, f"TLS key written to {path}"
        if self.run_dir.exists():
            assert stat.S_IMODE(self.run_dir.stat().st_mode) == 0o700
            for token_file in ("auth.curl", "keypoll-auth.curl"):
                assert not (self.run_dir / token_file).exists(), "token file left behind"
