"""`make boot-record` (make tune's step): the node's boot check, read through a loopback TPU API,
written as the node published it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests import boot_logs
from tests.fake_boot_apis import FakeTpu
from tpudeploy import bootcheck
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.nodebuild import CHECK_KEY, boot_expectations
from tpudeploy.render import vllm_serve_args
from tpudeploy.tpuvm.bootrecord import record
from tpudeploy.tpuvm.queued_resource import TpuApi

TIMINGS = {"pull_s": 41, "vllm_s": boot_logs.COLD_BOOT_S, "cache": "miss"}


def test_the_nodes_boot_check_is_recorded_as_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = parse_config({"project": "test-proj"})
    expected = boot_expectations(DeployConfig(), vllm_serve_args(cfg.vllm))
    published = bootcheck.report(boot_logs.vllm_log(), expected, dict(TIMINGS))
    out = tmp_path / "round-1.boot.json"
    with FakeTpu([("ready", "")], attributes={CHECK_KEY: json.dumps(published)}) as fake:
        monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
        assert record(cfg, "test-proj", out, api=TpuApi(log=io.StringIO())) == 0
    kept = json.loads(out.read_text())
    assert kept["measured"]["compile_s"] == boot_logs.COMPILE_S
    assert kept["timings"]["vllm_s"] == boot_logs.COLD_BOOT_S
    assert kept["measured"]["kv_cache_groups"] == 1


def test_no_boot_check_yet_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_config({"project": "test-proj"})
    out = tmp_path / "round-1.boot.json"
    with FakeTpu([("starting-vllm", "")]) as fake:
        monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
        assert record(cfg, "test-proj", out, api=TpuApi(log=io.StringIO())) == 1
    assert not out.exists()
