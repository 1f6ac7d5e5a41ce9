"""GKE's `make status` shows the cluster's deadline as its Cloud Scheduler job shows it, read and
judged by the code the TPU VM's status uses (tpudeploy/deadline_ops.py), against loopback fakes of
the container API, the cluster's Kubernetes API and Cloud Scheduler."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fake_scheduler_api import FakeSchedulerApi
from tools.rehearsal.fakes import k8s_ops as k8s
from tpudeploy import platform
from tpudeploy.cli import main
from tpudeploy.config import parse_config
from tpudeploy.deadline import job_name
from tpudeploy.gcp.apis import CONTAINER
from tpudeploy.gcp.scheduler import SchedulerApi
from tpudeploy.gke.platform import Gke

PROJECT = "gke-deadline-status-1"
BASE = {"platform": "gke", "project": PROJECT, "zone": "us-west4-a"}
CFG = parse_config(BASE)
JOB = job_name(PROJECT, CFG.deadline_region, CFG.deadline_job_name)


@pytest.fixture
def scheduler(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSchedulerApi]:
    with FakeSchedulerApi() as fake:
        monkeypatch.setenv("CLOUD_SCHEDULER_EMULATOR_HOST", fake.host)
        yield fake


def _status(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    clusters: set[str],
    extra: str = "",
) -> tuple[int, str]:
    config = tmp_path / "gke.toml"
    config.write_text(
        f'platform = "gke"\nproject = "{PROJECT}"\nzone = "us-west4-a"\n{extra}', encoding="utf-8"
    )
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    with (
        k8s.FakeKubernetes(tmp_path / "kube") as api,
        k8s.FakeContainer(api, clusters=clusters) as container,
    ):
        monkeypatch.setenv(CONTAINER.emulator_env, container.host)
        rc = main(["status"])
    return rc, capsys.readouterr().out


def test_a_pending_deadline_says_when_what_deletes_the_cluster_and_how_to_extend_it(
    scheduler: FakeSchedulerApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=5, minutes=30)
    scheduler.set_job(JOB, schedule_time=at)
    rc, out = _status(tmp_path, monkeypatch, capsys, clusters={CFG.name})
    assert rc == 0
    assert f"billing stops: deadline {at.strftime('%Y-%m-%dT%H:%M')}" in out
    assert re.search(r"\(in 5 h (29|30) min\)", out), out
    assert (
        f"enforced by Cloud Scheduler job {CFG.deadline_job_name} ({CFG.deadline_region}): "
        f"DELETE https://container.googleapis.com/v1/projects/{PROJECT}/locations/us-west4-a/"
        f"clusters/{CFG.name} as {CFG.stop_account_id}"
    ) in out
    assert "extend it with `make extend BY=2h`" in out
    # The replicas and nodes are still shown first, the deadline after them.
    assert out.index("replicas:") < out.index("billing stops: deadline")
    assert [r for r in scheduler.requests if r[1] == f"/v1/{JOB}"], scheduler.requests


def test_after_the_job_deleted_the_cluster_status_says_the_billing_stopped(
    scheduler: FakeSchedulerApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scheduler.set_job(JOB, schedule_time=datetime.now(UTC) - timedelta(hours=1))
    scheduler.fire(JOB)
    rc, out = _status(tmp_path, monkeypatch, capsys, clusters=set())
    assert rc == 0
    assert f"cluster {CFG.name} does not exist" in out
    assert "billing stopped: deadline" in out and "the job deleted the cluster" in out
    assert "`make deploy` starts a new run (deadline: deploy time + 8 h)" in out


def test_a_cluster_without_its_job_is_a_warning_with_the_fix(
    scheduler: FakeSchedulerApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out = _status(tmp_path, monkeypatch, capsys, clusters={CFG.name})
    assert rc == 0
    assert "WARNING: no deadline job: nothing stops the billing" in out
    assert "until `make destroy-all`" in out and "`make deploy` puts the deadline job back" in out
    # No cluster and no job: nothing bills, and a deploy brings both.
    rc, out = _status(tmp_path, monkeypatch, capsys, clusters=set())
    assert f"nothing is billing: no cluster {CFG.name}" in out


def test_opted_out_says_nothing_ends_it_and_asks_no_job(
    scheduler: FakeSchedulerApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out = _status(
        tmp_path, monkeypatch, capsys, clusters={CFG.name}, extra='max_run_duration = "none"\n'
    )
    assert rc == 0
    assert 'WARNING: the cluster has no end time (max_run_duration = "none")' in out
    assert "make destroy-all" in out
    assert not [r for r in scheduler.requests if "/jobs/" in r[1]]


def test_an_unreadable_job_is_one_line_and_the_rest_of_status_still_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Cloud Scheduler on a closed loopback port: the cluster answers, the job cannot be read
    # (no retries, so the refused connection is the answer at once).
    monkeypatch.setenv("CLOUD_SCHEDULER_EMULATOR_HOST", "127.0.0.1:9")
    no_retries = Gke(deadline_jobs=lambda: SchedulerApi(num_retries=0, log=io.StringIO()))
    monkeypatch.setitem(platform.PLATFORMS, "gke", no_retries)
    rc, out = _status(tmp_path, monkeypatch, capsys, clusters={CFG.name})
    assert rc == 0
    assert "replicas:" in out and "TPU nodes:" in out
    assert f"deadline: could not read Cloud Scheduler job {CFG.deadline_job_name}" in out


def test_a_job_left_update_failed_is_a_warning_not_a_deadline(
    scheduler: FakeSchedulerApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A cut-short make extend or deploy can leave the job UPDATE_FAILED, which Cloud Scheduler
    may not run (jobs.patch's reference): its scheduleTime is not shown as the deadline."""
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=5)
    scheduler.set_job(JOB, schedule_time=at, state="UPDATE_FAILED")
    rc, out = _status(tmp_path, monkeypatch, capsys, clusters={CFG.name})
    assert rc == 0
    assert "billing stops: deadline" not in out
    assert "WARNING: deadline job is UPDATE_FAILED" in out
    assert "`make deploy` puts the deadline job back" in out
