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
import os
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer
from tests.fake_scheduler_api import FakeSchedulerApi
from tests.stacks.test_terraform_deadline import Workspace, _wrapper, warn_stand_in
from tpudeploy import cli, deadline
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.deadline import job_name
from tpudeploy.deadline_ops import ExtendError, extend
from tpudeploy.gcp.scheduler import SchedulerApi

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
    job = stack["resource"]["google_cloud_scheduler_job"][deadline.DEADLINE_JOB_ID]
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
                deadline.WARN_JOB_ID: warn_stand_in(stack),
            }
        },
        "output": {
            "deadline": stack["output"]["deadline"],
            "job": {"value": f"${{{STAND_IN_JOB}.output}}"},
            "warn": {"value": f"${{terraform_data.{deadline.WARN_JOB_ID}.output}}"},
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
    warn = ws.outputs()["warn"]
    assert warn["schedule"] == deadline.cron_of(at - timedelta(minutes=30))
    assert warn["uri"] == "https://container.googleapis.com/$discovery/rest?version=v1"
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
        jobs=SchedulerApi(num_retries=0),
        stack_dir=lambda: ws.folder,
        terraform=_wrapper(terraform, tmp_path),
        out=out,
    )
    assert new == old + timedelta(hours=2)
    assert ws.deadline() == new
    assert "deletes the cluster then" in out.getvalue()
    assert ws.plan_exit() == 0


def _gke_config(tmp_path: Path) -> Path:
    """deployments/gke.toml with this test's project, as a user's DEPLOY_CONFIG."""
    text = (REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8")
    path = tmp_path / "gke.toml"
    path.write_text(f'project = "{PROJECT}"\n{text}', encoding="utf-8")
    assert parse_config(tomllib.loads(path.read_text(encoding="utf-8"))) == CFG
    return path


def test_make_extend_on_gke_goes_through_the_seam_and_moves_the_clusters_deadline(
    ws: Workspace,
    scheduler: FakeSchedulerApi,
    terraform: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`make extend BY=2h` as a user runs it on platform = "gke": the command is not refused,
    Gke.extend reads the job through the client tpudeploy.platform hands it and applies the
    cluster stack's deadline and job (the synth replaced by the test's runnable stack, the
    terraform on PATH by the stand-in mapping)."""
    ws.apply()
    old = ws.deadline()
    name = job_name(PROJECT, CFG.deadline_region, CFG.deadline_job_name)
    scheduler.set_job(name, schedule_time=old)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "terraform").symlink_to(_wrapper(terraform, tmp_path))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DEPLOY_CONFIG", str(_gke_config(tmp_path)))
    asked: list[str] = []

    def stack(cfg: DeployConfig, name: str | None = None) -> Path:
        asked.append(name or "")
        return ws.folder

    monkeypatch.setattr(cli, "_synthesized_stack", stack)
    assert cli.main(["extend", "2h"]) == 0, capsys.readouterr().err
    assert asked == [CFG.gke_stack_name]  # the cluster stack holds the deadline on GKE
    assert ws.deadline() == old + timedelta(hours=2)
    assert ws.outputs()["job"]["schedule"] == deadline.cron_of(old + timedelta(hours=2))
    moved = old + timedelta(hours=2) - timedelta(minutes=30)
    assert ws.outputs()["warn"]["schedule"] == deadline.cron_of(moved)
    assert "deletes the cluster then" in capsys.readouterr().out
    assert [r for r in scheduler.requests if r[1] == f"/v1/{name}"]
    assert ws.plan_exit() == 0


def test_make_extend_refuses_when_the_cluster_would_change_too(
    ws: Workspace, scheduler: FakeSchedulerApi, terraform: str, synth: Synthesizer, tmp_path: Path
) -> None:
    """The deadline hangs on the cluster's id, so -target plans the cluster too: a cluster
    change the checkout holds and no deploy applied must not ride along with make extend (a
    changed zone would replace the cluster). The saved plan is read first; nothing is applied."""
    ws.apply()
    old = ws.deadline()
    scheduler.set_job(
        job_name(PROJECT, CFG.deadline_region, CFG.deadline_job_name), schedule_time=old
    )
    changed = runnable(synth(RAW)[CFG.gke_stack_name])
    changed["resource"]["terraform_data"]["cluster"]["input"] = f"{CFG.name}-changed"
    ws.write(changed)
    with pytest.raises(ExtendError) as err:
        extend(
            CFG,
            PROJECT,
            "2h",
            jobs=SchedulerApi(num_retries=0),
            stack_dir=lambda: ws.folder,
            terraform=_wrapper(terraform, tmp_path),
            out=io.StringIO(),
        )
    text = str(err.value)
    assert f"would also change {STAND_IN_CLUSTER} (update)" in text
    assert "make deploy" in text and f"the deadline is still {deadline.format_time(old)}" in text
    assert ws.deadline() == old
    assert ws.outputs()["job"]["schedule"] == deadline.cron_of(old)
