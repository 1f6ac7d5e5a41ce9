"""The flex-start request built from a config: the same node the VM path declares (no synth)."""

from __future__ import annotations

from tpudeploy.config import parse_config
from tpudeploy.render import render_shutdown_script, render_startup_script
from tpudeploy.tpuvm.flex import node_description, node_labels, queued_resource_spec

PROJECT = "flex-proj-123"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


def test_the_default_deployments_request() -> None:
    cfg = parse_config({})
    spec = queued_resource_spec(cfg, PROJECT)
    assert (spec.project, spec.zone) == (PROJECT, "us-west4-a")
    assert (spec.queued_resource_id, spec.node_id) == ("gemma4-v5e-qr", "gemma4-v5e")
    assert (spec.accelerator_type, spec.runtime_version) == ("v5litepod-1", "v2-alpha-tpuv5-lite")
    # The node's own account, in the project it is deployed to (never the default compute one).
    assert spec.service_account_email == f"gemma4-v5e-node@{PROJECT}.iam.gserviceaccount.com"
    assert spec.scopes == (CLOUD_PLATFORM,)
    assert (spec.network, spec.subnetwork, spec.enable_external_ips) == ("default", None, True)
    assert spec.tags == ("gemma4-v5e-vllm",)
    assert spec.labels == {"deployment": "gemma4-v5e", "provisioning": "flex-start"}
    assert spec.description == "vLLM google/gemma-4-E2B-it (flex-start)"
    assert spec.enable_secure_boot is True
    assert spec.max_run_duration_seconds == 4 * 3600


def test_the_node_boots_like_the_vm_paths_node() -> None:
    """Boot scripts, OS Login without project-wide keys, guest attributes for `make wait`."""
    cfg = parse_config({})
    spec = queued_resource_spec(cfg, PROJECT)
    assert spec.startup_script == render_startup_script(cfg)
    assert spec.metadata == {
        "shutdown-script": render_shutdown_script(cfg),
        "enable-oslogin": "TRUE",
        "block-project-ssh-keys": "TRUE",
        "enable-guest-attributes": "TRUE",
    }
    node = spec.to_body()["tpu"]["nodeSpec"][0]["node"]
    assert node["metadata"]["startup-script"] == render_startup_script(cfg)
    assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True}


def test_network_labels_and_run_length_come_from_the_config() -> None:
    cfg = parse_config(
        {
            "name": "agents",
            "max_run_duration": "90m",
            "labels": {"team": "ml"},
            "network": {"subnetwork": "tpu-subnet", "enable_external_ip": False},
        }
    )
    spec = queued_resource_spec(cfg, PROJECT)
    assert (spec.subnetwork, spec.enable_external_ips) == ("tpu-subnet", False)
    assert spec.tags == ("agents-vllm",)
    assert spec.labels == {"deployment": "agents", "provisioning": "flex-start", "team": "ml"}
    assert spec.max_run_duration_seconds == 90 * 60
    assert spec.service_account_email == f"agents-node@{PROJECT}.iam.gserviceaccount.com"
    assert spec.to_body()["runDuration"] == {"maxRunDuration": "5400s"}


def test_the_vm_path_shares_labels_and_description() -> None:
    spot = parse_config({"provisioning": "spot", "labels": {"team": "ml"}})
    assert node_labels(spot) == {"deployment": "gemma4-v5e", "provisioning": "spot", "team": "ml"}
    assert node_description(spot) == "vLLM google/gemma-4-E2B-it (spot)"


def test_a_vm_deployment_without_end_still_names_a_valid_request() -> None:
    """make status and recover build the spec of a spot node too; "none" has no run length, so
    the request carries flex-start's default (4h) and stays valid."""
    cfg = parse_config({"provisioning": "spot", "max_run_duration": "none"})
    assert queued_resource_spec(cfg, PROJECT).max_run_duration_seconds == 4 * 3600
    timed = parse_config({"provisioning": "spot", "max_run_duration": "2h"})
    assert queued_resource_spec(timed, PROJECT).max_run_duration_seconds == 2 * 3600
