"""A failed deploy or destroy says only what is true about state and billing, once, at the end.

The messages are read from the state files themselves (tpudeploy/failures.py); the Makefile's
recipes are run for real with a stand-in cdktf that fails, so what a user sees (no echoed recipe
text, no spinner frames in a log, the preflight's single line) is what is asserted.
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, terraform_env
from tests.fake_boot_apis import FakeSecretManager
from tests.fake_tpu_api import FakeTpuApi
from tools.rehearsal.fakes.resourcemanager import FakeResourceManager
from tpudeploy import failures
from tpudeploy.config import parse_config

PROJECT = "fail-msg-proj-1"
# A name no developer's real state file has (state lives at the repository root).
NAME = "i15-failure-msgs"
# Both secrets with a version: the preflight lets the deploy through to (stand-in) cdktf.
SECRETS = {f"{NAME}-hf-token": ["t"], f"{NAME}-api-key": ["k"], f"{NAME}-tls": ["c"]}


def state_file(root: Path, stack: str, resources: list[dict[str, object]]) -> None:
    """A Terraform 1.x local state file (format version 4) holding `resources`."""
    (root / f"terraform.{stack}.tfstate").write_text(
        json.dumps(
            {
                "version": 4,
                "terraform_version": "1.11.4",
                "serial": 3,
                "lineage": "test",
                "outputs": {},
                "resources": resources,
            }
        )
    )


def resource(rtype: str, name: str, *, status: str | None = None) -> dict[str, object]:
    instance: dict[str, object] = {"schema_version": 0, "attributes": {}}
    if status:
        instance["status"] = status
    return {"mode": "managed", "type": rtype, "name": name, "instances": [instance]}


def say(func: object, **kwargs: object) -> str:
    out = io.StringIO()
    func(out=out, **kwargs)  # type: ignore[operator]
    return out.getvalue()


# ---- deploy ---------------------------------------------------------------------------------


def test_deploy_failing_before_any_state_claims_nothing_bills(tmp_path: Path) -> None:
    cfg = parse_config({"name": NAME, "project": PROJECT})
    text = say(failures.after_deploy, cfg=cfg, root=tmp_path)
    assert "before Terraform created anything" in text
    assert "nothing of this deployment bills" in text
    assert "may still bill" not in text and "In Terraform's state" not in text


def test_deploy_failing_with_a_vm_in_state_names_it_and_its_rate(tmp_path: Path) -> None:
    cfg = parse_config({"name": NAME, "project": PROJECT, "provisioning": "spot"})
    state_file(tmp_path, cfg.node_stack_name, [resource("google_tpu_v2_vm", "node")])
    text = say(failures.after_deploy, cfg=cfg, root=tmp_path)
    assert f"TPU VM {NAME} (spot, $0.5779/chip-hour until it is deleted)" in text
    assert "`make status`" in text and "`make destroy`" in text


def test_deploy_with_only_the_long_lived_stack_says_no_chip_bills(tmp_path: Path) -> None:
    cfg = parse_config({"name": NAME, "project": PROJECT})
    state_file(tmp_path, cfg.secrets_stack_name, [resource("google_storage_bucket", "cache")])
    state_file(tmp_path, cfg.node_stack_name, [resource("google_compute_firewall", "deny-all")])
    text = say(failures.after_deploy, cfg=cfg, root=tmp_path)
    assert "holds no TPU node or queued resource" in text and "no chip bills" in text


@pytest.mark.parametrize("pipeline", [False, True])
def test_deploy_with_remote_state_says_where_to_look(tmp_path: Path, pipeline: bool) -> None:
    """Remote state, whoever applies it (issue 37: state_bucket alone is local use with shared
    state): no local file to read, so never "nothing was created"."""
    data = {"name": NAME, "project": PROJECT, "state_bucket": "tfstate-x", "pipeline": pipeline}
    cfg = parse_config(data)
    text = say(failures.after_deploy, cfg=cfg, root=tmp_path)
    assert "State is remote (gs://tfstate-x)" in text and "`make status`" in text


def test_a_failed_flex_start_create_is_tainted_in_real_state(
    tmp_path: Path, terraform: str
) -> None:
    """Terraform itself writes the state of a create provisioner that failed (tainted); the
    message then says the client deleted what it requested instead of 'may still bill'."""
    folder = tmp_path / "tf"
    folder.mkdir()
    (folder / "main.tf.json").write_text(
        json.dumps(
            {
                "resource": {
                    "terraform_data": {
                        "queued-resource": {
                            "input": "spec",
                            "provisioner": [{"local-exec": {"command": "exit 3"}}],
                        }
                    }
                }
            }
        )
    )
    env = terraform_env(tmp_path)
    for args in (["init", "-input=false"], ["apply", "-auto-approve", "-input=false"]):
        subprocess.run([terraform, *args], cwd=folder, env=env, capture_output=True, check=False)
    cfg = parse_config({"name": NAME, "project": PROJECT})
    (folder / "terraform.tfstate").rename(tmp_path / f"terraform.{cfg.node_stack_name}.tfstate")
    text = say(failures.after_deploy, cfg=cfg, root=tmp_path)
    assert f"flex-start queued resource {NAME}-qr ($0.6000/chip-hour while its node runs)" in text
    assert "its create failed, and the client deleted what it requested" in text


# ---- destroy --------------------------------------------------------------------------------


def test_destroy_with_no_state_file_makes_no_billing_claim(tmp_path: Path) -> None:
    cfg = parse_config({"name": NAME, "project": PROJECT})
    text = say(failures.after_destroy, cfg=cfg, terraform_exit=1, cleanup_exit=0, root=tmp_path)
    assert f"no state for {NAME}-node here (no terraform.{NAME}-node.tfstate)" in text
    assert "still in Terraform state" not in text and "may still bill" not in text


def test_destroy_leaving_a_vm_in_state_names_it(tmp_path: Path) -> None:
    cfg = parse_config({"name": NAME, "project": PROJECT, "provisioning": "on-demand"})
    state_file(tmp_path, cfg.node_stack_name, [resource("google_tpu_v2_vm", "node")])
    text = say(failures.after_destroy, cfg=cfg, terraform_exit=1, cleanup_exit=0, root=tmp_path)
    assert "Still in Terraform's state, and billing if it runs" in text
    assert f"TPU VM {NAME} (on-demand, $1.2000/chip-hour until it is deleted)" in text


def test_destroy_whose_cleanup_failed_says_what_was_not_checked(tmp_path: Path) -> None:
    cfg = parse_config({"name": NAME, "project": PROJECT})
    text = say(failures.after_destroy, cfg=cfg, terraform_exit=0, cleanup_exit=1, root=tmp_path)
    assert text.startswith(f"Whether queued resource {NAME}-qr exists could not be checked")


# ---- the recipes, run by make ----------------------------------------------------------------

STAND_IN_CDKTF = """#!/bin/sh
# Records how the Makefile ran it, prints what cdktf would, and fails like a refused apply.
{{ echo "CI=${{CI:-}}"; echo "args=$*"; }} >> {record}
echo "Error: something the real cdktf would explain" >&2
exit 1
"""


@pytest.fixture
def make_env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "deploy.toml"
    config.write_text(
        f'name = "{NAME}"\nproject = "{PROJECT}"\nprovisioning = "spot"\n'
        # No deadline job to look up: these tests are about what a failure says.
        'max_run_duration = "none"\n'
    )
    adc = tmp_path / "adc.json"
    adc.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "make-test.apps.googleusercontent.com",
                "client_secret": "not-a-real-client-secret",
                "refresh_token": "not-a-real-refresh-token",
            }
        )
    )
    cdktf = tmp_path / "cdktf"
    cdktf.write_text(STAND_IN_CDKTF.format(record=tmp_path / "cdktf-calls"))
    cdktf.chmod(0o755)
    # As a user runs make: not nested in `make test` (MAKELEVEL would turn "make:" into
    # "make[1]:" in every message), not under CI.
    nested = ("CI", "GOOGLE_CLOUD_PROJECT", "MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")
    env = {k: v for k, v in os.environ.items() if k not in nested}
    env.update(
        DEPLOY_CONFIG=str(config),
        GOOGLE_APPLICATION_CREDENTIALS=str(adc),
        CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
        NO_GCE_CHECK="true",
        GCE_METADATA_HOST="127.0.0.1:9",
        STAND_IN_CDKTF=str(cdktf),
    )
    return env


def make(
    target: str, env: dict[str, str], *extra: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    # -o: never rebuild the shared .venv or node_modules from a test.
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-o",
            ".venv/.installed",
            "-o",
            "node_modules/.installed",
            target,
            f"CDKTF={env['STAND_IN_CDKTF']}",
            f"PY={sys.executable}",
            *extra,
        ],
        cwd=REPO_ROOT,
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def calls(env: dict[str, str]) -> list[str]:
    record = Path(env["STAND_IN_CDKTF"]).parent / "cdktf-calls"
    return record.read_text().splitlines() if record.exists() else []


def test_make_deploy_refuses_in_one_line_before_the_secrets_exist(
    make_env: dict[str, str],
) -> None:
    # Resource Manager answers the permission test as for an owner.
    with FakeSecretManager({}) as sm, FakeResourceManager() as rm:
        make_env["SECRETMANAGER_EMULATOR_HOST"] = sm.host
        make_env["RESOURCEMANAGER_EMULATOR_HOST"] = rm.host
        result = make("deploy", make_env)
    assert result.returncode != 0
    assert result.stdout == ""
    own = [line for line in result.stderr.splitlines() if not line.startswith("make: ***")]
    assert own == [
        f"preflight: secret {NAME}-hf-token does not exist in project {PROJECT}: run "
        "`make deploy-secrets` first (the long-lived stack), then `make secret`, "
        "`make api-key` and `make tls-cert`, then `make deploy`"
    ]
    assert calls(make_env) == []  # cdktf never started


def test_make_deploy_failure_is_told_once_at_the_end(make_env: dict[str, str]) -> None:
    with FakeSecretManager(SECRETS) as sm, FakeTpuApi() as tpu:
        make_env["SECRETMANAGER_EMULATOR_HOST"] = sm.host
        make_env["TPU_EMULATOR_HOST"] = tpu.host
        result = make("deploy", make_env, "AUTO_APPROVE=1")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    # The recipe's own text is never echoed, and the failure is explained once, after cdktf's.
    assert "echo" not in output
    assert output.count("deploy failed") == 1
    assert output.index("something the real cdktf would explain") < output.index("deploy failed")
    assert "nothing of this deployment bills" in output
    (call,) = [c for c in calls(make_env) if c.startswith("args=")]
    assert call.startswith(f"args=deploy --output cdktf.out/deployments/{NAME} ")
    assert call.endswith(f"{NAME}-secrets {NAME}-node --auto-approve")
    # Not a terminal: cdktf prints its outcome, not a spinner frame every 80 ms.
    assert "CI=1" in calls(make_env)


def test_make_destroy_with_nothing_deployed_claims_no_billing(make_env: dict[str, str]) -> None:
    with FakeTpuApi() as tpu:
        make_env["TPU_EMULATOR_HOST"] = tpu.host
        result = make("destroy", make_env, "AUTO_APPROVE=1")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "still in Terraform state" not in output and "may still bill" not in output
    assert f"no state for {NAME}-node here" in output
    assert "echo" not in output


def test_a_prompt_keeps_the_interactive_display(make_env: dict[str, str]) -> None:
    """With a terminal on stdin and no AUTO_APPROVE, cdktf must show its approval prompt: the
    quiet mode stays off even when stdout is a pipe (`make deploy | tee log`)."""
    with FakeSecretManager(SECRETS) as sm, FakeTpuApi() as tpu:
        make_env["SECRETMANAGER_EMULATOR_HOST"] = sm.host
        make_env["TPU_EMULATOR_HOST"] = tpu.host
        controller, terminal = pty.openpty()
        try:
            make("deploy", make_env, stdin=terminal)
        finally:
            os.close(controller)
            os.close(terminal)
    assert "CI=" in calls(make_env) and "CI=1" not in calls(make_env)
