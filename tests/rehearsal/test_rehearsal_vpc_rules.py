"""What the GKE and Compute fakes refuse of a cluster's version, control-plane range, NAT and
subnets (issue 36, items 1, 2, 3 and 5): each rule as Google documents it
(tools/rehearsal/fakes/container_rules.py, compute_rules.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.rehearsal.test_rehearsal_gke_parts import CLUSTER, CLUSTERS, PROJECT, ZONE, call
from tools.rehearsal.fakes import container_rules
from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.resources.base import ApiError, ProviderConfig
from tools.rehearsal.resources.compute import ComputeSubnetwork
from tools.rehearsal.resources.container import EngineVersionsData

REGION = "us-west4"
ROUTERS = f"/compute/v1/projects/{PROJECT}/regions/{REGION}/routers"
SUBNETS = f"/compute/v1/projects/{PROJECT}/regions/{REGION}/subnetworks"


@pytest.fixture
def cloud() -> Iterator[FakeCloud]:
    with FakeCloud() as fake:
        fake.inventory.enable(PROJECT, "container.googleapis.com")
        fake.inventory.enable(PROJECT, "compute.googleapis.com")
        yield fake


def _create(cloud: FakeCloud, **fields: Any) -> tuple[int, Any]:
    return call(cloud.container.host, "POST", CLUSTERS, {"cluster": {**CLUSTER, **fields}})


# ---- item 1: the version a create asks for


def test_a_retired_exact_build_is_refused_and_offered_ones_and_aliases_are_taken(
    cloud: FakeCloud,
) -> None:
    status, body = _create(cloud, initialClusterVersion="1.33.0-gke.1712000")
    assert status == 400
    assert 'Master version "1.33.0-gke.1712000" is unsupported' in body["error"]["message"]
    status, _ = _create(cloud, initialClusterVersion="1.36")  # an alias nothing offered matches
    assert status == 400
    status, _ = _create(cloud, initialClusterVersion="1.34", releaseChannel={"channel": "REGULAR"})
    assert status == 200
    found = call(cloud.container.host, "GET", f"{CLUSTERS}/{CLUSTER['name']}")[1]
    offered_134 = [v for v in container_rules.VALID_MASTER_VERSIONS if v.startswith("1.34.")]
    assert found["currentMasterVersion"] == max(offered_134, key=container_rules.version_key)


def test_no_version_is_the_channels_default_and_an_offered_build_is_kept() -> None:
    default, valid = container_rules.CHANNELS["STABLE"]
    assert container_rules.resolve_version("", "STABLE") == default
    assert container_rules.resolve_version("-", "STABLE") == default
    assert container_rules.resolve_version(valid[0], "STABLE") == valid[0]
    assert container_rules.resolve_version("latest", "") == max(
        container_rules.VALID_MASTER_VERSIONS, key=container_rules.version_key
    )
    assert container_rules.resolve_version("1.33.0-gke.1712000", "REGULAR") is None


def test_rapid_offers_googles_documented_1_37_builds(cloud: FakeCloud) -> None:
    """Issue 39: the fake offered no 1.37 build, so nothing at [gke] min_version = "1.37" (what
    min_replicas = 0 needs) could be created. GKE's 1.37 changelog names two."""
    status, _ = _create(cloud, initialClusterVersion="1.37", releaseChannel={"channel": "RAPID"})
    assert status == 200
    found = call(cloud.container.host, "GET", f"{CLUSTERS}/{CLUSTER['name']}")[1]
    assert found["currentMasterVersion"] == "1.37.1-gke.1552000"
    channels = container_rules.server_config()["channels"]
    assert isinstance(channels, list)
    (rapid,) = [c for c in channels if c["channel"] == "RAPID"]
    assert {"1.37.0-gke.3503000", "1.37.1-gke.1552000"} <= set(rapid["validVersions"])


@pytest.mark.xfail(
    strict=True,
    reason=(
        "UNFINISHED (issue 39): min_replicas = 0 is not rehearsed. The cluster is created at its "
        "channel's default (stacks/gke/cluster.py: min_master_version and the precondition "
        "against [gke] min_version), and no stored Google page makes a 1.37 build any channel's "
        "default (Google's Rapid feed in the corpus ends at 2026-R40, default 1.36.4-gke.1391000),"
        " so the fake cannot honestly offer one; the wake, the HPA from zero and a client "
        "following Retry-After are proven by tests/gke/test_gke_zero.py and test_gke_wake.py "
        "instead, not by make rehearse"
    ),
)
def test_a_channel_default_can_host_scale_to_zero() -> None:
    defaults = [default for default, _ in container_rules.CHANNELS.values()]
    assert any(container_rules.version_key(d) >= (1, 37, 0, 0) for d in defaults)


