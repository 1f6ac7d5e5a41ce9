"""platform = "gke" and the [gke] table: defaults, and every refusal naming key, value and fix."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tpudeploy import facts
from tpudeploy.config import ConfigError, load_config, parse_config
from tpudeploy.config.gke import version_tuple
from tpudeploy.gitops import pipeline_deployments
from tpudeploy.platform import platform_for


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.problems


def test_the_default_platform_is_still_one_tpu_vm() -> None:
    cfg = parse_config({})
    assert cfg.platform == "tpu-vm"
    assert platform_for(cfg).stacks(cfg) == ("gemma4-v5e-secrets", "gemma4-v5e-node")


def test_gke_defaults_and_stack_order() -> None:
    cfg = parse_config({"platform": "gke"})
    assert (cfg.gke.min_replicas, cfg.gke.max_replicas) == (1, 4)
    assert cfg.gke.capacity_order == ("spot", "flex-start")
    assert cfg.gke.max_run_duration_seconds == 86400
    assert cfg.gke.min_version == facts.GKE_FLEX_START_TPU_MIN_VERSION
    stacks = ("gemma4-v5e-secrets", "gemma4-v5e-gke", "gemma4-v5e-serving")
    assert platform_for(cfg).stacks(cfg) == stacks
    assert platform_for(cfg).billing_stacks(cfg) == stacks[2:]
    assert platform_for(cfg).protected_stacks(cfg) == (stacks[1],)
    assert platform_for(parse_config({})).protected_stacks(parse_config({})) == ()


def test_the_shipped_example_loads() -> None:
    cfg = load_config(REPO_ROOT / "deployments" / "gke.toml")
    assert cfg.platform == "gke"
    assert cfg.zone in facts.GKE_FLEX_START_V5E_ZONES


def test_the_pipeline_takes_the_gke_file_beside_the_tpu_vm_ones() -> None:
    """Issue 41: a GKE file with state_bucket is a pipeline deployment (tests/gitops/
    test_gitops_gke.py has the rest)."""
    names = [d.name for d in pipeline_deployments(REPO_ROOT)]
    assert "gemma4-gke" in names
    assert len(names) > 1  # the TPU VM deployments are still there


@pytest.mark.parametrize("zone", ["europe-west4-a", "us-east5-a", "us-west4-b"])
def test_a_zone_without_v5e_pools_is_refused(zone: str) -> None:
    (line,) = _problems({"platform": "gke", "zone": zone, "gke": {"capacity": "spot"}})
    assert line.startswith(f"zone = '{zone}': GKE has no v5e single-host TPU pools here")
    assert "Fix: use one of us-central1-a, us-south1-a, us-west1-c, us-west4-a" in line


@pytest.mark.parametrize("zone", ["us-central1-a", "us-south1-a", "us-west1-c"])
def test_flex_start_outside_its_documented_zone_is_refused(zone: str) -> None:
    (line,) = _problems({"platform": "gke", "zone": zone})
    assert line.startswith("gke.capacity = 'spot,flex-start': GKE flex-start for v5e")
    assert f'use capacity = "spot" in {zone}' in line
    # spot alone is fine there, and the documented override works
    assert parse_config({"platform": "gke", "zone": zone, "gke": {"capacity": "spot"}})
    assert parse_config({"platform": "gke", "zone": zone, "allow_untested_flex_zone": True})


def test_versions_below_what_the_features_need_are_refused() -> None:
    lines = _problems({"platform": "gke", "gke": {"min_version": "1.30.2"}})
    assert len(lines) == 2
    assert "ComputeClass" in lines[0] and facts.GKE_COMPUTE_CLASS_MIN_VERSION in lines[0]
    assert "flex-start" in lines[1] and facts.GKE_FLEX_START_TPU_MIN_VERSION in lines[1]
    # spot alone needs only the ComputeClass's version
    spot = {"capacity": "spot", "min_version": facts.GKE_COMPUTE_CLASS_MIN_VERSION}
    assert parse_config({"platform": "gke", "gke": spot})
    (line,) = _problems({"platform": "gke", "gke": {**spot, "min_version": "1.30.3-gke.1"}})
    assert line.startswith("gke.min_version = '1.30.3-gke.1': the ComputeClass")


def test_version_order_is_numeric_not_textual() -> None:
    assert version_tuple("1.33.0-gke.1712000") > version_tuple("1.33.0-gke.999999")
    assert version_tuple("1.100") > version_tuple("1.33.0-gke.1712000")
    assert version_tuple("1.33") < version_tuple("1.33.0-gke.1712000")


@pytest.mark.parametrize(
    ("gke", "key", "says"),
    [
        ({"capacity": "on-demand"}, "gke.capacity", 'use "spot", "flex-start" or'),
        ({"max_run_duration": "8d"}, "gke.max_run_duration", "over the 7-day maximum"),
        ({"min_version": "latest"}, "gke.min_version", "not a GKE version"),
        ({"system_machine_type": "big"}, "gke.system_machine_type", "machine type"),
        ({"release_channel": "UNSPECIFIED"}, "gke.release_channel", "REGULAR"),
        ({"max_replicas": 0}, "gke.max_replicas", ""),
        ({"min_replicas": -1}, "gke.min_replicas", "count of replicas"),
        ({"replicas": 2}, "gke.replicas", ""),
    ],
)
def test_bad_gke_values_name_the_key(gke: dict[str, Any], key: str, says: str) -> None:
    (line,) = _problems({"platform": "gke", "gke": gke})
    assert line.startswith(f"{key} = "), line
    assert says in line and "Fix:" in line


def test_min_above_max_names_both() -> None:
    (line,) = _problems({"platform": "gke", "gke": {"min_replicas": 5}})
    assert line.startswith("gke.min_replicas = 5: is above [gke] max_replicas = 4")
    assert "raise max_replicas to at least 5" in line


def test_more_than_one_chip_per_replica_is_refused() -> None:
    (line,) = _problems({"platform": "gke", "accelerator_type": "v5litepod-4"})
    assert line.startswith("accelerator_type = 'v5litepod-4': a GKE replica is one pod")


def test_a_gke_table_on_a_tpu_vm_deployment_is_refused_not_ignored() -> None:
    (line,) = _problems({"gke": {"max_replicas": 8}})
    assert line.startswith('gke = {max_replicas = 8}: [gke] applies to platform = "gke" only')


def test_the_tpu_vm_run_end_rules_do_not_apply_to_gke() -> None:
    """provisioning/max_run_duration describe the TPU VM; on GKE [gke] says what ends a node."""
    cfg = parse_config({"platform": "gke", "max_run_duration": "none"})
    assert cfg.gke.max_run_duration_seconds == 86400


def test_unknown_platform(tmp_path: Path) -> None:
    (line,) = _problems({"platform": "k8s"})
    assert line.startswith("platform = 'k8s'")


@pytest.mark.parametrize("gke", [{}, {"max_replicas": 4, "min_replicas": 1}])
def test_a_gke_table_that_sets_nothing_new_on_a_tpu_vm_is_accepted(gke: dict[str, Any]) -> None:
    """Only a [gke] table that sets something is refused on a TPU VM: an empty one, one that
    restates the defaults, or a whole config dumped and read back (which carries them) is not."""
    assert parse_config({"gke": gke}).platform == "tpu-vm"
    whole = parse_config({}).model_dump()
    assert "gke" in whole and parse_config(whole).gke == parse_config({}).gke


def test_a_gke_deployment_gets_the_shared_and_the_gke_problems_in_one_round() -> None:
    found = _problems({"platform": "gke", "region": "europe-west4", "gke": {"min_replicas": 5}})
    assert [line.split(" = ")[0] for line in found] == ["region", "gke.min_replicas"], found


def test_a_gke_zone_is_judged_by_gkes_list_only_whatever_the_provisioning_key_says() -> None:
    """provisioning does not apply to GKE: with it set to spot, a zone outside GKE's v5e pools
    is still one problem, GKE's, not the TPU VM's zone list as well."""
    (line,) = _problems(
        {"platform": "gke", "provisioning": "spot", "zone": "europe-west4-a",
         "gke": {"capacity": "spot"}}
    )  # fmt: skip
    assert line.startswith("zone = 'europe-west4-a': GKE has no v5e single-host TPU pools here")


def test_a_gke_deadline_too_short_to_create_its_job_says_it_is_the_clusters() -> None:
    """The deadline job of a GKE deployment deletes the cluster, not a TPU VM (the TPU VM's
    spot / on-demand wording would name a provisioning model GKE does not use)."""
    raw = tomllib.loads((REPO_ROOT / "deployments" / "gke.toml").read_text(encoding="utf-8"))
    (line,) = _problems({**raw, "provisioning": "spot", "max_run_duration": "10m"})
    assert line.startswith("max_run_duration = '10m': a GKE cluster deadline under 15 minutes")
