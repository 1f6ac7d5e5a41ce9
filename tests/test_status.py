"""`make status`: one screen with the queued resource, the node, its IP and when billing stops."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_tpu_api import FakeTpuApi
from tpudeploy.cli import main
from tpudeploy.config import parse_config
from tpudeploy.flex import queued_resource_spec

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


def test_spot_warns_that_nothing_stops_the_billing(
    fake: FakeTpuApi,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_config(monkeypatch, tmp_path, f'project = "{PROJECT}"\nprovisioning = "spot"\n')
    fake.add_node(
        PARENT,
        "gemma4-v5e",
        {
            "state": "READY",
            "networkEndpoints": [
                {"ipAddress": "10.0.0.5", "accessConfig": {"externalIp": "34.1.2.3"}}
            ],
        },
    )
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "READY" in out and "34.1.2.3" in out
    assert "no end time" in out and "make destroy" in out
    assert "0.5779" in out  # the spot rate from the planner's price table


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
