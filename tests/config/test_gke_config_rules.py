"""[gke] refusals as the user reads them, each with its fix (tpudeploy/config/gke.py, which make
mutants mutates: a changed rule or fix fails here). Kept apart from test_gke_config.py, small."""

from __future__ import annotations

from typing import Any

import pytest

from tpudeploy import facts
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.config.gke import HPA_SCALE_TO_ZERO_MIN_VERSION, version_tuple

GKE = {"platform": "gke", "zone": "us-west4-a"}


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config({**GKE, **data})
    return info.value.problems


def test_capacity_is_read_whatever_its_case_and_spaces() -> None:
    cfg = parse_config({**GKE, "gke": {"capacity": "Spot , Flex-Start"}})
    assert cfg.gke.capacity == "spot,flex-start"
    assert cfg.gke.capacity_order == ("spot", "flex-start")


def test_as_many_replicas_at_least_as_at_most_is_a_fixed_pool() -> None:
    cfg = parse_config({**GKE, "gke": {"min_replicas": 3, "max_replicas": 3}})
    assert (cfg.gke.min_replicas, cfg.gke.max_replicas) == (3, 3)
    (found,) = problems({"gke": {"min_replicas": 4, "max_replicas": 3}})
    assert found.startswith("gke.min_replicas = 4: is above [gke] max_replicas = 3")
    assert found.endswith("Fix: raise max_replicas to at least 4, or lower min_replicas")


def test_a_machine_type_gke_would_refuse_is_named_with_an_example() -> None:
    assert problems({"gke": {"system_machine_type": "big"}}) == [
        "gke.system_machine_type = 'big': not a Compute Engine machine type. Fix: write e.g. "
        '"e2-standard-2"'
    ]


def test_a_replica_is_one_chip() -> None:
    (found,) = problems({"accelerator_type": "v5litepod-4"})
    assert found.startswith("accelerator_type = 'v5litepod-4': a GKE replica is one pod on one ")
    assert found.endswith(
        f'Fix: use accelerator_type = "{facts.ACCELERATOR_TYPE}" and raise [gke] max_replicas'
    )


def test_a_version_too_old_for_each_feature_names_the_version_it_needs() -> None:
    compute_class = facts.GKE_COMPUTE_CLASS_MIN_VERSION
    flex = facts.GKE_FLEX_START_TPU_MIN_VERSION
    assert problems({"gke": {"min_version": "1.30"}}) == [
        f"gke.min_version = '1.30': the ComputeClass that orders the pools requires GKE "
        f'{compute_class} or later. Fix: set min_version = "{compute_class}" or later',
        f"gke.min_version = '1.30': a flex-start TPU pool requires GKE {flex} or later. Fix: "
        f'set min_version = "{flex}" or later',
    ]


def test_a_version_prefix_counts_as_the_first_version_it_names() -> None:
    assert version_tuple("1.33") == (1, 33, 0, 0)
    assert version_tuple("1.33.0") == (1, 33, 0, 0)
    assert version_tuple(" 1.33.0-gke.1712000 ") == (1, 33, 0, 1712000)
    with pytest.raises(ValueError, match=r"^'1\.x' is not a GKE version$"):
        version_tuple("1.x")


ROUTING = {"gateway": True, "certificate": "c", "proxy_subnet_exists": True}


def test_routing_needs_the_version_that_installs_the_inference_pool_kind() -> None:
    """tpudeploy/config/loading.py: routing below 1.34.0-gke.1626000 is refused with the
    version (GKE installs the InferencePool CRD itself from then on), at it is accepted, and
    an older cluster without routing is not this rule's business."""
    need = facts.GKE_INFERENCE_CRDS_MIN_VERSION
    older = {"min_version": facts.GKE_FLEX_START_TPU_MIN_VERSION}
    (found,) = problems({"gke": older, "routing": ROUTING})
    assert found.startswith(f"gke.min_version = '{facts.GKE_FLEX_START_TPU_MIN_VERSION}': ")
    assert "InferencePool" in found and found.endswith(f'set min_version = "{need}" or later')
    assert parse_config({**GKE, "gke": {"min_version": need}, "routing": ROUTING}).routing.gateway
    assert parse_config({**GKE, "gke": older}).gke.min_version == older["min_version"]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("172.16.0.32/27", '"172.16.0.32/28"'),
        ("172.16.0.0/29", '"172.16.0.0/28"'),
        ("172.16.0.0/26", '"172.16.0.0/28"'),
        ("172.16.0.4/30", '"172.16.0.0/28"'),
        ("172.16.0.33/28", "not an IPv4 range"),
        ("8.8.8.0/28", "a /28 of 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"),
        ("172.32.0.0/28", "a /28 of 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"),
        ("fd00::/124", "not an IPv4 range"),
    ],
)
def test_a_control_plane_range_is_an_rfc1918_slash_28(value: str, words: str) -> None:
    """Issue 36 item 5 (moved here from tests/gke/test_gke_vpc.py: make mutants runs this file)."""
    (problem,) = problems({"gke": {"control_plane_cidr": value}})
    assert problem.startswith(f"gke.control_plane_cidr = {value!r}") and words in problem


@pytest.mark.parametrize("value", [" 172.16.0.32/28 ", "10.0.0.16/28", "192.168.255.240/28"])
def test_an_rfc1918_slash_28_is_the_control_planes_range_as_written(value: str) -> None:
    cfg = parse_config({**GKE, "gke": {"control_plane_cidr": value}})
    assert cfg.gke.control_plane_cidr == value.strip()
    assert parse_config(GKE).gke.control_plane_cidr == ""  # derived from the name


def test_zero_replicas_on_an_old_floor_names_the_version_gke_documents() -> None:
    found = problems({"gke": {"min_replicas": 0}})
    (version,) = [p for p in found if p.startswith("gke.min_version = ")]
    # It names the value the config holds: GKE's default floor, not the 1.37 it needs.
    default = parse_config(GKE).gke.min_version
    assert version.startswith(f"gke.min_version = {default!r}: min_replicas = 0 needs")
    assert f"GKE supports from {HPA_SCALE_TO_ZERO_MIN_VERSION}" in version
    assert 'Fix: set min_version = "1.37"' in version
    assert "scale-to-from-zero-hpa" in version  # the source is named


def test_zero_replicas_on_a_1_37_floor_are_accepted() -> None:
    cfg = parse_config({**GKE, "gke": {"min_replicas": 0, "min_version": "1.37"}})
    assert cfg.gke.min_replicas == 0


def test_zero_replicas_behind_the_gateway_names_the_callout_bound() -> None:
    data = {
        "gke": {"min_replicas": 0, "min_version": "1.37"},
        "routing": {"gateway": True, "proxy_subnet_exists": True, "certificate": "c"},
    }
    found = [p for p in problems(data) if "callout" in p]
    assert len(found) == 1, problems(data)
    assert "at most 10,000 ms" in found[0] and "Fix: set min_replicas = 1, or [routing]" in found[0]
    # The key and value it refuses are the ones the user set.
    assert found[0].startswith("gke.min_replicas = 0: with [routing] gateway")


def test_a_negative_count_is_refused_as_a_count() -> None:
    (found,) = problems({"gke": {"min_replicas": -1}})
    assert found.startswith("gke.min_replicas = -1: is a count of replicas")
