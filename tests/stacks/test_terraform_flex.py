"""Terraform tier: the flex-start queued resource's lifecycle, run by the real Terraform binary.

The node stack's terraform_data resource (with its variables and provisioners) is what Terraform
can run without any cloud provider: `terraform apply` / `destroy` execute the project's own
client against the loopback fake TPU API. After every way a create can fail, and after the
project's own clean-up path (what `make destroy` runs), nothing may be left queued: Terraform
taints a failed create and never runs a tainted resource's destroy provisioner.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer, terraform_env
from tests.fake_tpu_api import FakeTpuApi
from tpudeploy.config import parse_config
from tpudeploy.tpuvm import queued_resource as qr
from tpudeploy.tpuvm import recover
from tpudeploy.tpuvm.addresses import QUEUED_RESOURCE_ADDRESS
from tpudeploy.tpuvm.flex import queued_resource_spec

# A whole Terraform lifecycle whose provisioners run the queued-resource client against the
# fake (three to ten seconds each, 51 s in all): the slow tier (`make test-slow`, which CI
# runs), as the rehearsal's lifecycles are.
lifecycle = pytest.mark.lifecycle

PROJECT = "tf-flex-proj-1"
OK = {"project": PROJECT}
# Capacity never comes within this: the create gives up after 3 s.
SHORT = {"project": PROJECT, "flex_start_timeout": 3}


def qr_name(overrides: dict[str, Any]) -> str:
    return queued_resource_spec(parse_config(overrides), PROJECT).name


def runnable_copy(node: dict[str, Any]) -> dict[str, Any]:
    """The part of the node stack Terraform runs with no provider: the project variable, the
    terraform_data resource and the outputs that read neither a google_* resource nor a
    provider. The provisioners' working_dir (relative to cdktf.out/stacks/<stack>, checked in
    test_flex_synth) becomes the absolute repository root, as it resolves there."""
    data = json.loads(json.dumps(node["resource"]["terraform_data"]))
    for resource in data.values():
        for prov in resource["provisioner"]:
            prov["local-exec"]["working_dir"] = str(REPO_ROOT)
    outputs = {k: v for k, v in node.get("output", {}).items() if "google_" not in json.dumps(v)}
    return {
        "terraform": {"required_version": node["terraform"]["required_version"]},
        "variable": node["variable"],
        "resource": {"terraform_data": data},
        "output": outputs,
    }


class Workspace:
    """One Terraform working directory with local state, run against the fake."""

    def __init__(self, folder: Path, terraform: str, fake: FakeTpuApi, tmp: Path) -> None:
        self.folder = folder
        self.terraform = terraform
        self.env = {
            **terraform_env(tmp),
            "TPU_EMULATOR_HOST": fake.host,
            qr.POLL_ENV: "0.05",
        }

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.terraform, *args, "-no-color"],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def state(self) -> list[str]:
        return self.run("state", "list").stdout.split()

    def project_cleanup(self, config: Path) -> subprocess.CompletedProcess[str]:
        """What `make destroy` runs after `cdktf destroy`."""
        return subprocess.run(
            [sys.executable, "-m", "tpudeploy", "cleanup"],
            cwd=REPO_ROOT,
            env={**self.env, "DEPLOY_CONFIG": str(config)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture
def fake() -> Iterator[FakeTpuApi]:
    with FakeTpuApi(delete_polls=1) as api:
        yield api


def workspace(
    terraform: str, synth: Synthesizer, fake: FakeTpuApi, tmp_path: Path, overrides: dict[str, Any]
) -> Workspace:
    cfg = parse_config(overrides)
    folder = tmp_path / "stack"
    folder.mkdir()
    doc = runnable_copy(synth(overrides)[cfg.node_stack_name])
    # cdk.tf.json, as cdktf names it: make recover reads the synthesized block from there.
    (folder / "cdk.tf.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    ws = Workspace(folder, terraform, fake, tmp_path)
    init = ws.run("init", "-input=false")
    assert init.returncode == 0, init.stderr
    return ws


def config_file(tmp_path: Path, overrides: dict[str, Any]) -> Path:
    path = tmp_path / "deploy.toml"
    path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in overrides.items()))
    return path


def assert_nothing_queued(fake: FakeTpuApi, name: str) -> None:
    assert not fake.exists(name), f"{name} is still queued in the fake TPU API: it would bill"


@lifecycle
def test_success_then_destroy_leaves_nothing(
    terraform: str, synth: Synthesizer, fake: FakeTpuApi, tmp_path: Path
) -> None:
    ws = workspace(terraform, synth, fake, tmp_path, OK)
    applied = ws.run("apply", "-auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert fake.exists(qr_name(OK))
    assert ws.state() == [QUEUED_RESOURCE_ADDRESS]
    again = ws.run("plan", "-detailed-exitcode")
    assert again.returncode == 0, "a second plan must show no changes:\n" + again.stdout
    destroyed = ws.run("destroy", "-auto-approve")
    assert destroyed.returncode == 0, destroyed.stderr
    assert_nothing_queued(fake, qr_name(OK))


@lifecycle
@pytest.mark.parametrize(
    ("overrides", "states", "said"),
    [
        pytest.param(OK, ["WAITING_FOR_RESOURCES", "FAILED"], "went FAILED", id="failed"),
        pytest.param(SHORT, ["WAITING_FOR_RESOURCES"], "timed out", id="capacity-timeout"),
    ],
)
def test_a_failed_create_deletes_what_it_requested(
    terraform: str,
    synth: Synthesizer,
    fake: FakeTpuApi,
    tmp_path: Path,
    overrides: dict[str, Any],
    states: list[str],
    said: str,
) -> None:
    ws = workspace(terraform, synth, fake, tmp_path, overrides)
    name = qr_name(overrides)
    fake.script_states(name, states)
    applied = ws.run("apply", "-auto-approve")
    assert applied.returncode != 0
    output = applied.stdout + applied.stderr
    assert said in output
    assert "nothing of this create is left queued" in output
    assert fake.calls("POST"), "the create was requested"
    # Nothing is left after the failed apply itself...
    assert_nothing_queued(fake, name)
    # ...Terraform keeps a tainted resource (its destroy provisioner will never run)...
    assert "tainted" in ws.run("show").stdout
    # ...and the project's clean-up path and Terraform's destroy both succeed on that state.
    assert ws.project_cleanup(config_file(tmp_path, overrides)).returncode == 0
    assert ws.run("destroy", "-auto-approve").returncode == 0
    assert_nothing_queued(fake, name)


@lifecycle
def test_an_interrupted_apply_leaves_nothing_after_make_destroys_cleanup(
    terraform: str, synth: Synthesizer, fake: FakeTpuApi, tmp_path: Path
) -> None:
    ws = workspace(terraform, synth, fake, tmp_path, OK)
    name = qr_name(OK)
    fake.script_states(name, ["WAITING_FOR_RESOURCES"])
    log = tmp_path / "apply.log"
    with log.open("w") as sink:  # a file, not a pipe: the plan alone would fill a pipe's buffer
        proc = subprocess.Popen(
            [terraform, "apply", "-auto-approve", "-no-color"],
            cwd=ws.folder,
            env=ws.env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not fake.exists(name) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not fake.exists(name):
            proc.kill()
            proc.wait()
            pytest.fail("the create never reached the API:\n" + log.read_text())
        proc.send_signal(signal.SIGINT)  # Ctrl-C to Terraform alone, as a CI runner does
        proc.wait(timeout=120)
    assert proc.returncode != 0, log.read_text()
    # Terraform kills its provisioner outright on an interrupt ("signal: killed"), so the
    # client cannot clean up: the queued resource is still there, and Terraform's state does
    # not hold it (a create that never finished). The project's own clean-up path, which `make
    # destroy` runs whatever Terraform's state says, deletes it by name.
    assert fake.exists(name)
    cleanup = ws.project_cleanup(config_file(tmp_path, OK))
    assert cleanup.returncode == 0, cleanup.stderr
    assert_nothing_queued(fake, name)


def test_the_client_cleans_up_when_terminated(fake: FakeTpuApi, tmp_path: Path) -> None:
    """SIGTERM (a CI job's timeout) unwinds the create like Ctrl-C: it deletes what it asked."""
    spec = queued_resource_spec(parse_config(OK), PROJECT)
    fake.script_states(spec.name, ["WAITING_FOR_RESOURCES"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpudeploy.tpuvm.queued_resource", "create", "--poll", "0.05"],
        cwd=REPO_ROOT,
        env={**os.environ, "TPU_EMULATOR_HOST": fake.host, qr.SPEC_ENV: spec.to_json()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not fake.exists(spec.name) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "nothing of this create is left queued" in output
    assert_nothing_queued(fake, spec.name)


@lifecycle
def test_a_suspended_queued_resource_is_replaced_by_the_next_deploy(
    terraform: str,
    synth: Synthesizer,
    fake: FakeTpuApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ws = workspace(terraform, synth, fake, tmp_path, OK)
    name = qr_name(OK)
    assert ws.run("apply", "-auto-approve").returncode == 0
    # The run duration ends: the queued resource goes SUSPENDED; the spec did not change, so
    # Terraform alone plans nothing.
    fake.script_states(name, ["SUSPENDED"])
    assert ws.run("plan", "-detailed-exitcode").returncode == 0
    monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", ws.env["TF_CLI_CONFIG_FILE"])
    out = io.StringIO()
    decision = recover.recover(
        parse_config(OK),
        PROJECT,
        api=qr.TpuApi(log=out),
        stack_dir=lambda: ws.folder,
        terraform=terraform,
        out=out,
    )
    assert "SUSPENDED" in decision.summary
    assert f"marked {QUEUED_RESOURCE_ADDRESS} for replacement" in out.getvalue()
    replanned = ws.run("plan", "-detailed-exitcode")
    assert replanned.returncode == 2, replanned.stdout
    assert "must be replaced" in replanned.stdout
    posts = len(fake.calls("POST"))
    redeployed = ws.run("apply", "-auto-approve")
    assert redeployed.returncode == 0, redeployed.stdout + redeployed.stderr
    assert len(fake.calls("POST")) == posts + 1, "the queued resource was created again"
    assert fake.exists(name)
    assert ws.run("plan", "-detailed-exitcode").returncode == 0


@lifecycle
def test_the_first_deploy_has_no_state_and_nothing_to_recover(
    terraform: str,
    synth: Synthesizer,
    fake: FakeTpuApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the rehearsal: before the first apply there is no state file, and `terraform
    state list` fails on that; recovery must let the first deploy create the queued resource."""
    ws = workspace(terraform, synth, fake, tmp_path, OK)
    monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", ws.env["TF_CLI_CONFIG_FILE"])
    out = io.StringIO()
    decision = recover.recover(
        parse_config(OK),
        PROJECT,
        api=qr.TpuApi(log=out),
        stack_dir=lambda: ws.folder,
        terraform=terraform,
        out=out,
    )
    assert "NOT_FOUND" in decision.summary
    assert "is not in Terraform's state; the deploy creates it" in out.getvalue()
    assert ws.run("apply", "-auto-approve").returncode == 0
    assert fake.exists(qr_name(OK))


@pytest.mark.parametrize(("state", "replaced"), [("FAILED", True), ("SUSPENDED", False)])
@lifecycle
def test_make_recover_replaces_a_failed_queued_resource_but_never_restarts_an_ended_run(
    terraform: str,
    synth: Synthesizer,
    fake: FakeTpuApi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    state: str,
    replaced: bool,
) -> None:
    """`make recover`: Terraform's -replace of that one resource, run by the real binary."""
    ws = workspace(terraform, synth, fake, tmp_path, OK)
    name = qr_name(OK)
    assert ws.run("apply", "-auto-approve").returncode == 0
    fake.script_states(name, [state])
    monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", ws.env["TF_CLI_CONFIG_FILE"])
    monkeypatch.setenv(qr.POLL_ENV, "0.05")
    posts = len(fake.calls("POST"))
    out = io.StringIO()
    decision = recover.recover(
        parse_config(OK),
        PROJECT,
        api=qr.TpuApi(log=out),
        stack_dir=lambda: ws.folder,
        mode=recover.RECOVER,
        terraform=terraform,
        out=out,
    )
    assert decision.acts == replaced, out.getvalue()
    assert len(fake.calls("POST")) == posts + (1 if replaced else 0)
    if replaced:
        assert fake.exists(name)
        assert ws.run("plan", "-detailed-exitcode").returncode == 0
    else:
        assert "make deploy" in out.getvalue()
