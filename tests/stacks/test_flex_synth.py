"""Flex-start in the node stack: the queued resource, its provisioners, the zone rule."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, Synthesizer, resources, run_main
from tests.fake_tpu_api import FakeTpuApi
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.render import render_startup_script

PROJECT = "flex-proj-123"
FLEX = {"project": PROJECT, "max_run_duration": "90m"}


def terraform_evaluates(text: str, variables: dict[str, str]) -> str:
    """What Terraform makes of a literal string: `${var.x}` interpolated, `$${` -> `${`."""
    out = re.sub(r"(?<!\$)\$\{var\.([a-z_]+)\}", lambda m: variables[m.group(1)], text)
    return out.replace("$${", "${").replace("%%{", "%{")


def all_keys(obj: Any) -> set[str]:
    if isinstance(obj, dict):
        return {k.lower() for k in obj} | {k for v in obj.values() for k in all_keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in all_keys(v)}
    return set()


def qr_resource(stacks: dict[str, Any], cfg: Any) -> dict[str, Any]:
    node = stacks[cfg.node_stack_name]
    found = resources(node, "terraform_data")
    assert list(found) == ["queued-resource"]
    return found["queued-resource"]


def provisioner(qr: dict[str, Any], when: str | None) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [
        p["local-exec"] for p in qr["provisioner"] if p["local-exec"].get("when") == when
    ]
    assert len(matches) == 1
    return matches[0]


def run_provisioner(
    qr: dict[str, Any], when: str | None, fake: FakeTpuApi, stack_dir: Path
) -> subprocess.CompletedProcess[str]:
    """Run a local-exec provisioner the way Terraform would: its command under a shell, in its
    working_dir (relative to the stack directory), with its environment (self.input evaluated)."""
    prov = provisioner(qr, when)
    spec = terraform_evaluates(qr["input"], {"project": PROJECT})
    env_values = {k: v.replace("${self.input}", spec) for k, v in prov["environment"].items()}
    env = {**os.environ, **env_values, "TPU_EMULATOR_HOST": fake.host}
    workdir = (stack_dir / prov["working_dir"]).resolve()
    return subprocess.run(
        ["bash", "-c", prov["command"]],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_default_is_flex_start_with_no_vm(node_stack: dict[str, Any]) -> None:
    assert resources(node_stack, "google_tpu_v2_vm") == {}
    qr = resources(node_stack, "terraform_data")["queued-resource"]
    # Changing the spec replaces the queued resource (delete, then create).
    assert qr["triggers_replace"] == [qr["input"]]
    # Without a project the spec takes var.project, which Terraform requires at deploy time.
    assert "${var.project}" in qr["input"]
    assert "default" not in node_stack["variable"]["project"]


def test_provisioners_call_the_projects_client(synth: Synthesizer) -> None:
    cfg = parse_config(FLEX)
    qr = qr_resource(synth(FLEX), cfg)
    create, destroy = provisioner(qr, None), provisioner(qr, "destroy")
    assert create["command"].startswith(
        ".venv/bin/python -m tpudeploy.tpuvm.queued_resource create"
    )
    assert f"--timeout {cfg.flex_start_timeout_seconds}" in create["command"]
    assert destroy["command"] == ".venv/bin/python -m tpudeploy.tpuvm.queued_resource delete"
    for prov in (create, destroy):
        # Destroy-time provisioners may only reference self: the spec travels in self.input.
        assert prov["environment"] == {"TPUDEPLOY_QR_SPEC": "${self.input}"}
        stack_dir = synth.outdir(FLEX) / "stacks" / cfg.node_stack_name
        assert (stack_dir / prov["working_dir"]).resolve() == REPO_ROOT


def test_spec_inputs_are_visible_and_round_trip_through_terraform(synth: Synthesizer) -> None:
    cfg = parse_config(FLEX)
    qr = qr_resource(synth(FLEX), cfg)
    spec = json.loads(terraform_evaluates(qr["input"], {"project": PROJECT}))
    assert spec["accelerator_type"] == "v5litepod-1"
    assert spec["runtime_version"] == "v2-alpha-tpuv5-lite"
    assert spec["zone"] == "us-west4-a"
    assert spec["max_run_duration_seconds"] == 90 * 60
    assert (
        spec["service_account_email"]
        == f"{cfg.service_account_id}@{PROJECT}.iam.gserviceaccount.com"
    )
    # The bash script survives Terraform's template evaluation byte for byte.
    assert spec["startup_script"] == render_startup_script(cfg)
    assert spec["metadata"]["enable-oslogin"] == "TRUE"
    assert spec["metadata"]["block-project-ssh-keys"] == "TRUE"


def test_flex_node_has_the_vm_paths_hardening_and_description(synth: Synthesizer) -> None:
    """The node a queued resource creates is the node the VM path declares: shielded secure
    boot and the same description, as the TPU API receives them."""
    from tpudeploy.tpuvm.queued_resource import QueuedResourceSpec

    cfg = parse_config(FLEX)
    vm = resources(synth({**FLEX, "provisioning": "spot"})[cfg.node_stack_name], "google_tpu_v2_vm")
    (vm_node,) = vm.values()
    qr = qr_resource(synth(FLEX), cfg)
    body = QueuedResourceSpec.from_json(
        terraform_evaluates(qr["input"], {"project": PROJECT})
    ).to_body()
    node = body["tpu"]["nodeSpec"][0]["node"]
    assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True}
    assert vm_node["shielded_instance_config"] == {"enable_secure_boot": True}
    assert node["description"] == "vLLM google/gemma-4-E2B-it (flex-start)"
    assert vm_node["description"] == "vLLM google/gemma-4-E2B-it (spot)"


def test_create_and_destroy_commands_drive_the_api(synth: Synthesizer) -> None:
    """The issue's 'done when': the synthesized create command, pointed at a loopback server,
    sends the flex-start request; the destroy command deletes it."""
    cfg = parse_config(FLEX)
    stacks = synth(FLEX)
    qr = qr_resource(stacks, cfg)
    stack_dir = synth.outdir(FLEX) / "stacks" / cfg.node_stack_name
    name = f"projects/{PROJECT}/locations/us-west4-a/queuedResources/{cfg.queued_resource_id}"
    with FakeTpuApi(delete_polls=0) as fake:
        fake.script_states(name, ["ACTIVE"])
        created = run_provisioner(qr, None, fake, stack_dir)
        assert created.returncode == 0, created.stderr
        assert "ACTIVE" in created.stderr
        posts = fake.calls("POST", "queuedResources")
        assert len(posts) == 1
        assert posts[0].query["queuedResourceId"] == cfg.queued_resource_id
        body = posts[0].body
        assert body["provisioningModel"] == "FLEX_START"
        assert body["runDuration"] == {"maxRunDuration": "5400s"}
        spec = body["tpu"]["nodeSpec"][0]
        assert spec["nodeId"] == cfg.node_id
        node = spec["node"]
        assert node["metadata"]["startup-script"] == render_startup_script(cfg)
        assert node["serviceAccount"]["email"].startswith(f"{cfg.service_account_id}@{PROJECT}")
        # No spot/preemptible tier beside FLEX_START, anywhere in the request.
        assert not {"spot", "preemptible", "reserved"} & all_keys(body)
        assert "schedulingConfig" not in node

        destroyed = run_provisioner(qr, "destroy", fake, stack_dir)
        assert destroyed.returncode == 0, destroyed.stderr
        assert len(fake.calls("DELETE", cfg.queued_resource_id)) == 1
        assert not fake.exists(name)


@pytest.mark.parametrize("zone", ["europe-west4-a", "europe-west4-b", "asia-east1-c"])
def test_zone_rule_refuses_unknown_flex_zones(zone: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"zone": zone})
    text = str(err.value)
    assert f"zone = '{zone}'" in text
    assert "us-west4-a" in text and "us-central1-a" in text
    assert "allow_untested_flex_zone" in text


def test_zone_rule_has_an_override_and_spares_the_vm_paths() -> None:
    assert parse_config({"zone": "europe-west4-a", "allow_untested_flex_zone": True}).zone
    assert parse_config({"zone": "europe-west4-b", "provisioning": "spot"}).zone
    assert parse_config({"zone": "us-central1-a"}).zone


def test_synth_of_flex_in_europe_fails_with_the_message(tmp_path: Path) -> None:
    result, outdir = run_main(tmp_path, 'zone = "europe-west4-a"\n')
    assert result.returncode == 2
    assert "europe-west4-a" in result.stderr and "us-west4-a" in result.stderr
    assert "Traceback" not in result.stderr
    assert not outdir.exists()


@pytest.mark.parametrize(
    ("value", "seconds"), [("4h", 14400), ("90m", 5400), ("2d", 172800), (3600, 3600)]
)
def test_max_run_duration_forms(value: str | int, seconds: int) -> None:
    assert parse_config({"max_run_duration": value}).max_run_duration_seconds == seconds


@pytest.mark.parametrize("value", ["8d", "4 hours", "", 0, True])
def test_max_run_duration_refused(value: Any) -> None:
    with pytest.raises(ConfigError, match="max_run_duration"):
        parse_config({"max_run_duration": value})
