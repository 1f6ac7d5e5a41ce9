"""Terraform tier: the deadline of a spot node, computed and kept by the real Terraform binary.

The node stack's `terraform_data.deadline-time` and variables run without any provider; the
Cloud Scheduler job (google-beta) cannot, so a terraform_data stand-in carries the job's own
synthesized schedule and URL expressions, verbatim. What this proves: the deadline is deploy
time + max_run_duration, the job's cron line is that minute, a second deploy plans no change,
a new duration, `make extend` and a deploy after the deadline each set a new one, and the job's
request deletes the node.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Synthesizer, terraform_env
from tests.fake_scheduler_api import FakeSchedulerApi
from tests.fake_tpu_api import FakeTpuApi
from tpudeploy import deadline
from tpudeploy.config import parse_config
from tpudeploy.deadline import job_name
from tpudeploy.deadline_ops import extend
from tpudeploy.gcp.scheduler import SchedulerApi
from tpudeploy.tpuvm import queued_resource as qr
from tpudeploy.tpuvm import recover, vmstatus
from tpudeploy.tpuvm.addresses import DEADLINE_ADDRESS, DEADLINE_ID, DEADLINE_JOB_ID
from tpudeploy.tpuvm.warmpath import StorageApi

PROJECT = "tf-deadline-proj-1"
SPOT = {"project": PROJECT, "provisioning": "spot"}
SPOT_90M = {**SPOT, "max_run_duration": "90m"}
STAND_IN = f"terraform_data.{DEADLINE_JOB_ID}"
WARN_STAND_IN = f"terraform_data.{deadline.WARN_JOB_ID}"


def warn_stand_in(stack: dict[str, Any]) -> dict[str, Any]:
    """The "stops soon" job's stand-in: its synthesized schedule, verbatim."""
    warn = stack["resource"]["google_cloud_scheduler_job"][deadline.WARN_JOB_ID]
    return {"input": {"schedule": warn["schedule"], "uri": warn["http_target"]["uri"]}}


def runnable(node: dict[str, Any]) -> dict[str, Any]:
    """The deadline, its variables and stand-ins for the jobs holding the jobs' expressions."""
    job = node["resource"]["google_cloud_scheduler_job"][DEADLINE_JOB_ID]
    held = node["resource"]["terraform_data"][DEADLINE_ID]
    return {
        "terraform": {"required_version": node["terraform"]["required_version"]},
        "variable": node["variable"],
        "resource": {
            "terraform_data": {
                DEADLINE_ID: held,
                DEADLINE_JOB_ID: {
                    "input": {
                        "schedule": job["schedule"],
                        "uri": job["http_target"]["uri"],
                        "method": job["http_target"]["http_method"],
                    }
                },
                deadline.WARN_JOB_ID: warn_stand_in(node),
            }
        },
        "output": {
            "deadline": node["output"]["deadline"],
            "job": {"value": f"${{{STAND_IN}.output}}"},
            "warn": {"value": f"${{{WARN_STAND_IN}.output}}"},
        },
    }


