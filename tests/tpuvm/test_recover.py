"""Recovery: the decision for every node and queued-resource state the TPU API can report, read
through the project's own clients from loopback fakes, and the Terraform commands it runs.

The states are the enums of the TPU v2alpha1 discovery document shipped in
google-api-python-client (read here, not copied), so a state Google adds is covered the day the
pin moves. The expected decisions are the rules of the issue, written out below:

- make deploy: taint a PREEMPTED/TERMINATED node, a SUSPENDED/FAILED (or vanished) queued
  resource, and the deadline once its job fired or vanished (a deploy is a new run);
- make recover: replace only what died before its time; never a run that ended on purpose.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fake_scheduler_api import FakeSchedulerApi
from tests.fake_tpu_api import FakeTpuApi
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.deadline import job_name
from tpudeploy.gcp.scheduler import SchedulerApi
from tpudeploy.tpuvm import deployedspec, recover
from tpudeploy.tpuvm import queued_resource as qr
from tpudeploy.tpuvm.addresses import (
    DEADLINE_ADDRESS,
    DENY_ALL_ADDRESS,
    QUEUED_RESOURCE_ADDRESS,
    VM_ADDRESS,
)
from tpudeploy.tpuvm.flex import queued_resource_spec

PROJECT = "recover-proj-1"
PARENT = f"projects/{PROJECT}/locations/us-west4-a"
NOW = datetime(2026, 8, 9, 12, 0, tzinfo=UTC)


def _enum(schema: str) -> list[str]:
    from googleapiclient import discovery_cache

    doc = json.loads(discovery_cache.get_static_doc("tpu", "v2alpha1") or "{}")
    props = doc["schemas"][schema]["properties"]
    values: list[str] = props["state"]["enum"]
    return values


NODE_STATES = [*_enum("Node"), "NOT_FOUND"]
QUEUED_STATES = [*_enum("QueuedResourceState"), "NOT_FOUND"]


def test_the_enums_hold_the_states_the_issue_names() -> None:
    assert {"PREEMPTED", "TERMINATED", "READY"} <= set(NODE_STATES)
    assert {"SUSPENDED", "FAILED", "ACTIVE"} <= set(QUEUED_STATES)


@pytest.fixture
def apis(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeTpuApi, FakeSchedulerApi]]:
    with FakeTpuApi() as tpu, FakeSchedulerApi() as sched:
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        monkeypatch.setenv("CLOUD_SCHEDULER_EMULATOR_HOST", sched.host)
        yield tpu, sched


def _cfg(provisioning: str, **extra: Any) -> DeployConfig:
    return parse_config({"project": PROJECT, "provisioning": provisioning, **extra})


def _job(cfg: DeployConfig) -> str:
    return job_name(PROJECT, cfg.effective_region, cfg.deadline_job_name)


def _live(cfg: DeployConfig) -> recover.Live:
    return recover.inspect(
        cfg, PROJECT, qr.TpuApi(num_retries=0), lambda: SchedulerApi(num_retries=0), now=NOW
    )


# Deadline situations of a spot/on-demand node, as its Cloud Scheduler job shows them.
PENDING, FIRED, MISSING, NO_DEADLINE = "pending", "fired", "missing", "none"


def _script_deadline(sched: FakeSchedulerApi, cfg: DeployConfig, situation: str) -> None:
    if situation == PENDING:
        sched.set_job(_job(cfg), schedule_time=NOW + timedelta(hours=3))
    elif situation == FIRED:
        sched.set_job(_job(cfg), schedule_time=NOW - timedelta(hours=1))
        sched.fire(_job(cfg))


@pytest.mark.parametrize("situation", [PENDING, FIRED, MISSING, NO_DEADLINE])
@pytest.mark.parametrize("state", NODE_STATES)
@pytest.mark.parametrize("provisioning", ["spot", "on-demand"])
def test_vm_decision_for_every_state(
    apis: tuple[FakeTpuApi, FakeSchedulerApi], provisioning: str, state: str, situation: str
) -> None:
    tpu, sched = apis
    extra = {"max_run_duration": "none"} if situation == NO_DEADLINE else {}
    cfg = _cfg(provisioning, **extra)
    if state != "NOT_FOUND":
        tpu.add_node(PARENT, cfg.node_id, {"state": state})
    _script_deadline(sched, cfg, situation)
    live = _live(cfg)
    assert live.state == state
    dead = state in ("PREEMPTED", "TERMINATED")
    ended = situation == FIRED

    deploy = recover.decide(cfg, live, recover.DEPLOY, NOW)
    expected = ([VM_ADDRESS] if dead else []) + (
        [DEADLINE_ADDRESS] if situation in (FIRED, MISSING) else []
    )
    assert list(deploy.replace) == expected, deploy.summary
    assert deploy.create == ()
    assert state in deploy.summary

    again = recover.decide(cfg, live, recover.RECOVER, NOW)
    assert again.replace == ((VM_ADDRESS,) if dead and not ended else ())
    assert again.create == ((VM_ADDRESS,) if state == "NOT_FOUND" and not ended else ())
    if again.create:
        # Only a deployed stack gets its node back, never one `make destroy` removed.
        assert again.when_in_state == DENY_ALL_ADDRESS
    if ended and (dead or state == "NOT_FOUND"):
        assert "make deploy" in again.summary and not again.acts


@pytest.mark.parametrize("state", QUEUED_STATES)
def test_queued_resource_decision_for_every_state(
    apis: tuple[FakeTpuApi, FakeSchedulerApi], state: str
) -> None:
    tpu, _ = apis
    cfg = _cfg("flex-start")
    spec = queued_resource_spec(cfg, PROJECT)
    if state != "NOT_FOUND":
        tpu.add_queued_resource(spec.name, spec.to_body(), [state])
    live = _live(cfg)
    assert live.state == state
    deploy = recover.decide(cfg, live, recover.DEPLOY, NOW)
    # SUSPENDING: the run is ending (its VM being deleted); a deploy replaces it like SUSPENDED.
    replaced = state in ("SUSPENDING", "SUSPENDED", "FAILED", "NOT_FOUND")
    assert deploy.replace == ((QUEUED_RESOURCE_ADDRESS,) if replaced else ())
    again = recover.decide(cfg, live, recover.RECOVER, NOW)
    assert again.replace == ((QUEUED_RESOURCE_ADDRESS,) if state in ("FAILED", "NOT_FOUND") else ())
    if state in ("SUSPENDING", "SUSPENDED"):
        assert "make deploy" in again.summary  # a run that ended is restarted by a deploy only


def test_the_deadline_job_is_read_only_for_a_deadline(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
) -> None:
    _, sched = apis
    for cfg in (_cfg("flex-start"), _cfg("spot", max_run_duration="none")):
        _live(cfg)
    assert sched.requests == []
    cfg = _cfg("spot")
    _live(cfg)
    assert [path for _, path, _ in sched.requests] == [f"/v1/{_job(cfg)}"]


def test_a_disabled_tpu_api_means_a_first_deploy(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
) -> None:
    tpu, _ = apis
    tpu.inject("GET", "/nodes/", 403, "Cloud TPU API has not been used ... or it is disabled")
    live = _live(_cfg("spot"))
    assert not recover.decide(_cfg("spot"), live, recover.DEPLOY, NOW).acts


# ---- the Terraform commands: a stand-in terraform records them (the google_tpu_v2_vm address
# cannot be applied without the provider; tests/stacks/test_terraform_flex.py runs the flex-start
# path and tests/stacks/test_terraform_deadline.py the deadline with the real binary).

STAND_IN = """#!{python}
import json, os, sys
log = os.environ["TF_STAND_IN_LOG"]
with open(log, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
args = [a for a in sys.argv[1:] if not a.startswith("-chdir=")]
if args[:2] == ["state", "list"]:
    print("\\n".join(json.loads(os.environ["TF_STAND_IN_STATE"])))
if args[:1] == ["show"]:
    print(os.environ["TF_STAND_IN_SHOW"])
sys.exit(int(os.environ.get("TF_STAND_IN_APPLY_EXIT", "0")) if args[:1] == ["apply"] else 0)
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    binary = tmp_path / "terraform"
    binary.write_text(STAND_IN.format(python=sys.executable))
    binary.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("TF_STAND_IN_LOG", str(log))
    # What the checkout would deploy (the synthesized stack) and what was deployed (the state):
    # the same node unless a test says otherwise.
    (tmp_path / "cdk.tf.json").write_text(
        json.dumps({"resource": {"google_tpu_v2_vm": {"node": PLANNED_VM}}})
    )
    monkeypatch.setenv("TF_STAND_IN_SHOW", json.dumps(_shown(DEPLOYED_VM)))
    yield binary


PLANNED_VM: dict[str, Any] = {
    "accelerator_type": "v5litepod-1",
    "runtime_version": "v2-alpha-tpuv5-lite",
    "metadata": {"startup-script": "#!/bin/bash\necho v1\n", "enable-oslogin": "TRUE"},
    "labels": {"deployment": "gemma4-v5e"},
    "scheduling_config": {"spot": True},
    "service_account": {"email": "${google_service_account.node.email}"},
    "depends_on": ["google_compute_firewall.deny-all"],
}
# Terraform's state of the same node: nested blocks as lists of one, computed attributes added.
DEPLOYED_VM: dict[str, Any] = {
    "accelerator_type": "v5litepod-1",
    "runtime_version": "v2-alpha-tpuv5-lite",
    "metadata": {"startup-script": "#!/bin/bash\necho v1\n", "enable-oslogin": "TRUE"},
    "labels": {"deployment": "gemma4-v5e"},
    "scheduling_config": [{"spot": True, "preemptible": False, "reserved": False}],
    "service_account": [{"email": "n@p.iam.gserviceaccount.com", "scope": []}],
    "state": "PREEMPTED",
}


def _shown(values: dict[str, Any]) -> dict[str, Any]:
    return {"values": {"root_module": {"resources": [{"address": VM_ADDRESS, "values": values}]}}}


def _calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "calls.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return [[a for a in json.loads(line) if not a.startswith("-chdir=")] for line in lines]


def _run(
    cfg: DeployConfig, mode: str, binary: Path, tmp_path: Path
) -> tuple[recover.Decision, str]:
    out = io.StringIO()
    decision = recover.recover(
        cfg,
        PROJECT,
        api=qr.TpuApi(num_retries=0),
        scheduler=lambda: SchedulerApi(num_retries=0),
        stack_dir=lambda: tmp_path,
        mode=mode,
        terraform=str(binary),
        out=out,
        now=NOW,
    )
    return decision, out.getvalue()


def test_make_recover_replaces_a_preempted_node_and_nothing_else(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tpu, sched = apis
    cfg = _cfg("spot")
    tpu.add_node(PARENT, cfg.node_id, {"state": "PREEMPTED"})
    _script_deadline(sched, cfg, PENDING)
    monkeypatch.setenv("TF_STAND_IN_STATE", json.dumps([VM_ADDRESS, DENY_ALL_ADDRESS]))
    _, said = _run(cfg, recover.RECOVER, stand_in, tmp_path)
    calls = _calls(tmp_path)
    assert calls[-1] == [
        "apply",
        "-auto-approve",
        "-input=false",
        f"-target={VM_ADDRESS}",
        f"-replace={VM_ADDRESS}",
        "-no-color",
    ]
    assert not [c for c in calls if c[0] == "taint"]
    assert "PREEMPTED" in said and "recovered" in said


def test_make_deploy_taints_instead_of_applying(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tpu, sched = apis
    cfg = _cfg("on-demand")
    tpu.add_node(PARENT, cfg.node_id, {"state": "TERMINATED"})
    _script_deadline(sched, cfg, FIRED)
    monkeypatch.setenv(
        "TF_STAND_IN_STATE", json.dumps([VM_ADDRESS, DEADLINE_ADDRESS, DENY_ALL_ADDRESS])
    )
    _run(cfg, recover.DEPLOY, stand_in, tmp_path)
    calls = _calls(tmp_path)
    assert ["taint", VM_ADDRESS, "-no-color"] in calls
    assert ["taint", DEADLINE_ADDRESS, "-no-color"] in calls
    assert not [c for c in calls if c[0] == "apply"]


def test_a_destroyed_stack_gets_no_node_back(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make destroy` removed the node and its job: the node is NOT_FOUND, and a scheduled
    `make recover` must not create it again."""
    cfg = _cfg("spot", max_run_duration="none")
    monkeypatch.setenv("TF_STAND_IN_STATE", json.dumps([]))
    _, said = _run(cfg, recover.RECOVER, stand_in, tmp_path)
    assert not [c for c in _calls(tmp_path) if c[0] == "apply"]
    assert "not in Terraform's state" in said


def test_a_missing_node_of_a_deployed_stack_is_created_again(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replacement that failed (a spot stockout) deleted the old VM and created nothing: the
    next attempt creates it, so a schedule simply retries."""
    _, sched = apis
    cfg = _cfg("spot")
    _script_deadline(sched, cfg, PENDING)
    monkeypatch.setenv("TF_STAND_IN_STATE", json.dumps([DENY_ALL_ADDRESS]))
    _run(cfg, recover.RECOVER, stand_in, tmp_path)
    assert _calls(tmp_path)[-1][:4] == [
        "apply",
        "-auto-approve",
        "-input=false",
        f"-target={VM_ADDRESS}",
    ]
    assert not [a for a in _calls(tmp_path)[-1] if a.startswith("-replace")]


def test_a_failed_attempt_says_the_next_one_tries_again(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tpu, sched = apis
    cfg = _cfg("spot")
    tpu.add_node(PARENT, cfg.node_id, {"state": "PREEMPTED"})
    _script_deadline(sched, cfg, PENDING)
    monkeypatch.setenv("TF_STAND_IN_STATE", json.dumps([VM_ADDRESS, DENY_ALL_ADDRESS]))
    monkeypatch.setenv("TF_STAND_IN_APPLY_EXIT", "1")
    with pytest.raises(recover.RecoverError, match="next attempt"):
        _run(cfg, recover.RECOVER, stand_in, tmp_path)


def test_the_cli_writes_each_attempt_to_the_run_summary(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What the recover workflow shows: one line per deployment and attempt."""
    from tpudeploy import cli

    tpu, sched = apis
    cfg = _cfg("spot")
    tpu.add_node(PARENT, cfg.node_id, {"state": "PREEMPTED"})
    # The CLI reads the clock: a deadline three hours from the real now.
    sched.set_job(_job(cfg), schedule_time=datetime.now(UTC) + timedelta(hours=3))
    config = tmp_path / "deploy.toml"
    config.write_text(f'project = "{PROJECT}"\nprovisioning = "spot"\n')
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("TF_STAND_IN_STATE", json.dumps([VM_ADDRESS, DENY_ALL_ADDRESS]))
    monkeypatch.setenv("PATH", f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(cli, "_synthesized_stack", lambda cfg: tmp_path)
    assert cli.main(["recover", "--apply"]) == 0
    monkeypatch.setenv("TF_STAND_IN_APPLY_EXIT", "1")
    assert cli.main(["recover", "--apply"]) == 1
    lines = summary.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"- {cfg.name}: ") and "PREEMPTED" in lines[0]
    assert "recovery failed" in lines[1] and "next attempt" in lines[1]
    assert "next attempt" in capsys.readouterr().err


# ---- issue 22 item 5: recover brings back what was deployed, never an undeployed change ----


def test_make_recover_refuses_a_node_change_that_was_never_deployed(
    apis: tuple[FakeTpuApi, FakeSchedulerApi],
    stand_in: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A startup-script change refused at the environment gate (so never applied) would have
    reached the node at the next preemption: recover applies the checkout's configuration."""
    tpu, sched = apis
    cfg = _cfg("spot")
    tpu.add_node(PARENT, cfg.node_id, {"state": "PREEMPTED"})
    _script_deadline(sched, cfg, PENDING)
    monkeypatch.setenv("TF_STAND_IN_STATE", json.dumps([VM_ADDRESS, DENY_ALL_ADDRESS]))
    changed = {**PLANNED_VM, "metadata": {**PLANNED_VM["metadata"], "startup-script": "v2"}}
    changed["accelerator_type"] = "v5litepod-4"
    (tmp_path / "cdk.tf.json").write_text(
        json.dumps({"resource": {"google_tpu_v2_vm": {"node": changed}}})
    )
    with pytest.raises(recover.RecoverError) as info:
        _run(cfg, recover.RECOVER, stand_in, tmp_path)
    said = str(info.value)
    assert "accelerator_type, metadata differ from Terraform's state" in said
    assert "`make deploy` of gemma4-v5e" in said and "deploy workflow" in said
    assert not [c for c in _calls(tmp_path) if c[:1] == ["apply"]]


def test_the_comparison_sees_what_terraform_would_change_and_nothing_it_computes() -> None:
    assert deployedspec.differences(PLANNED_VM, DEPLOYED_VM) == []
    # A label removed, a nested-block value changed, a list reordered: each is a difference.
    fewer = {**PLANNED_VM, "labels": {}}
    assert deployedspec.differences(fewer, DEPLOYED_VM) == ["labels"]
    on_demand = {**PLANNED_VM, "scheduling_config": {"spot": False}}
    assert deployedspec.differences(on_demand, DEPLOYED_VM) == ["scheduling_config.spot"]
    tags = ({"tags": ["a", "b"]}, {"tags": ["b", "a"]})
    assert deployedspec.differences(*tags) == ["tags"]
    # What only a plan can know (a reference) and Terraform's own keys are not compared.
    assert deployedspec.differences({"x": "${var.y}", "lifecycle": {"a": 1}}, {}) == []
    # A block the state never had is a difference, not a match.
    assert deployedspec.differences({"network_config": {"enable_external_ips": True}}, {}) == [
        "network_config"
    ]
