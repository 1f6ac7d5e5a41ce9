"""Terraform tier: GKE's deadline, computed and kept by the real Terraform binary.

The cluster stack's `terraform_data.deadline-time` and variables run without any provider; the
cluster and the Cloud Scheduler job (google-beta) cannot, so terraform_data stand-ins take their
place: the job's carries its synthesized schedule and URL verbatim, the cluster's stands for the
cluster the deadline is tied to (its id, as the real one, is unknown while it is being created).
What this proves: the deadline is deploy time + max_run_duration, the job's cron line is that
minute and its request deletes the cluster, a second deploy plans no change, a cluster the job
deleted (Terraform's refresh drops it from the state) brings a new deadline with it, and
`make extend` moves the deadline of the cluster stack.
"""

from __future__ import annotations

import io
import json
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer
from tests.fake_scheduler_api import FakeSchedulerApi
from tests.test_terraform_deadline import Workspace, _wrapper
from tpudeploy import deadline
from tpudeploy.config import parse_config
from tpudeploy.deadline import job_name
from tpudeploy.tpuvm.extend import extend
from tpudeploy.tpuvm.scheduler import SchedulerApi

PROJECT = "tf-gke-deadline-1"
RAW = {
    **tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8")),
    "project": PROJECT,
}
CFG = parse_config(RAW)
CLUSTER = "google_container_cluster.cluster"
STAND_IN_CLUSTER = "terraform_data.cluster"
STAND_IN_JOB = f"terraform_data.{deadline.DEADLINE_JOB_ID}"


def runnable(stack: dict[str, Any]) -> dict[str, Any]:
    (job,) = stack["resource"]["google_cloud_scheduler_job"].values()
    held = json.loads(
        json.dumps(stack["resource"]["terraform_data"][deadline.DEADLINE_ID]).replace(
            CLUSTER, STAND_IN_CLUSTER
        )
    )
    assert "${terraform_data.cluster.id}" in held["triggers_replace"]
    return {
        "terraform": {"required_version": stack["terraform"]["required_version"]},
        "variable": {deadline.VARIABLE: stack["variable"][deadline.VARIABLE]},
        "resource": {
            "terraform_data": {
                "cluster": {"input": CFG.name},
                deadline.DEADLINE_ID: held,
                deadline.DEADLINE_JOB_ID: {
                    "input": {
                        "schedule": job["schedule"],
                        "uri": job["http_target"]["uri"].replace("${var.project}", PROJECT),
                        "method": job["http_target"]["http_method"],
                    }
                },
            }
        },
        "output": {
            "deadline": stack["output"]["deadline"],
            "job": {"value": f"${{{STAND_IN_JOB}.output}}"},
        },
    }


@pytest.fixture
def ws(
    terraform: str, synth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Workspace:
    folder = tmp_path / "stack"
    folder.mkdir()
    w = Workspace(folder, terraform, tmp_path)
    w.write(runnable(synth(RAW)[CFG.gke_stack_name]))
    init = w.run("init", "-input=false")
    assert init.returncode == 0, init.stderr
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", w.env["TF_CLI_CONFIG_FILE"])
    return w


def _minute(value: datetime) -> datetime:
    return value.replace(second=0, microsecond=0)


def test_the_deadline_is_deploy_time_plus_8h_and_the_job_deletes_the_cluster(
    ws: Workspace,
) -> None:
    before = datetime.now(UTC)
    ws.apply()
    after = datetime.now(UTC)
    at = ws.deadline()
    assert _minute(before + timedelta(hours=8)) <= at <= _minute(after + timedelta(hours=8))
    job = ws.outputs()["job"]
    assert job["schedule"] == deadline.cron_of(at)
    assert job["method"] == "DELETE"
    assert job["uri"] == (
        f"https://container.googleapis.com/v1/projects/{PROJECT}/locations/us-west4-a/"
        "clusters/gemma4-gke"
    )
    assert ws.plan_exit() == 0, "a second deploy must plan no change"


def test_a_cluster_the_job_deleted_comes_back_with_a_new_deadline(ws: Workspace) -> None:
    ws.apply()
    old = ws.deadline()
    # the job fired: the cluster is gone, and the next refresh drops it from the state
    assert ws.run("state", "rm", STAND_IN_CLUSTER).returncode == 0
    plan = ws.run("plan")
    assert f"{deadline.DEADLINE_ADDRESS} must be replaced" in plan.stdout, plan.stdout
    ws.apply()
    assert ws.deadline() >= old
    assert ws.outputs()["job"]["schedule"] == deadline.cron_of(ws.deadline())
    assert ws.plan_exit() == 0


@pytest.fixture
def scheduler(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSchedulerApi]:
    with FakeSchedulerApi() as fake:
        monkeypatch.setenv("CLOUD_SCHEDULER_EMULATOR_HOST", fake.host)
        yield fake


def test_make_extend_moves_the_clusters_deadline(
    ws: Workspace, scheduler: FakeSchedulerApi, terraform: str, tmp_path: Path
) -> None:
    ws.apply()
    old = ws.deadline()
    scheduler.set_job(
        job_name(PROJECT, CFG.deadline_region, CFG.deadline_job_name), schedule_time=old
    )
    out = io.StringIO()
    new = extend(
        CFG,
        PROJECT,
        "2h",
        scheduler=SchedulerApi(num_retries=0),
        stack_dir=lambda: ws.folder,
        terraform=_wrapper(terraform, tmp_path),
        out=out,
    )
    assert new == old + timedelta(hours=2)
    assert ws.deadline() == new
    assert "deletes the cluster then" in out.getvalue()
    assert ws.plan_exit() == 0
