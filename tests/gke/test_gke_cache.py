"""The GKE pod's compile cache for real: the rendered templates/pod_cache.sh.j2 run under bash
with the repo's stand-in curl (tests/stubs: the GKE metadata server's token and a create-only
fake bucket) in front of the real python3 (tpudeploy/cacheguard.py, the TPU VM's sanitizer),
tar and coreutils. The create grant's IAM condition is read by the storage fake's own evaluator
(tools/rehearsal/fakes/storage.py).

    pod = Pod(tmp_path, CFG)
    pod.run("restore"); pod.run("save")
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.boot_sandbox import ACCESS_TOKEN, PROJECT, STUBS, Boot, filesystem_type, stand_in_port
from tests.conftest import REPO_ROOT
from tests.hostile_archives import HOSTILE
from tools.rehearsal.fakes.storage import OBJECT_TYPE, condition_holds
from tpudeploy import render
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import cache, pod

RAW = tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))
DIGEST = "a" * 64
PINNED = parse_config(
    {**RAW, "project": PROJECT, "vllm": {"image": f"vllm/vllm-tpu@sha256:{DIGEST}"}}
)
TAGGED = parse_config({**RAW, "project": PROJECT})
COMPILED = {"xla_cache/jit_decode-cache": b"d" * 64, "xla_cache/jit_prefill-cache": b"p" * 64}


def archive(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Pod:
    """One replica's cache steps: the pod's volumes as directories under `root`."""

    def __init__(self, root: Path, cfg: DeployConfig, **config: object) -> None:
        self.root, self.cfg = root, cfg
        self.cache_dir, self.scratch = root / "xla-cache", root / "scratch"
        self.run_dir, self.gate = root / "run" / "tpudeploy", root / "gate" / "open"
        self.stub_dir, self.bin = root / "stub", root / "bin"
        for d in (self.stub_dir, self.bin, self.run_dir.parent, self.gate.parent):
            d.mkdir(parents=True, exist_ok=True)
        (self.bin / "python3").symlink_to(os.path.realpath(sys.executable))
        text = cache.render_cache_script(cfg)
        for inside, outside in (
            (cache.GATE_FILE, self.gate),
            (cache.SCRATCH_DIR, self.scratch),
            (pod.CACHE_DIR, self.cache_dir),
        ):
            assert inside in text
            text = text.replace(inside, str(outside))
        self.script = root / cache.SCRIPT
        self.script.write_text(text)
        self.config: dict[str, object] = {"access_token": ACCESS_TOKEN, "project": PROJECT}
        self.config.update(config)

    @property
    def object(self) -> Path:
        bucket = self.cfg.compile_cache_bucket(PROJECT)
        return (
            self.stub_dir
            / "gcs"
            / bucket
            / "xla"
            / render.compile_cache_key(self.cfg)
            / (f"{DIGEST}.tar.gz")
        )

    def seed(self, data: bytes) -> None:
        self.object.parent.mkdir(parents=True, exist_ok=True)
        self.object.write_bytes(data)

    def run(self, step: str, **overrides: str) -> Boot:
        (self.stub_dir / "config.json").write_text(json.dumps(self.config))
        env = {
            "PATH": f"{STUBS}:{self.bin}:{os.environ['PATH']}",
            "STUB_DIR": str(self.stub_dir),
            "STAND_IN_PORT": stand_in_port(),
            "TPUDEPLOY_METADATA_URL": "http://metadata.test/computeMetadata/v1",
            "TPUDEPLOY_STORAGE_URL": "http://storage.test",
            "TPUDEPLOY_RUNTIME_DIR": str(self.run_dir),
            # The sandbox's directories stand in for the pod's memory-backed emptyDir.
            "TPUDEPLOY_MEMORY_FILESYSTEMS": filesystem_type(self.root),
            **overrides,
        }
        done = subprocess.run(
            ["bash", str(self.script), step],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        return Boot(done.returncode, done.stdout, done.stderr)

    def calls(self) -> list[dict[str, Any]]:
        path = self.stub_dir / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def storage_calls(self) -> list[dict[str, Any]]:
        return [c for c in self.calls() if (c.get("url") or "").startswith("http://storage.test")]

    def restored(self) -> dict[str, bytes]:
        return {
            str(p.relative_to(self.cache_dir)): p.read_bytes()
            for p in self.cache_dir.rglob("*")
            if p.is_file()
        }

    def assert_no_token_leaked(self, *boots: Boot) -> None:
        """The access token in no output, argument list, environment or file left behind."""
        for boot in boots:
            assert ACCESS_TOKEN not in boot.stdout + boot.stderr
        token_sha = __import__("hashlib").sha256(ACCESS_TOKEN.encode()).hexdigest()
        for call in self.calls():
            assert ACCESS_TOKEN not in json.dumps(call["argv"]), call["argv"]
            assert token_sha not in call["env_sha256"].values(), call["cmd"]
        for path in self.root.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.parent != self.stub_dir:
                assert ACCESS_TOKEN.encode() not in path.read_bytes(), path
        assert not (self.run_dir / "auth.curl").exists()


def test_the_key_is_the_tpu_vms_for_the_same_vllm_table() -> None:
    """A TPU VM of the same [vllm] restores and saves the very objects the pods do."""
    vm = parse_config({"project": PROJECT, "vllm": {"image": PINNED.vllm.image}})
    assert render.compile_cache_key(PINNED) == render.compile_cache_key(vm)
    other = parse_config({**RAW, "vllm": {"image": PINNED.vllm.image, "max_model_len": 16384}})
    assert render.compile_cache_key(other) != render.compile_cache_key(PINNED)
    script = cache.render_cache_script(PINNED)
    assert f"readonly CACHE_KEY={render.compile_cache_key(vm)}\n" in script
    # the sanitizer is the VM's own source, embedded whole
    assert render.cache_guard_source() in script
    assert render.cache_guard_source() in render.render_startup_script(vm)


def test_a_saved_archive_is_restored_into_the_node_local_cache(tmp_path: Path) -> None:
    p = Pod(tmp_path, PINNED)
    p.seed(archive(COMPILED))
    boot = p.run("restore")
    assert boot.returncode == 0, boot.stderr
    assert p.restored() == COMPILED
    assert (p.run_dir / "cache.restore").read_text().splitlines()[0] == "hit"
    assert not list(p.scratch.iterdir()), "the download is removed after the restore"
    p.assert_no_token_leaked(boot)


def test_a_missing_archive_is_a_cold_start_then_the_save_creates_it(tmp_path: Path) -> None:
    p = Pod(tmp_path, PINNED, health=["000", "000", 200])
    restore = p.run("restore")
    assert restore.returncode == 0, restore.stderr
    assert "compile cache: miss" in restore.stderr and not p.restored()
    assert not p.gate.exists()
    # vLLM compiles into the node-local cache while the front door waits.
    for name, data in COMPILED.items():
        (p.cache_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (p.cache_dir / name).write_bytes(data)
    save = p.run("save")
    assert save.returncode == 0, save.stderr
    assert p.gate.exists(), "the front door opens after the pack"
    (put,) = [c for c in p.storage_calls() if "--upload-file" in c["argv"]]
    assert "x-goog-if-generation-match: 0" in put["argv"] and put["status"] == 200
    # the object is inside the replicas' create grant, by the storage fake's reading of the
    # condition (tools/rehearsal/fakes/storage.py), and outside another configuration's
    bucket = PINNED.compile_cache_bucket(PROJECT)
    name = f"projects/_/buckets/{bucket}/objects/{put['url'].split(bucket + '/', 1)[1]}"
    attributes = {"name": name, "type": OBJECT_TYPE}
    assert condition_holds(render.cache_write_condition(PINNED, bucket)["expression"], attributes)
    other = parse_config({**RAW, "vllm": {"image": PINNED.vllm.image, "max_model_len": 16384}})
    assert not condition_holds(
        render.cache_write_condition(other, bucket)["expression"], attributes
    )
    with tarfile.open(p.object) as tar:
        assert {f"./{n}" for n in COMPILED} <= set(tar.getnames())
    assert not (p.scratch / "pending.tar.gz").exists()
    p.assert_no_token_leaked(restore, save)


def test_a_second_replicas_save_never_overwrites_the_first(tmp_path: Path) -> None:
    """Both replicas missed at once; the first saved. The second's create fails its
    precondition (412): left as it is, and the pod goes on serving."""
    p = Pod(tmp_path, PINNED, health=[200])
    (p.run_dir).mkdir(parents=True)
    first = archive({"xla_cache/first": b"1" * 8})
    (p.run_dir / "cache.restore").write_text(
        f"miss\nxla/{render.compile_cache_key(PINNED)}/{DIGEST}.tar.gz\n"
    )
    (p.cache_dir / "xla_cache").mkdir(parents=True)
    (p.cache_dir / "xla_cache" / "second").write_bytes(b"2" * 8)
    p.seed(first)
    save = p.run("save")
    assert save.returncode == 0, save.stderr
    assert p.object.read_bytes() == first
    assert "already exists" in save.stderr and p.gate.exists()
    (put,) = [c for c in p.storage_calls() if "--upload-file" in c["argv"]]
    assert put["status"] == 412


# Two of issue 22's archives (the endless tarfile loop and a link): the restore is the TPU VM's
# own function (templates/_cache.sh.j2), which tests/render/test_boot_hardening.py runs on every
# one.
@pytest.mark.parametrize("name", ["negative-size", "hard-link"])
def test_a_hostile_archive_is_refused_and_the_replica_starts_cold(
    tmp_path: Path, name: str
) -> None:
    build, _ = HOSTILE[name]
    p = Pod(tmp_path, PINNED, health=[200])
    p.seed(build())
    boot = p.run("restore")
    assert boot.returncode == 0, boot.stderr
    assert (p.run_dir / "cache.restore").read_text().splitlines()[0] == "refused"
    assert not p.restored() and not list(p.cache_dir.iterdir())
    assert "not restored" in boot.stderr
    # refused means the bucket keeps the archive (create-only) and the save adds nothing
    seeded = p.object.read_bytes()
    save = p.run("save")
    assert save.returncode == 0 and p.gate.exists()
    assert p.object.read_bytes() == seeded
    assert not [c for c in p.storage_calls() if "--upload-file" in c["argv"]]


def test_a_tag_means_no_cache_and_no_request(tmp_path: Path) -> None:
    p = Pod(tmp_path, TAGGED, health=[200])
    boot = p.run("restore")
    assert boot.returncode == 0
    assert "is a tag" in boot.stderr and "compile cache: off" in boot.stderr
    assert not p.storage_calls()
    save = p.run("save")
    assert save.returncode == 0 and p.gate.exists()
    assert not p.storage_calls()


def test_no_token_is_written_off_memory(tmp_path: Path) -> None:
    """A runtime directory that is not a memory filesystem: no token request at all."""
    p = Pod(tmp_path, PINNED)
    p.seed(archive(COMPILED))
    fs = filesystem_type(tmp_path)
    boot = p.run("restore", TPUDEPLOY_MEMORY_FILESYSTEMS=f"not-{fs}")
    assert boot.returncode == 0
    assert "not on a memory filesystem" in boot.stderr
    assert not [c for c in p.calls() if "token" in (c.get("url") or "")]
    assert not p.restored()


def test_the_front_door_waits_for_the_gate(tmp_path: Path) -> None:
    """frontdoor_command under sh: nginx (a stand-in that records its argv) starts only once
    the gate file exists, with nginx's own command line unchanged."""
    gate = tmp_path / "open"
    fake = tmp_path / "bin" / "nginx"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/argv\n')
    fake.chmod(0o755)
    argv = [str(gate) if a == cache.GATE_FILE else a for a in cache.frontdoor_command()]
    proc = subprocess.Popen(argv, env={"PATH": f"{fake.parent}:/usr/bin:/bin"})
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.5)
        assert not (tmp_path / "argv").exists()
        gate.touch()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
    assert (tmp_path / "argv").read_text().split() == pod.nginx_command()[1:]