class Workspace:
    def __init__(self, folder: Path, terraform: str, tmp: Path) -> None:
        self.folder, self.terraform = folder, terraform
        self.env = terraform_env(tmp)

    def write(self, doc: dict[str, Any]) -> None:
        (self.folder / "main.tf.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.terraform, *args, "-no-color"],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def outputs(self) -> dict[str, Any]:
        out = self.run("output", "-json")
        assert out.returncode == 0, out.stderr
        return {k: v["value"] for k, v in json.loads(out.stdout).items()}

    def deadline(self) -> datetime:
        return deadline.parse_time(self.outputs()["deadline"])

    def apply(self, *args: str) -> None:
        result = self.run("apply", "-auto-approve", *args)
        assert result.returncode == 0, result.stdout + result.stderr

    def plan_exit(self) -> int:
        return self.run("plan", "-detailed-exitcode").returncode


@pytest.fixture
def ws(
    terraform: str, synth: Synthesizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Workspace:
    folder = tmp_path / "stack"
    folder.mkdir()
    w = Workspace(folder, terraform, tmp_path)
    w.write(runnable(synth(SPOT)[f"{parse_config(SPOT).node_stack_name}"]))
    init = w.run("init", "-input=false")
    assert init.returncode == 0, init.stderr
    # What tpudeploy's own Terraform calls (recover, extend) run under.
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", w.env["TF_CLI_CONFIG_FILE"])
    return w


def _minute(value: datetime) -> datetime:
    return value.replace(second=0, microsecond=0)


def test_deadline_is_deploy_time_plus_the_duration_and_a_second_deploy_plans_nothing(
    ws: Workspace,
) -> None:
    before = datetime.now(UTC)
    ws.apply()
    after = datetime.now(UTC)
    at = ws.deadline()
    assert _minute(before + timedelta(hours=8)) <= at <= _minute(after + timedelta(hours=8))
    job = ws.outputs()["job"]
    assert job["schedule"] == deadline.cron_of(at)
    # The "stops soon" warning: 30 minutes before, a read-only GET needing no identity.
    warn = ws.outputs()["warn"]
    assert warn["schedule"] == deadline.cron_of(at - timedelta(minutes=30))
    assert warn["uri"] == "https://tpu.googleapis.com/$discovery/rest?version=v2"
    assert job["method"] == "DELETE"
    assert (
        job["uri"]
        == f"https://tpu.googleapis.com/v2/projects/{PROJECT}/locations/us-west4-a/nodes/gemma4-v5e"
    )
    assert ws.plan_exit() == 0, "a second deploy must plan no change"
    assert ws.deadline() == at


def test_a_new_duration_sets_a_new_deadline(ws: Workspace, synth: Synthesizer) -> None:
    ws.apply()
    shorter = runnable(synth(SPOT_90M)[parse_config(SPOT_90M).node_stack_name])
    ws.write(shorter)
    plan = ws.run("plan", "-detailed-exitcode")
    assert plan.returncode == 2 and f"{DEADLINE_ADDRESS} must be replaced" in plan.stdout
    before = datetime.now(UTC)
    ws.apply()
    at = ws.deadline()
    assert _minute(before + timedelta(minutes=90)) <= at <= before + timedelta(minutes=91)
    assert ws.outputs()["job"]["schedule"] == deadline.cron_of(at)


@pytest.fixture
def scheduler(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSchedulerApi]:
    with FakeSchedulerApi() as fake:
        monkeypatch.setenv("CLOUD_SCHEDULER_EMULATOR_HOST", fake.host)
        yield fake


def _job_id() -> str:
    cfg = parse_config(SPOT)
    return job_name(PROJECT, cfg.effective_region, cfg.deadline_job_name)


def _wrapper(terraform: str, tmp_path: Path) -> str:
    """The real terraform, with the jobs' addresses mapped onto their stand-ins', and back in
    what `show` prints (make extend reads the saved plan's changes by address)."""
    script = tmp_path / "terraform-standin-job"
    job, warn = deadline.DEADLINE_JOB_ADDRESS, deadline.WARN_JOB_ADDRESS
    script.write_text(
        f"#!{sys.executable}\nimport os, subprocess, sys\n"
        f"args = [a.replace({job!r}, {STAND_IN!r}).replace({warn!r}, {WARN_STAND_IN!r})"
        " for a in sys.argv[1:]]\n"
        "if 'show' not in args:\n"
        f"    os.execv({terraform!r}, [{terraform!r}, *args])\n"
        f"shown = subprocess.run([{terraform!r}, *args], capture_output=True, text=True)\n"
        f"sys.stdout.write(shown.stdout.replace({STAND_IN!r}, {job!r})"
        f".replace({WARN_STAND_IN!r}, {warn!r}))\n"
        "sys.stderr.write(shown.stderr)\n"
        "sys.exit(shown.returncode)\n"
    )
    script.chmod(0o755)
    return str(script)


def test_make_extend_moves_the_deadline_and_later_deploys_keep_it(
    ws: Workspace, scheduler: FakeSchedulerApi, terraform: str, tmp_path: Path
) -> None:
    ws.apply()
    old = ws.deadline()
    scheduler.set_job(_job_id(), schedule_time=old)
    out = io.StringIO()
    new = extend(
        parse_config(SPOT),
        PROJECT,
        "2h",
        jobs=SchedulerApi(num_retries=0),
        stack_dir=lambda: ws.folder,
        terraform=_wrapper(terraform, tmp_path),
        out=out,
    )
    assert new == old + timedelta(hours=2)
    assert ws.deadline() == new
    assert ws.outputs()["job"]["schedule"] == deadline.cron_of(new)
    # The warning moves with it (deadline_ops.EXTEND_ADDRESSES targets its job).
    assert ws.outputs()["warn"]["schedule"] == deadline.cron_of(new - timedelta(minutes=30))
    assert "moving the deadline" in out.getvalue()
    # A later `make deploy` (no variable) keeps the extended deadline.
    assert ws.plan_exit() == 0


def test_a_deploy_after_the_deadline_starts_a_new_run(
    ws: Workspace, scheduler: FakeSchedulerApi, terraform: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    past = deadline.format_time(datetime.now(UTC) - timedelta(hours=1))
    ws.apply(f"-var={deadline.VARIABLE}={past}")
    scheduler.set_job(_job_id(), schedule_time=deadline.parse_time(past))
    scheduler.fire(_job_id())
    with FakeTpuApi() as tpu:
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        out = io.StringIO()
        decision = recover.recover(
            parse_config(SPOT),
            PROJECT,
            api=qr.TpuApi(num_retries=0),
            scheduler=lambda: SchedulerApi(num_retries=0),
            stack_dir=lambda: ws.folder,
            terraform=terraform,
            out=out,
        )
    assert decision.replace == (DEADLINE_ADDRESS,)
    assert f"marked {DEADLINE_ADDRESS} for replacement" in out.getvalue()
    before = datetime.now(UTC)
    ws.apply()  # what `make deploy` runs next
    assert ws.deadline() >= _minute(before + timedelta(hours=8))
    assert ws.plan_exit() == 0


def test_the_job_deletes_the_node_and_nothing_bills_afterwards(
    ws: Workspace, scheduler: FakeSchedulerApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws.apply()
    job = ws.outputs()["job"]
    cfg = parse_config(SPOT)
    parent = f"projects/{PROJECT}/locations/{cfg.zone}"
    with FakeTpuApi() as tpu:
        tpu.add_node(parent, cfg.node_id, {"state": "READY"})
        # What Cloud Scheduler sends at the deadline: the job's method and URL, on loopback.
        url = job["uri"].replace("https://tpu.googleapis.com", f"http://{tpu.host}")
        assert url.startswith("http://127.0.0.1:")
        request = urllib.request.Request(url, method=job["method"])  # noqa: S310 - loopback
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
            assert answer.status == 200
        assert tpu.node(f"{parent}/nodes/{cfg.node_id}") is None
        assert tpu.billing() == []  # nothing of this deployment bills any more
        scheduler.set_job(_job_id(), schedule_time=ws.deadline())
        scheduler.fire(_job_id())
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        live = recover.inspect(
            cfg, PROJECT, qr.TpuApi(num_retries=0), lambda: SchedulerApi(num_retries=0)
        )
    assert live.state == recover.NOT_FOUND
    # make recover (the schedule) leaves an ended run alone; make status says it stopped.
    assert not recover.decide(cfg, live, recover.RECOVER, datetime.now(UTC)).acts
    scheduler.add_bucket(cfg.compile_cache_bucket(PROJECT))
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", scheduler.host)
    shown = vmstatus.lines(
        cfg,
        PROJECT,
        live.state,
        scheduler=SchedulerApi(num_retries=0),
        storage=StorageApi(num_retries=0),
    )
    assert shown[0].startswith("billing stopped:") and "make deploy" in shown[0]
