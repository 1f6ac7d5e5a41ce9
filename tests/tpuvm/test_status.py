"""`make status`: one screen with the queued resource, the node, its IP and when billing stops."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fake_scheduler_api import FakeSchedulerApi
from tests.fake_tpu_api import FakeTpuApi
from tpudeploy.cli import main
from tpudeploy.config import parse_config
from tpudeploy.render import compile_cache_key
from tpudeploy.tpuvm.flex import queued_resource_spec

PROJECT = "status-proj-1"
PARENT = f"projects/{PROJECT}/locations/us-west4-a"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTpuApi]:
    with FakeTpuApi() as api:
        monkeypatch.setenv("TPU_EMULATOR_HOST", api.host)
        yield api


def use_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text(text)
    monkeypatch.setenv("DEPLOY_CONFIG", str(path))


def test_flex_start_shows_state_ip_and_end_of_billing(
    fake: FakeTpuApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(monkeypatch, tmp_path, f'project = "{PROJECT}"\n')
    spec = queued_resource_spec(parse_config({"project": PROJECT}), PROJECT)
    fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "ACTIVE" in out
    assert "34.16.0.2" in out  # the node's external IP, from nodes.get
    # The fake reports terminationTime for an ACTIVE queued resource with a run duration.
    assert "billing stops at 2026-08-09T16:00:00Z" in out
    # Before the boot reports: said so, no crash (issue 24).
    assert "build: not reported yet" in out and "boot check: not reported yet" in out


def test_status_prints_the_build_the_node_reports(
    fake: FakeTpuApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    use_config(monkeypatch, tmp_path, f'project = "{PROJECT}"\n')
    spec = queued_resource_spec(parse_config({"project": PROJECT}), PROJECT)
    fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
    assert main(["status"]) == 0  # the node now exists
    capsys.readouterr()
    digest = "vllm/vllm-tpu@sha256:" + "d" * 64
    build = {"vllm": {"image": "vllm/vllm-tpu:nightly", "digest": digest,
                      "versions": {"vllm": "0.26.1rc1.dev125+ga7a204cc6"}}}  # fmt: skip
    slow = {"level": "warning", "check": "boot", "text": "cold boot 1200 s", "meaning": "slow"}
    check = {"verdict": "1 warning(s), 0 open win(s) reached", "findings": [slow]}
    assert fake.set_guest_attribute(spec.node_name, "tpudeploy/build", json.dumps(build))
    assert fake.set_guest_attribute(spec.node_name, "tpudeploy/boot-check", json.dumps(check))
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert f"vllm image vllm/vllm-tpu:nightly\n  digest {digest}\n" in out
    assert "  reports vllm 0.26.1rc1.dev125+ga7a204cc6" in out
    assert "boot check: 1 warning(s)" in out and "  warning: cold boot 1200 s -- slow" in out


def test_flex_start_missing_resource_says_nothing_bills(
    fake: FakeTpuApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(monkeypatch, tmp_path, f'project = "{PROJECT}"\n')
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "NOT_FOUND" in out
    assert "nothing is billing" in out


def _spot_node(fake: FakeTpuApi, state: str = "READY") -> None:
    fake.add_node(
        PARENT,
        "gemma4-v5e",
        {
            "state": state,
            "networkEndpoints": [
                {"ipAddress": "10.0.0.5", "accessConfig": {"externalIp": "34.1.2.3"}}
            ],
        },
    )


@pytest.fixture
def google(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSchedulerApi]:
    with FakeSchedulerApi() as api:
        monkeypatch.setenv("CLOUD_SCHEDULER_EMULATOR_HOST", api.host)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", api.host)
        yield api


def test_spot_with_none_warns_that_nothing_stops_the_billing(
    fake: FakeTpuApi,
    google: FakeSchedulerApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(
        monkeypatch,
        tmp_path,
        f'project = "{PROJECT}"\nprovisioning = "spot"\nmax_run_duration = "none"\n',
    )
    _spot_node(fake)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "READY" in out and "34.1.2.3" in out
    assert "no end time" in out and "make destroy" in out
    assert "0.5779" in out  # the spot rate from the planner's price table
    assert not [r for r in google.requests if "/jobs/" in r[1]]  # no deadline to look up


def test_spot_shows_its_deadline_how_it_is_enforced_and_how_to_extend_it(
    fake: FakeTpuApi,
    google: FakeSchedulerApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(monkeypatch, tmp_path, f'project = "{PROJECT}"\nprovisioning = "spot"\n')
    cfg = parse_config({"project": PROJECT, "provisioning": "spot"})
    _spot_node(fake)
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=5, minutes=30)
    google.set_job(
        f"projects/{PROJECT}/locations/us-west4/jobs/gemma4-v5e-deadline", schedule_time=at
    )
    google.add_bucket(f"{PROJECT}-gemma4-v5e-xla", [f"xla/{compile_cache_key(cfg)}/5555.tar.gz"])
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert f"billing stops: deadline {at.strftime('%Y-%m-%dT%H:%M')}" in out
    assert re.search(r"\(in 5 h (29|30) min\)", out), out
    assert "gemma4-v5e-deadline" in out and "gemma4-v5e-stop" in out
    assert "DELETE https://tpu.googleapis.com/v2/" in out
    assert "make extend BY=2h" in out
    # The compile cache holds this config: a recreated node boots warm (497 s, 3.6 h).
    assert "boots warm (497 s" in out and "3.6 h" in out


def test_spot_without_a_cache_or_a_job_says_so(
    fake: FakeTpuApi,
    google: FakeSchedulerApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(monkeypatch, tmp_path, f'project = "{PROJECT}"\nprovisioning = "spot"\n')
    _spot_node(fake, "PREEMPTED")
    google.add_bucket(f"{PROJECT}-gemma4-v5e-xla", ["xla/0000000000000000/5555.tar.gz"])
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: no deadline job: nothing stops the billing" in out
    assert "make deploy" in out
    assert "boots cold (857 s" in out and "6.2 h" in out  # another config's archive does not count
    assert "PREEMPTED and cannot restart" in out and "make recover" in out


def test_status_needs_a_project(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    use_config(monkeypatch, tmp_path, "")
    assert main(["status"]) == 2
    err = capsys.readouterr().err
    assert "project" in err and "GOOGLE_CLOUD_PROJECT" in err


def test_api_errors_end_cleanly(
    fake: FakeTpuApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(monkeypatch, tmp_path, f'project = "{PROJECT}"\n')
    fake.inject("GET", "queuedResources", 403, "Permission 'tpu.queuedResources.get' denied")
    assert main(["status"]) == 1
    err = capsys.readouterr().err
    assert "Permission 'tpu.queuedResources.get' denied" in err


def test_spot_before_its_first_deploy_says_nothing_bills(
    fake: FakeTpuApi,
    google: FakeSchedulerApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(monkeypatch, tmp_path, f'project = "{PROJECT}"\nprovisioning = "spot"\n')
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "NOT_FOUND" in out and "nothing is billing" in out and "WARNING" not in out