def test_the_engine_versions_data_source_reads_the_zones_server_config(
    cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable, host in cloud.environment().items():
        monkeypatch.setenv(variable, host)
    provider = ProviderConfig({"project": PROJECT, "region": REGION, "zone": ZONE})
    read = EngineVersionsData(provider).read({"location": ZONE, "version_prefix": "1.34."})
    assert read["valid_master_versions"] and all(
        v.startswith("1.34.") for v in read["valid_master_versions"]
    )
    assert read["release_channel_default_version"] == {
        name: default for name, (default, _) in container_rules.CHANNELS.items()
    }


# ---- item 5: one control-plane range per cluster of a network


def test_a_control_plane_range_overlapping_another_clusters_is_refused(cloud: FakeCloud) -> None:
    first = {"enablePrivateNodes": True, "masterIpv4CidrBlock": "172.16.0.32/28"}
    status, _ = _create(cloud, privateClusterConfig=first)
    assert status == 200
    status, body = _create(cloud, name="second", privateClusterConfig=first)
    assert status == 400 and "overlaps the control-plane range" in body["error"]["message"]
    other_net = _create(cloud, name="third", network="other", privateClusterConfig=first)
    assert other_net[0] == 200  # another network: its own ranges
    apart = {**first, "masterIpv4CidrBlock": "172.16.9.96/28"}
    assert _create(cloud, name="second", privateClusterConfig=apart)[0] == 200
    for bad in ("10.130.0.0/28", "172.16.0.0/24"):
        blocked = {**first, "masterIpv4CidrBlock": bad}
        assert _create(cloud, name="fourth", privateClusterConfig=blocked)[0] == 400, bad


# ---- item 2: NATs of one network and region


def _router(cloud: FakeCloud, name: str, network: str = "default") -> None:
    assert call(cloud.compute.host, "POST", ROUTERS, {"name": name, "network": network})[0] == 200


def _nat(name: str, *subnets: str) -> dict[str, Any]:
    if not subnets:
        return {"name": name, "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}
    return {
        "name": name,
        "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
        "subnetworks": [{"name": s, "sourceIpRangesToNat": ["ALL_IP_RANGES"]} for s in subnets],
    }


def _patch(cloud: FakeCloud, router: str, *nats: dict[str, Any]) -> tuple[int, Any]:
    return call(cloud.compute.host, "PATCH", f"{ROUTERS}/{router}", {"nats": list(nats)})


def test_a_nat_for_every_subnetwork_must_be_the_networks_only_one_in_the_region(
    cloud: FakeCloud,
) -> None:
    other = f"projects/{PROJECT}/global/networks/other"
    cloud.inventory.put("compute", other, {"name": "other", "autoCreateSubnetworks": False})
    for name in ("a", "b", "elsewhere"):
        _router(cloud, name, network="other" if name == "elsewhere" else "default")
    assert _patch(cloud, "a", _nat("a-nat"))[0] == 200
    status, body = _patch(cloud, "b", _nat("b-nat", "tpu-subnet"))
    assert status == 400 and "already serves every subnetwork" in body["error"]["message"]
    status, body = _patch(cloud, "b", _nat("b-nat"))
    assert status == 400 and "already has NAT a-nat" in body["error"]["message"]
    assert _patch(cloud, "elsewhere", _nat("x-nat"))[0] == 200  # another network
    assert _patch(cloud, "a", _nat("a-nat", "default"))[0] == 200  # a narrowed to one subnet
    assert _patch(cloud, "b", _nat("b-nat", "tpu-subnet"))[0] == 200


def test_two_nats_may_not_list_the_same_subnetwork(cloud: FakeCloud) -> None:
    _router(cloud, "a")
    _router(cloud, "b")
    assert _patch(cloud, "a", _nat("a-nat", "default"))[0] == 200
    status, body = _patch(cloud, "b", _nat("b-nat", "other", "default"))
    assert status == 400 and "subnetwork default is already served" in body["error"]["message"]
    status, _ = _patch(cloud, "a", _nat("a-nat", "default"), _nat("a-two", "default"))
    assert status == 400  # within one router too


# ---- item 3: subnets of an auto mode network


def _subnet(cloud: FakeCloud, name: str, cidr: str) -> tuple[int, Any]:
    body = {"name": name, "network": "default", "ipCidrRange": cidr}
    return call(cloud.compute.host, "POST", SUBNETS, body)


def test_a_subnet_of_an_auto_mode_network_lies_outside_its_range_and_other_subnets(
    cloud: FakeCloud,
) -> None:
    status, body = _subnet(cloud, "proxy", "10.129.0.0/23")  # the project's old suggestion
    assert status == 400 and "10.128.0.0/9" in body["error"]["message"]
    assert _subnet(cloud, "proxy", "10.126.0.0/23")[0] == 200
    status, body = _subnet(cloud, "again", "10.126.1.0/24")
    assert status == 400 and "existing subnetwork 'proxy'" in body["error"]["message"]
    assert call(cloud.compute.host, "GET", f"{SUBNETS}/proxy")[0] == 200
    assert call(cloud.compute.host, "DELETE", f"{SUBNETS}/proxy")[0] == 200


def test_the_stand_in_subnetwork_goes_through_the_fakes_rules(
    cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable, host in cloud.environment().items():
        monkeypatch.setenv(variable, host)
    resource = ComputeSubnetwork(ProviderConfig({"project": PROJECT, "region": REGION}))
    planned = {
        "name": "gemma4-gke-proxy-only",
        "network": "default",
        "ip_cidr_range": "10.129.0.0/23",
        "purpose": "REGIONAL_MANAGED_PROXY",
        "role": "ACTIVE",
    }
    with pytest.raises(ApiError, match=r"10\.128\.0\.0/9"):
        resource.create(planned)
    created = resource.create({**planned, "ip_cidr_range": "10.126.0.0/23"})
    assert created["id"].endswith("/subnetworks/gemma4-gke-proxy-only")
    assert resource.read(planned) is not None
    resource.delete(planned)
    assert resource.read(planned) is None
