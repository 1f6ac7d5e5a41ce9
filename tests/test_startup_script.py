"""The rendered boot scripts run under bash with stand-in docker/curl/gcloud/sleep (tests/stubs)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.render import (
    compile_cache_key,
    node_metadata,
    render_shutdown_script,
    render_startup_script,
    vllm_serve_args,
)

STUBS = Path(__file__).parent / "stubs"
# Built at run time so no tracked file holds a token-shaped string (secret scanners, the
# before-stop hook); the value is a fake that proves the real one never leaks.
HF_TOKEN = "hf_" + "TESTtokenNeverPrinted0123456789"
API_KEY = "vk-TESTapiKeyNeverPrinted-9876543210abcdef"
ACCESS_TOKEN = "ya29.TESTaccessTokenNeverInArgv"  # noqa: S105
SECRETS = (HF_TOKEN, API_KEY, ACCESS_TOKEN)
PROJECT = "test-proj"


@pytest.fixture(scope="module")
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT})


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
            "secrets": {cfg.hf_token_secret_id: HF_TOKEN, cfg.api_key_secret_id: API_KEY},
            "health": ["000", "000", 200],
        }
        self.config.update(config)
        # python3 the real interpreter, not a version-manager shim: the stubs and the script's
        # JSON helpers start dozens of times per boot.
        self.bin = root / "bin"
        self.bin.mkdir(exist_ok=True)
        (self.bin / "python3").symlink_to(os.path.realpath(sys.executable))
        self.scripts = root / "scripts"
        self.scripts.mkdir(exist_ok=True)
        (self.scripts / "startup.sh").write_text(render_startup_script(cfg))
        (self.scripts / "shutdown.sh").write_text(render_shutdown_script(cfg))

    @property
    def config_file(self) -> Path:
        # Holds the secret values the fake Secret Manager serves: the one file allowed to.
        return self.stub_dir / "config.json"

    def run(self, script: str = "startup.sh") -> Boot:
        self.config_file.write_text(json.dumps(self.config))
        env = {
            "PATH": f"{STUBS}:{self.bin}:{os.environ['PATH']}",
            "HOME": str(self.home),
            "STUB_DIR": str(self.stub_dir),
            "TPUDEPLOY_METADATA_URL": "http://metadata.test/computeMetadata/v1",
            "TPUDEPLOY_SECRETMANAGER_URL": "http://secretmanager.test/v1",
            "TPUDEPLOY_STORAGE_URL": "http://storage.test",
            "TPUDEPLOY_RUNTIME_DIR": str(self.run_dir),
            "TPUDEPLOY_RETRIES": "3",
            "TPUDEPLOY_BACKOFF_SECONDS": "1",
            "TPUDEPLOY_READY_TIMEOUT": "100",
            "TPUDEPLOY_POLL_SECONDS": "10",
        }
        proc = subprocess.run(
            ["bash", str(self.scripts / script)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return Boot(proc.returncode, proc.stdout, proc.stderr)

    def calls(self, cmd: str | None = None) -> list[dict]:
        path = self.stub_dir / "calls.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        entries = [json.loads(line) for line in lines]
        return [e for e in entries if cmd is None or e["cmd"] == cmd]

    def docker(self, sub: str) -> list[dict]:
        return [c for c in self.calls("docker") if c["argv"][0] == sub]

    def phases(self) -> list[str]:
        path = self.stub_dir / "guest_attributes.jsonl"
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        return [e["value"] for e in entries if e["key"] == "tpudeploy/phase"]

    def reasons(self) -> list[str]:
        path = self.stub_dir / "guest_attributes.jsonl"
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        return [e["value"] for e in entries if e["key"] == "tpudeploy/reason" and e["value"]]

    @property
    def cache_object(self) -> Path:
        bucket = self.cfg.compile_cache_bucket(PROJECT)
        return self.stub_dir / "gcs" / bucket / "xla" / compile_cache_key(self.cfg) / "cache.tar.gz"

    def seed_bucket(self, files: dict[str, bytes]) -> None:
        self.cache_object.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(self.cache_object, "w:gz") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(f"./{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

    def assert_no_secret_leaked(self, *boots: Boot) -> None:
        for boot in boots:
            for secret in SECRETS:
                assert secret not in boot.stdout and secret not in boot.stderr
        for call in self.calls():
            flat = json.dumps(call["argv"])
            for secret in SECRETS:
                assert secret not in flat, f"secret in argv of {call['cmd']}: {call['argv']}"
        for path in self.root.rglob("*"):
            if not path.is_file() or path == self.config_file or self.run_dir in path.parents:
                continue
            data = path.read_bytes()
            for secret in SECRETS:
                assert secret.encode() not in data, f"secret written to {path}"
        if self.run_dir.exists():
            assert stat.S_IMODE(self.run_dir.stat().st_mode) == 0o700
            assert not (self.run_dir / "auth.curl").exists(), "token file left behind"


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def index_of(calls: list[dict], pred) -> int:
    for i, c in enumerate(calls):
        if pred(c):
            return i
    raise AssertionError("no such call")


def test_cold_boot_runs_the_seed_command_and_saves_the_cache(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr

    (run,) = node.docker("run")
    argv = run["argv"]
    # The seed's flags reach `vllm serve` in order, after the image.
    image_at = argv.index(cfg.vllm.image)
    assert argv[image_at + 1 :] == vllm_serve_args(cfg.vllm)
    for flag in ("--max-model-len", "--limit-mm-per-prompt", "--tool-call-parser"):
        assert flag in argv
    assert argv[argv.index("--allowed-media-domains") + 1] == "media-urls-disabled.invalid"
    assert "VLLM_MEDIA_URL_ALLOW_REDIRECTS=0" in argv
    assert f"{node.home}/.cache/vllm:/root/.cache/vllm" in argv
    assert {"--privileged", "--net=host", "--detach"} <= set(argv)
    # Both secrets reach docker through its environment, never as values on the command line.
    assert argv.count("HF_TOKEN") == 1 and argv.count("VLLM_API_KEY") == 1
    assert run["secret_env_sha256"] == {"HF_TOKEN": sha(HF_TOKEN), "VLLM_API_KEY": sha(API_KEY)}
    others = [c for c in node.calls() if not (c["cmd"] == "docker" and c["argv"][0] == "run")]
    assert not any(c["secret_env_sha256"] for c in others)

    assert node.phases() == [
        "reading-secrets",
        "pulling-image",
        "restoring-cache",
        "starting-vllm",
        "ready",
    ]
    # Cold: no archive yet; the compiled programs are uploaded after ready.
    with tarfile.open(node.cache_object) as tar:
        assert sorted(tar.getnames()) == [
            ".",
            "./xla_cache",
            "./xla_cache/jit_decode-cache",
            "./xla_cache/jit_prefill-cache",
        ]
    node.assert_no_secret_leaked(boot)


def test_warm_boot_restores_before_docker_run_and_skips_an_unchanged_save(
    tmp_path: Path, cfg
) -> None:
    node = Node(tmp_path, cfg, compiles=["jit_decode-cache"])
    node.seed_bucket({"xla_cache/jit_decode-cache": b"x" * 64})
    before = node.cache_object.read_bytes()
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    assert (node.home / ".cache/vllm/xla_cache/jit_decode-cache").exists()

    calls = node.calls()
    url = node.cache_object.relative_to(node.stub_dir / "gcs").as_posix()
    get = index_of(calls, lambda c: c["cmd"] == "curl" and c.get("url", "").endswith(url))
    run = index_of(calls, lambda c: c["cmd"] == "docker" and c["argv"][0] == "run")
    assert get < run
    # Nothing new was compiled: no second upload of the same archive.
    assert node.cache_object.read_bytes() == before
    assert "compile cache unchanged" in boot.stderr
    node.assert_no_secret_leaked(boot)


def test_new_programs_are_saved_after_ready(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg)
    node.seed_bucket({"xla_cache/jit_decode-cache": b"x" * 64})
    assert node.run().returncode == 0
    calls = node.calls()
    ready = index_of(
        calls,
        lambda c: c["cmd"] == "curl" and c.get("status") == 200 and c["url"].endswith("/health"),
    )
    put = index_of(calls, lambda c: c["cmd"] == "curl" and "--upload-file" in c["argv"])
    assert ready < put
    with tarfile.open(node.cache_object) as tar:
        assert "./xla_cache/jit_prefill-cache" in tar.getnames()


def test_cache_key_changes_with_shape_flags_only(cfg) -> None:
    base = compile_cache_key(cfg)
    assert len(base) == 16 and int(base, 16) >= 0
    for change in (
        {"vllm": {"max_model_len": 16384}},
        {"vllm": {"max_num_batched_tokens": 8192}},
        {"vllm": {"kv_cache_dtype": "fp8_e4m3", "force_kv_cache_dtype": True}},
        {"vllm": {"limit_mm_per_prompt": {"image": 1}}},
        {"vllm": {"disable_chunked_mm_input": False}},
        {"vllm": {"vllm_tpu_bucket_padding_gap": 128}},
        {"vllm": {"image": "vllm/vllm-tpu:v0.33.0"}},
        {"vllm": {"gpu_memory_utilization": 0.9}},
    ):
        other = parse_config({"project": PROJECT, **change})
        assert compile_cache_key(other) != base, change
    for same in (
        {"vllm": {"port": 8080}},
        {"vllm": {"allowed_media_domains": ["upload.wikimedia.org"]}},
    ):
        assert compile_cache_key(parse_config({"project": PROJECT, **same})) == base, same


def test_second_boot_with_running_container_starts_nothing(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg)
    first = node.run()
    assert first.returncode == 0
    second = node.run()
    assert second.returncode == 0, second.stderr
    assert len(node.docker("run")) == 1
    assert len(node.docker("pull")) == 1
    assert "already running" in second.stderr
    assert node.phases()[-2:] == ["starting-vllm", "ready"]
    node.assert_no_secret_leaked(first, second)


def test_stopped_container_from_an_earlier_boot_is_replaced(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg)
    (node.stub_dir / "state.json").write_text(json.dumps({"container": "exited"}))
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    calls = node.calls("docker")
    rm = index_of(calls, lambda c: c["argv"][:2] == ["rm", "--force"])
    run = index_of(calls, lambda c: c["argv"][0] == "run")
    assert rm < run
    assert len(node.docker("run")) == 1


def test_missing_secret_fails_with_the_make_secret_hint(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg, secrets={cfg.api_key_secret_id: API_KEY})
    boot = node.run()
    assert boot.returncode != 0
    assert node.phases()[-1] == "failed"
    (reason,) = node.reasons()
    assert cfg.hf_token_secret_id in reason and "make secret" in reason
    assert not node.docker("run") and not node.docker("pull")
    node.assert_no_secret_leaked(boot)


def test_missing_api_key_points_at_make_api_key(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg, secrets={cfg.hf_token_secret_id: HF_TOKEN})
    boot = node.run()
    assert boot.returncode != 0
    assert "make api-key" in node.reasons()[-1]
    node.assert_no_secret_leaked(boot)


def test_image_pull_is_retried_then_succeeds(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg, pull_failures=2)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    assert len(node.docker("pull")) == 3
    assert [c["argv"] for c in node.calls("sleep")][:2] == [["1"], ["2"]]


def test_image_pull_gives_up_with_a_reason(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg, pull_failures=9)
    assert node.run().returncode != 0
    assert node.phases()[-1] == "failed"
    assert "docker pull" in node.reasons()[-1]


@pytest.mark.parametrize(
    ("health", "container", "reason"),
    [
        (["000", 503], "running", "engine died"),
        (["000"], "running", "within 100s"),
        (["000"], "exited", "exited before vLLM was ready"),
    ],
)
def test_readiness_failures_are_reported(tmp_path: Path, cfg, health, container, reason) -> None:
    node = Node(tmp_path, cfg, health=health, container_after_run=container)
    boot = node.run()
    assert boot.returncode != 0
    assert node.phases()[-1] == "failed"
    assert reason in node.reasons()[-1] and "docker logs" in node.reasons()[-1]
    # A boot that never got ready stores nothing: the cache may be half-written.
    assert not node.cache_object.exists()
    shutdown = node.run("shutdown.sh")
    assert shutdown.returncode == 0 and not node.cache_object.exists()


def test_shutdown_saves_what_the_startup_save_missed(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg)
    assert node.run().returncode == 0
    first = node.cache_object.read_bytes()
    # vLLM compiled another program at runtime (a new shape) after the startup save.
    (node.home / ".cache/vllm/xla_cache/jit_late-cache").write_bytes(b"y" * 32)
    shutdown = node.run("shutdown.sh")
    assert shutdown.returncode == 0, shutdown.stderr
    assert node.cache_object.read_bytes() != first
    with tarfile.open(node.cache_object) as tar:
        assert "./xla_cache/jit_late-cache" in tar.getnames()
    put = [c for c in node.calls("curl") if "--upload-file" in c["argv"]][-1]
    assert put["argv"][put["argv"].index("--max-time") + 1] == "25"
    node.assert_no_secret_leaked(shutdown)


def test_shutdown_is_best_effort_when_storage_fails(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg)
    assert node.run().returncode == 0
    (node.home / ".cache/vllm/xla_cache/jit_late-cache").write_bytes(b"y")
    node.config["storage_status"] = 503
    shutdown = node.run("shutdown.sh")
    assert shutdown.returncode == 0
    assert "failed" in shutdown.stderr


def test_gcloud_is_never_needed(tmp_path: Path, cfg) -> None:
    node = Node(tmp_path, cfg)
    assert node.run().returncode == 0
    assert node.run("shutdown.sh").returncode == 0
    assert node.calls("gcloud") == []


def test_metadata_enables_guest_attributes_and_the_shutdown_script(cfg) -> None:
    md = node_metadata(cfg)
    assert md["enable-guest-attributes"] == "TRUE"
    assert md["shutdown-script"] == render_shutdown_script(cfg)
    for script in (md["startup-script"], md["shutdown-script"]):
        assert cfg.hf_token_secret_id in md["startup-script"]
        for secret in SECRETS:
            assert secret not in script


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash")
def test_shellcheck_passes_on_both_scripts(tmp_path: Path, cfg) -> None:
    shellcheck = Path(sys.executable).with_name("shellcheck")
    for name, text in (
        ("startup.sh", render_startup_script(cfg)),
        ("shutdown.sh", render_shutdown_script(cfg)),
    ):
        path = tmp_path / name
        path.write_text(text)
        proc = subprocess.run(
            [str(shellcheck), "--severity=style", str(path)], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout
