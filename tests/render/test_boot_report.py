"""The node reports its build and checks its own boot log (templates/startup.sh.j2, "build report
and boot check"), run under bash with the stand-in docker emitting the build log's own lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import boot_logs
from tests.boot_sandbox import DEFAULT_DIGEST, PROJECT, Node
from tpudeploy import facts, planner
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.nodebuild import REPO_DIGEST, parse_build
from tpudeploy.render import pinned_cache_object


@pytest.fixture(scope="module")
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT})


def published(node: Node, key: str) -> dict[str, object]:
    value = node.attribute(key)
    assert value is not None, f"tpudeploy/{key} was never published"
    return json.loads(value)  # type: ignore[no-any-return]


def test_the_node_publishes_its_build_and_the_build_logs_verdict_before_ready(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    keys = [k for k, _ in node.guest_attributes()]
    # Published before ready: `make pin` refuses a node that is not ready, so a ready node has it.
    assert keys.index("tpudeploy/build") < len(keys) - 1 - keys[::-1].index("tpudeploy/phase")
    build = parse_build(node.attribute("build") or "")
    vllm, proxy = build["vllm"], build["proxy"]
    assert vllm.image == cfg.vllm.image
    assert vllm.digest == f"vllm/vllm-tpu@sha256:{DEFAULT_DIGEST}"
    assert REPO_DIGEST.fullmatch(vllm.digest) and REPO_DIGEST.fullmatch(proxy.digest)
    assert vllm.versions == boot_logs.IMAGE_VERSIONS
    assert proxy.image == cfg.proxy.image and proxy.versions == {"nginx": facts.PROXY_NGINX_VERSION}
    # Never the image ID (the config blob) that `docker images` shows.
    inspected = [c for c in node.docker("image") if "--format" in c["argv"]]
    assert inspected and all(
        c["argv"][c["argv"].index("--format") + 1] == "{{index .RepoDigests 0}}" for c in inspected
    )
    # The same in the boot's log, for the journal.
    assert f"build: {node.attribute('build')}" in boot.stderr
    node.assert_no_secret_leaked(boot)

    # The same boot's verdict: the build log's boot against the planner.
    check = published(node, "boot-check")
    assert check["verdict"] == "matches the planner and the build log", check["findings"]
    measured = check["measured"]
    assert isinstance(measured, dict)
    assert measured["kv_tokens"] == facts.KV_POOL_TOKENS  # 5,021 x 64, measured
    assert (measured["hbm_limit_cap_gib"], measured["hbm_used_gib"]) == (14.49, 8.97)
    texts = {f["check"]: f["text"] for f in check["findings"] if f["level"] == "ok"}  # type: ignore[attr-defined]
    pool = planner.kv_pool()
    assert f"= {facts.KV_POOL_TOKENS:,} tokens, planner {pool.tokens:,}" in texts["kv-pool"]
    assert f"planner {pool.cap_bytes / planner.GIB:.2f}" in texts["cap"]
    assert "num_kv_cache_groups=1" in texts["kv-groups"]
    # Cold (no archive in the bucket): held to the build log's 857 s cold boot.
    assert "cold boot" in texts["boot"] and f"build log {facts.COLD_BOOT_S:.0f} s" in texts["boot"]
    timings = check["timings"]
    assert isinstance(timings, dict) and timings["cache"] == "miss"
    assert {"pull_s", "restore_s", "vllm_s"} <= set(timings)
    assert "boot check ok: KV pool 5,021 blocks x 64" in boot.stderr


def test_a_different_boot_publishes_its_warning_and_win(tmp_path: Path, cfg: DeployConfig) -> None:
    log = boot_logs.vllm_log(blocks=4500, groups=2)
    node = Node(tmp_path, cfg, logs={cfg.vllm.container_name: log})
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    check = published(node, "boot-check")
    alerts = {f["check"]: f["level"] for f in check["findings"] if f["level"] != "ok"}  # type: ignore[attr-defined]
    assert alerts["kv-pool"] == "warning" and alerts["kv-groups"] == "win"
    assert check["verdict"] == "1 warning(s), 1 open win(s) reached"
    assert "boot check warning: KV pool 4,500 blocks" in boot.stderr


def test_an_image_without_python_or_a_registry_digest_still_boots(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg, exec={}, local_images=[cfg.vllm.image])
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    assert node.phases()[-1] == "ready"
    vllm = parse_build(node.attribute("build") or "")["vllm"]
    # No digest to pin; the version from vLLM's own log line.
    assert vllm.digest == "" and vllm.versions == {"vllm": boot_logs.VERSION}


def test_a_second_boot_reports_no_boot_time(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg)
    assert node.run().returncode == 0
    assert node.run().returncode == 0
    boot = [f for f in published(node, "boot-check")["findings"] if f["check"] == "boot"]  # type: ignore[attr-defined]
    assert boot[0]["level"] == "note" and "already running" in boot[0]["text"]


def test_a_pinned_boot_writes_the_cache_object_named_before_it(tmp_path: Path) -> None:
    """The grant on the cache bucket can name the exact object once the image is pinned."""
    pinned = "vllm/vllm-tpu@sha256:" + "e" * 64
    cfg = parse_config({"project": PROJECT, "vllm": {"image": pinned}})
    node = Node(tmp_path, cfg)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    bucket = node.stub_dir / "gcs" / cfg.compile_cache_bucket(PROJECT)
    written = [p.relative_to(bucket).as_posix() for p in bucket.rglob("*.tar.gz")]
    assert written == [pinned_cache_object(cfg)]
    assert parse_build(node.attribute("build") or "")["vllm"].digest == pinned