def test_shellcheck_passes_on_the_pod_cache_script(tmp_path: Path) -> None:
    shellcheck = Path(sys.executable).with_name("shellcheck")
    path = tmp_path / cache.SCRIPT
    path.write_text(cache.render_cache_script(PINNED), encoding="utf-8")
    done = subprocess.run(
        [str(shellcheck), "--shell=bash", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_make_check_says_a_tag_keeps_every_replica_cold() -> None:
    from tpudeploy.platform import summary_lines

    (finding,) = cache.cache_findings(TAGGED)
    assert finding.key == "vllm.image" and "compiles cold" in finding.message
    assert str(finding) in summary_lines(TAGGED)
    assert cache.cache_findings(PINNED) == []
    assert not [line for line in summary_lines(PINNED) if "compiles cold" in line]


def _without(tmp_path: Path, *missing: str) -> str:
    """A PATH of every program on this machine but `missing` (symlinks in one directory)."""
    farm = tmp_path / "farm"
    farm.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for program in Path(folder).iterdir():
            link = farm / program.name
            if program.name not in missing and not link.exists():
                link.symlink_to(program)
    return str(farm)


def test_an_image_without_curl_starts_cold_and_opens_the_front_door(tmp_path: Path) -> None:
    p = Pod(tmp_path, PINNED, health=["000"])  # vLLM never ready: the save must not wait on it
    p.seed(archive(COMPILED))
    # the save's last step waits for SIGTERM with sleep: a stand-in that returns, as in tests/stubs
    (p.bin / "sleep").write_text("#!/bin/sh\nexit 0\n")
    (p.bin / "sleep").chmod(0o755)
    path = f"{p.bin}:{_without(tmp_path, 'curl')}"
    restore = p.run("restore", PATH=path)
    assert restore.returncode == 0 and "no curl" in restore.stderr
    assert (p.run_dir / "cache.restore").read_text().splitlines()[0] == "off"
    save = p.run("save", PATH=path)
    assert save.returncode == 0 and p.gate.exists()
    assert not p.calls(), "nothing was asked of the metadata server or the bucket"


@pytest.mark.parametrize("step", ["restore", "save"])
def test_an_image_without_bash_costs_the_cache_never_the_replica(tmp_path: Path, step: str) -> None:
    """The containers' command is sh(1) first: without bash, the restore ends well and the save
    opens the front door (then waits; `sleep` here is a stand-in that returns)."""
    gate = tmp_path / "open"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sleep").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "sleep").chmod(0o755)
    command = cache.restore_command() if step == "restore" else cache.save_command()
    argv = [str(gate) if a == cache.GATE_FILE else a for a in command]
    done = subprocess.run(
        argv, env={"PATH": str(bin_dir)}, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "no bash in the image" in done.stderr
    assert gate.exists() == (step == "save")
