"""The rendered boot scripts run under bash with stand-in docker/curl/gcloud/sleep (tests/stubs)."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.boot_sandbox import (
    ACCESS_TOKEN,
    API_KEY,
    HF_TOKEN,
    PROJECT,
    SECRETS,
    TLS,
    Boot,
    Node,
    filesystem_type,
    key_map_entries,
    proxy_key_line,
    sha,
)
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.node import keymap
from tpudeploy.render import (
    node_metadata,
    render_shutdown_script,
    render_startup_script,
    vllm_serve_args,
)

HF_TOKEN_IN_CONTAINER = "/run/tpudeploy-secrets/hf_token"  # noqa: S105 - a path


@pytest.fixture(scope="module")
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT})


@pytest.fixture(scope="module")
def default_boot(tmp_path_factory: pytest.TempPathFactory, cfg: DeployConfig) -> tuple[Node, Boot]:
    """One default cold boot shared by the tests that only read what it left (a boot is ~1.4 s
    of CPU: issue 23's make test budget)."""
    node = Node(tmp_path_factory.mktemp("default-boot"), cfg)
    return node, node.run()


def index_of(calls: list[dict[str, Any]], pred: Any) -> int:
    for i, c in enumerate(calls):
        if pred(c):
            return i
    raise AssertionError("no such call")


def members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return sorted(tar.getnames())


PHASES = ["reading-secrets", "pulling-image", "restoring-cache", "starting-vllm"]
COMPILED = [".", "./xla_cache", "./xla_cache/jit_decode-cache", "./xla_cache/jit_prefill-cache"]


# --- the seed's command, behind the front door -------------------------------------------------


def test_cold_boot_runs_the_seed_command_and_saves_the_cache(
    default_boot: tuple[Node, Boot], cfg: DeployConfig
) -> None:
    node, boot = default_boot
    assert boot.returncode == 0, boot.stderr

    run = next(c for c in node.docker("run") if c["run"]["name"] == cfg.vllm.container_name)
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
    # vLLM is reachable from the node only, and runs without a key: the proxy checks it.
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert "--api-key" not in argv and not any("VLLM_API_KEY" in a for a in argv)

    assert node.phases() == [*PHASES, "starting-proxy", "ready"]
    # Cold: no archive yet; what vLLM compiled is saved, keyed by the pulled image's digest.
    assert members(node.cache_object()) == COMPILED
    node.assert_no_secret_leaked(boot)


def test_no_secret_in_any_docker_argument_or_environment(
    default_boot: tuple[Node, Boot], cfg: DeployConfig
) -> None:
    """Issue 13, defect 3: `HF_TOKEN=... docker run -e HF_TOKEN` handed the value to the daemon,
    which keeps it in the container's config.v2.json and shows it in `docker inspect`."""
    node, boot = default_boot
    assert boot.returncode == 0, boot.stderr
    hashes = {sha(s) for s in SECRETS}
    docker_calls = node.calls("docker")
    assert docker_calls
    for call in docker_calls:
        assert not any(s in " ".join(call["argv"]) for s in SECRETS), call["argv"]
        assert not hashes & set(call["env_sha256"].values()), call["argv"][:2]
    vllm = node.docker_runs()[cfg.vllm.container_name]
    # The token is a read-only file on the tmpfs, named by HF_TOKEN_PATH; no value in -e.
    assert vllm["env"]["HF_TOKEN_PATH"] == HF_TOKEN_IN_CONTAINER
    assert vllm["file_sha256"] == {HF_TOKEN_IN_CONTAINER: sha(HF_TOKEN)}
    mount = next(src for src, dst in vllm["mounts"] if dst == HF_TOKEN_IN_CONTAINER)
    assert Path(mount).is_relative_to(node.run_dir)
    assert f"{mount}:{HF_TOKEN_IN_CONTAINER}:ro" in node.docker("run")[0]["argv"]
    assert not {"HF_TOKEN", "VLLM_API_KEY", "HUGGING_FACE_HUB_TOKEN"} & set(vllm["env"])
    proxy = node.docker_runs()[cfg.proxy.container_name]
    assert proxy["env"] == {} and proxy["file_sha256"] == {}
    node.assert_no_secret_leaked(boot)


def test_the_api_key_reaches_the_proxy_as_a_digest_only(
    default_boot: tuple[Node, Boot], cfg: DeployConfig
) -> None:
    node, boot = default_boot
    assert boot.returncode == 0
    assert key_map_entries((node.proxy_dir / "api_keys.conf").read_text()) == [
        proxy_key_line(API_KEY)
    ]
    # The key map's own line (the format nginx's map reads), not another spelling of it.
    assert proxy_key_line(API_KEY) in keymap.render({"default": API_KEY}, datetime.now(UTC))
    ((src, dst),) = node.docker_runs()[cfg.proxy.container_name]["mounts"]
    assert (Path(src), dst) == (node.proxy_dir, "/etc/tpudeploy-proxy")


def test_runtime_dir_on_a_disk_fails_before_any_secret_is_read(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg)
    # Whatever tmp_path is on, declare only another type to be memory.
    node.env["TPUDEPLOY_MEMORY_FILESYSTEMS"] = (
        "ramfs" if filesystem_type(tmp_path) == "tmpfs" else "tmpfs ramfs"
    )
    boot = node.run()
    assert boot.returncode != 0
    assert "not a tmpfs" in node.reasons()[-1]
    assert not [c for c in node.calls("curl") if "secretmanager" in (c.get("url") or "")]
    assert not node.docker("run")


@pytest.mark.parametrize(
    ("which", "value", "hint"),
    [
        ("api_key", "", "is empty"),
        ("api_key", "\n", "is empty"),
        ("api_key", "short-key", "is not an API key"),
        ("api_key", API_KEY + " x", "is not an API key"),
        ("hf_token", "", "is empty"),
        ("hf_token", HF_TOKEN + " ", "is not a Hugging Face token"),
        ("hf_token", "not-a-token-at-all-but-long-enough-0123456789", "is not a Hugging Face"),
    ],
)
def test_empty_or_malformed_secret_fails_the_boot(
    tmp_path: Path, cfg: DeployConfig, which: str, value: str, hint: str
) -> None:
    """Issue 13, defect 4: an API-key version holding "" or "\n" started vLLM with no key."""
    secret_id = cfg.api_key_secret_id if which == "api_key" else cfg.hf_token_secret_id
    secrets = {
        cfg.hf_token_secret_id: HF_TOKEN,
        cfg.api_key_secret_id: API_KEY,
        cfg.tls_secret_id: TLS.text,
        secret_id: value,
    }
    node = Node(tmp_path, cfg, secrets=secrets)
    boot = node.run()
    assert boot.returncode != 0
    assert node.phases()[-1] == "failed"
    reason = node.reasons()[-1]
    assert secret_id in reason and hint in reason
    assert ("make api-key" if which == "api_key" else "make secret") in reason
    if value.strip():
        assert value.strip() not in reason and value.strip() not in boot.stderr
    assert not node.docker("run") and not node.docker("pull")
    node.assert_no_secret_leaked(boot)


def test_a_trailing_newline_is_dropped_like_a_shell_would(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    """`echo KEY | gcloud secrets versions add` stores a newline no header can carry."""
    secrets = {
        cfg.hf_token_secret_id: HF_TOKEN + "\n",
        cfg.api_key_secret_id: API_KEY + "\n",
        cfg.tls_secret_id: TLS.text + "\n",
    }
    node = Node(tmp_path, cfg, secrets=secrets)
    assert node.run().returncode == 0
    assert key_map_entries((node.proxy_dir / "api_keys.conf").read_text()) == [
        proxy_key_line(API_KEY)
    ]
    assert node.docker_runs()[cfg.vllm.container_name]["file_sha256"] == {
        HF_TOKEN_IN_CONTAINER: sha(HF_TOKEN)
    }


def test_a_proxy_that_lets_requests_through_without_the_key_fails_the_boot(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg, proxy_without_key=200)
    boot = node.run()
    assert boot.returncode != 0
    assert node.phases()[-1] == "failed" and "ready" not in node.phases()
    assert "not 401" in node.reasons()[-1]


# --- the compile cache ------------------------------------------------------------------------


def test_warm_boot_restores_before_docker_run_and_uploads_nothing(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg, compiles=["jit_decode-cache"])
    node.seed_bucket({"xla_cache/jit_decode-cache": b"x" * 64})
    before = node.cache_object().read_bytes()
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    assert (node.cache_dir / "xla_cache/jit_decode-cache").read_bytes() == b"x" * 64

    calls = node.calls()
    url = node.cache_object().relative_to(node.stub_dir / "gcs").as_posix()
    get = index_of(calls, lambda c: c["cmd"] == "curl" and (c.get("url") or "").endswith(url))
    run = index_of(calls, lambda c: c["cmd"] == "docker" and c["argv"][0] == "run")
    assert get < run
    assert node.cache_object().read_bytes() == before
    assert not [c for c in node.calls("curl") if "--upload-file" in c["argv"]]
    node.assert_no_secret_leaked(boot)


def test_the_archive_is_packed_before_the_front_door_opens(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    """Issue 13, defect 5: the archive was packed after ready from a directory the container
    (serving requests) can write. Here the proxy's start stands for the first request: a
    program compiled after it must not be in the archive."""
    node = Node(tmp_path, cfg, compile_on_proxy_start="jit_after-traffic")
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    calls = node.calls()
    vllm_ready = index_of(
        calls,
        lambda c: c["cmd"] == "curl" and c.get("status") == 200 and c["url"].endswith("/health"),
    )
    proxy_run = index_of(
        calls,
        lambda c: c["cmd"] == "docker" and (c.get("run") or {}).get("name") == "tpudeploy-proxy",
    )
    put = index_of(calls, lambda c: c["cmd"] == "curl" and "--upload-file" in c["argv"])
    assert vllm_ready < proxy_run < put
    # The stand-in proxy compiled a program into the cache as it started (a first request):
    # it is on the node's disk but not in the archive, which was packed before.
    assert (node.cache_dir / "xla_cache/jit_after-traffic").exists()
    assert members(node.cache_object()) == COMPILED


def test_packing_keeps_regular_files_only(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg, compile_symlink=True)
    assert node.run().returncode == 0
    assert members(node.cache_object()) == COMPILED
    with tarfile.open(node.cache_object()) as tar:
        assert all(m.isreg() or m.isdir() for m in tar.getmembers())
        assert all(m.uid == 0 and not m.mode & 0o6000 for m in tar.getmembers())


def _hostile(kind: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        good = tarfile.TarInfo("./xla_cache/jit_decode-cache")
        good.size, good.mode = 3, 0o644
        tar.addfile(good, io.BytesIO(b"abc"))
        bad = tarfile.TarInfo("./xla_cache/evil")
        if kind == "symlink":
            bad.type, bad.linkname = tarfile.SYMTYPE, "/etc/shadow"
        elif kind == "setuid":
            bad.size, bad.mode = 3, 0o4755
        elif kind == "dotdot":
            bad.name, bad.size = "./xla_cache/../../../evil", 3
        tar.addfile(bad, io.BytesIO(b"bad") if bad.size else None)
    return buf.getvalue()


# The three, and a damaged archive; tests/render/test_cacheguard.py covers every member
# type.
@pytest.mark.parametrize("kind", ["symlink", "setuid", "dotdot", "damaged"])
def test_a_hostile_or_damaged_archive_boots_cold_with_nothing_extracted(
    tmp_path: Path, cfg: DeployConfig, kind: str
) -> None:
    """Issue 13, defect 5: links to host paths and setuid files were restored as root."""
    node = Node(tmp_path, cfg)
    obj = node.seed_bucket({})
    obj.write_bytes(b"\x1f\x8bnot really gzip" if kind == "damaged" else _hostile(kind))
    before = obj.read_bytes()
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    assert node.phases()[-1] == "ready"
    assert "booting cold" in boot.stderr
    # Nothing of the archive was extracted, not even its good member: the cache holds exactly
    # what this boot's vLLM compiled.
    files = sorted(p.relative_to(node.cache_dir).as_posix() for p in node.cache_dir.rglob("*"))
    assert files == ["xla_cache", "xla_cache/jit_decode-cache", "xla_cache/jit_prefill-cache"]
    assert (node.cache_dir / "xla_cache/jit_decode-cache").read_bytes() == b"x" * 64
    assert not (tmp_path / "evil").exists() and not (node.home / "evil").exists()
    # The node cannot replace the object (create-only): it is left for an operator to delete.
    assert obj.read_bytes() == before
    assert "delete the object" in boot.stderr


def test_the_cache_is_keyed_by_the_pulled_image_digest(tmp_path: Path, cfg: DeployConfig) -> None:
    """Issue 13, defect 5: the key hashed the tag (:nightly), so builds shared archives."""
    first = Node(tmp_path / "a", cfg, digests={cfg.vllm.image: "a" * 64})
    assert first.run().returncode == 0
    assert members(first.cache_object("a" * 64)) == COMPILED
    second = Node(tmp_path / "b", cfg, digests={cfg.vllm.image: "b" * 64})
    second.seed_bucket({"xla_cache/jit_decode-cache": b"z" * 8}, digest="a" * 64)
    assert second.run().returncode == 0
    # A new build of :nightly does not load the old build's programs: cold, saved separately.
    assert (second.cache_dir / "xla_cache/jit_decode-cache").read_bytes() == b"x" * 64
    assert second.cache_object("b" * 64).exists()
    # Pinning by digest keys by that digest without asking docker.
    pinned = parse_config(
        {"project": PROJECT, "vllm": {"image": "vllm/vllm-tpu@sha256:" + "c" * 64}}
    )
    third = Node(tmp_path / "c", pinned)
    assert third.run().returncode == 0
    assert third.cache_object("c" * 64).exists()


def test_uploads_are_create_only(tmp_path: Path, cfg: DeployConfig) -> None:
    """Issue 13, defect 5: with objectAdmin the node replaced archives after every boot."""
    first = Node(tmp_path / "first", cfg)
    assert first.run().returncode == 0
    saved = first.cache_object().read_bytes()
    puts = [c for c in first.calls("curl") if "--upload-file" in c["argv"]]
    assert len(puts) == 1 and "x-goog-if-generation-match: 0" in puts[0]["argv"]
    # A second node of the same image and config could not read the archive (so it packs its
    # own and tries to save it): the precondition refuses the replacement, and it says so.
    second = Node(tmp_path / "second", cfg, storage_get_status=503, compiles=["jit_other"])
    shutil.copytree(first.stub_dir / "gcs", second.stub_dir / "gcs")
    boot = second.run()
    assert boot.returncode == 0, boot.stderr
    assert "already exists" in boot.stderr
    assert second.cache_object().read_bytes() == saved
    (put,) = [c for c in second.calls("curl") if "--upload-file" in c["argv"]]
    assert put["status"] == 412


# --- idempotency and failures ------------------------------------------------------------------


def test_second_boot_with_running_container_starts_no_second_vllm(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg)
    first = node.run()
    assert first.returncode == 0
    second = node.run()
    assert second.returncode == 0, second.stderr
    runs = [c["run"]["name"] for c in node.docker("run")]
    assert runs.count(cfg.vllm.container_name) == 1
    assert node.pulls(cfg.vllm.image) == 1
    # The proxy restarts with the current key version and certificate.
    assert runs.count(cfg.proxy.container_name) == 2
    assert "already running" in second.stderr
    assert node.phases()[-3:] == ["starting-vllm", "starting-proxy", "ready"]
    node.assert_no_secret_leaked(first, second)


def test_stopped_container_from_an_earlier_boot_is_replaced(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg)
    state = {"containers": {cfg.vllm.container_name: "exited"}}
    (node.stub_dir / "state.json").write_text(json.dumps(state))
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    calls = node.calls("docker")
    rm = index_of(calls, lambda c: c["argv"] == ["rm", "--force", cfg.vllm.container_name])
    run = index_of(calls, lambda c: c["argv"][0] == "run")
    assert rm < run
    assert [c["run"]["name"] for c in node.docker("run")].count(cfg.vllm.container_name) == 1


def test_missing_secret_fails_with_the_make_secret_hint(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg, secrets={cfg.api_key_secret_id: API_KEY})
    boot = node.run()
    assert boot.returncode != 0
    assert node.phases()[-1] == "failed"
    (reason,) = node.reasons()
    assert cfg.hf_token_secret_id in reason and "make secret" in reason
    assert not node.docker("run") and not node.docker("pull")
    node.assert_no_secret_leaked(boot)


def test_missing_api_key_points_at_make_api_key(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg, secrets={cfg.hf_token_secret_id: HF_TOKEN})
    boot = node.run()
    assert boot.returncode != 0
    assert "make api-key" in node.reasons()[-1]
    node.assert_no_secret_leaked(boot)


def test_image_pull_is_retried_then_succeeds(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg, pull_failures=2)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    assert node.pulls(cfg.vllm.image) == 3
    assert [c["argv"] for c in node.calls("sleep")][:2] == [["1"], ["2"]]


def test_image_pull_gives_up_with_a_reason(tmp_path: Path, cfg: DeployConfig) -> None:
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
def test_readiness_failures_are_reported(
    tmp_path: Path, cfg: DeployConfig, health: list[Any], container: str, reason: str
) -> None:
    node = Node(tmp_path, cfg, health=health, container_after_run=container)
    boot = node.run()
    assert boot.returncode != 0
    assert node.phases()[-1] == "failed"
    assert reason in node.reasons()[-1] and "docker logs" in node.reasons()[-1]
    # A boot that never got ready stores nothing, and never opens the front door.
    assert not node.cache_object().exists()
    assert cfg.proxy.container_name not in node.docker_runs()
    shutdown = node.run("shutdown.sh")
    assert shutdown.returncode == 0 and not node.cache_object().exists()


# --- the shutdown script -----------------------------------------------------------------------


def test_shutdown_uploads_what_the_startup_upload_missed(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg, storage_put_status=503)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    assert not node.cache_object().exists() and "failed (HTTP 503)" in boot.stderr
    # Traffic after the front door opened compiled another program: it is not saved.
    (node.cache_dir / "xla_cache/jit_late-cache").write_bytes(b"y" * 32)
    node.config["storage_put_status"] = None
    shutdown = node.run("shutdown.sh")
    assert shutdown.returncode == 0, shutdown.stderr
    assert members(node.cache_object()) == COMPILED
    put = [c for c in node.calls("curl") if "--upload-file" in c["argv"]][-1]
    # The upload ends inside the ~30 s preemption notice (budget 25 s, minus the token request).
    assert int(put["argv"][put["argv"].index("--max-time") + 1]) <= 21
    assert "x-goog-if-generation-match: 0" in put["argv"]
    node.assert_no_secret_leaked(shutdown)


def test_shutdown_packs_nothing_and_skips_when_out_of_time(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    """Issue 13, defect 8: the shutdown save bounded the upload but not the packing."""
    node = Node(tmp_path, cfg, storage_put_status=503)
    assert node.run().returncode == 0
    node.config["storage_put_status"] = None
    shutdown = node.run("shutdown.sh", TPUDEPLOY_SHUTDOWN_BUDGET="4")
    assert shutdown.returncode == 0
    assert "compile cache not uploaded" in shutdown.stderr
    assert not node.cache_object().exists()
    # Nothing pending (a boot that uploaded, or never packed): nothing to do, said so.
    fresh = Node(tmp_path / "fresh", cfg)
    assert fresh.run().returncode == 0
    quiet = fresh.run("shutdown.sh")
    assert quiet.returncode == 0 and "nothing to save" in quiet.stderr
    assert "tar " not in render_shutdown_script(cfg)


def test_shutdown_is_best_effort_when_storage_fails(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg, storage_put_status=503)
    assert node.run().returncode == 0
    shutdown = node.run("shutdown.sh")
    assert shutdown.returncode == 0
    assert "failed" in shutdown.stderr


# --- every request has a time limit ------------------------------------------------------------


def test_every_request_has_a_time_limit(tmp_path: Path, cfg: DeployConfig) -> None:
    """Issue 13, defect 8: metadata, Secret Manager and cache requests had no time limits."""
    node = Node(tmp_path, cfg, storage_put_status=503)
    assert node.run().returncode == 0
    assert node.run("shutdown.sh").returncode == 0
    curls = node.calls("curl")
    hosts = {c["url"].split("/")[2] for c in curls}
    expected = {"metadata.test", "secretmanager.test", "storage.test", "127.0.0.1:8000"}
    assert expected | {"127.0.0.1:8443"} <= hosts
    methods = {("--upload-file" in c["argv"], c["url"].split("/")[2]) for c in curls}
    assert (True, "storage.test") in methods and (False, "storage.test") in methods
    for call in curls:
        assert "--max-time" in call["argv"], call["url"]
    pulls = re.findall(r"^.*retry.*docker pull.*$", render_startup_script(cfg), re.MULTILINE)
    assert len(pulls) == 2 and all('timeout "$PULL_TIMEOUT"' in line for line in pulls)


def test_gcloud_is_never_needed(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg)
    assert node.run().returncode == 0
    assert node.run("shutdown.sh").returncode == 0
    assert node.calls("gcloud") == []


def test_metadata_enables_guest_attributes_and_the_shutdown_script(cfg: DeployConfig) -> None:
    md = node_metadata(cfg)
    assert md["enable-guest-attributes"] == "TRUE"
    assert md["shutdown-script"] == render_shutdown_script(cfg)
    assert cfg.hf_token_secret_id in md["startup-script"]
    for script in (md["startup-script"], md["shutdown-script"]):
        for secret in SECRETS:
            assert secret not in script
    assert ACCESS_TOKEN not in json.dumps(md)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash")
def test_shellcheck_passes_on_both_scripts(tmp_path: Path, cfg: DeployConfig) -> None:
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
