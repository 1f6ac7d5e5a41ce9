"""A GKE deployment's share of its VPC (issue 36, items 1, 2, 3 and 5): a control-plane /28 of
its own, checked at `make check`; a NAT for its own subnetwork; the proxy-only subnet outside an
auto mode network's range; a cluster version GKE still offers, the documented floor checked."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import Synthesizer, gke_local_raw, terraform_env
from tpudeploy import facts
from tpudeploy.config import parse_config
from tpudeploy.gke import vpc
from tpudeploy.platform import platform_for

# Local mode (no pipeline = true): what its own stacks declare; the pipeline mode is tests/gitops.
RAW = gke_local_raw()


def _cfg(**tables: Any) -> Any:
    raw = {**RAW}
    for table, values in tables.items():
        raw[table] = {**raw.get(table, {}), **values}
    return parse_config(raw)


def _errors(cfg: Any) -> dict[str, str]:
    return {f.key: f.message for f in vpc.findings(cfg) if f.severity == "error"}


def test_each_deployment_derives_its_own_private_control_plane_range() -> None:
    names = [f"gemma4-gke-{i}" for i in range(40)]
    ranges = [ipaddress.IPv4Network(vpc.derived_control_plane_cidr(n)) for n in names]
    assert all(r.prefixlen == 28 and r.subnet_of(vpc.DERIVED_FROM) for r in ranges)
    assert len(set(ranges)) > 35  # 40 names over 4,096 blocks: a few collisions at most
    assert vpc.derived_control_plane_cidr("a") == vpc.derived_control_plane_cidr("a")
    first, second = _cfg(), parse_config({**RAW, "name": "gemma4-gke-b"})
    assert vpc.control_plane_cidr(first) != vpc.control_plane_cidr(second)
    pinned = _cfg(gke={"control_plane_cidr": "172.16.0.32/28"})
    assert vpc.control_plane_cidr(pinned) == "172.16.0.32/28"


def test_make_check_refuses_a_control_plane_range_the_network_already_uses() -> None:
    assert _errors(_cfg()) == {}
    auto = _errors(_cfg(gke={"control_plane_cidr": "10.130.0.0/28"}))
    assert "10.128.0.0/9" in auto["gke.control_plane_cidr"]
    custom = _cfg(network={"subnet_mode": "custom"}, gke={"control_plane_cidr": "10.130.0.0/28"})
    assert _errors(custom) == {}
    docker = vpc.findings(_cfg(gke={"control_plane_cidr": "172.17.0.0/28"}))
    assert [f.severity for f in docker] == ["warning"] and "172.17.0.0/16" in docker[0].message
    proxy = {"gateway": True, "certificate": "c", "proxy_subnet_cidr": "10.126.0.0/23"}
    gke = {"control_plane_cidr": "10.126.1.16/28", "min_version": "1.34.0-gke.1626000"}
    clash = _errors(_cfg(routing=proxy, gke=gke))
    assert "proxy_subnet_cidr = 10.126.0.0/23" in clash["gke.control_plane_cidr"]
    assert "e.g. " in clash["gke.control_plane_cidr"]  # the fix names a free range
    # ... and it reaches make check through the platform's findings.
    shown = [
        str(f)
        for f in platform_for(_cfg(routing=proxy, gke=gke)).findings(_cfg(routing=proxy, gke=gke))
    ]
    assert any(s.startswith("error: gke.control_plane_cidr") for s in shown)


def test_a_deployment_without_its_own_nat_is_told_where_its_egress_comes_from() -> None:
    assert not [f for f in vpc.findings(_cfg()) if f.key == "network.nat"]
    (note,) = [f for f in vpc.findings(_cfg(network={"nat": False})) if f.key == "network.nat"]
    assert note.severity == "note" and "subnetwork default in us-west4" in note.message
    shared = _cfg(network={"network": "projects/host-1/global/networks/shared"})
    assert "host project" in _errors(shared)["network.nat"]


def test_the_suggested_proxy_subnet_fits_an_auto_mode_network_and_the_old_one_is_refused() -> None:
    gke = {"min_version": "1.34.0-gke.1626000"}
    old = {"gateway": True, "certificate": "c", "proxy_subnet_cidr": "10.129.0.0/23"}
    refused = _errors(_cfg(routing=old, gke=gke))
    assert "10.128.0.0/9" in refused["routing.proxy_subnet_cidr"]
    assert '"10.126.0.0/23"' in refused["routing.proxy_subnet_cidr"]
    suggested = {**old, "proxy_subnet_cidr": "10.126.0.0/23"}
    assert "routing.proxy_subnet_cidr" not in _errors(_cfg(routing=suggested, gke=gke))
    custom = _cfg(routing=old, gke=gke, network={"subnet_mode": "custom"})
    assert "routing.proxy_subnet_cidr" not in _errors(custom)
    assert not ipaddress.IPv4Network("10.126.0.0/23").overlaps(vpc.AUTO_MODE_RANGE)


def test_the_cluster_stack_asks_for_an_offered_version_its_own_range_and_nat(
    synth: Synthesizer,
) -> None:
    cfg = parse_config(RAW)
    stack = synth(RAW)[cfg.gke_stack_name]
    cluster = stack["resource"]["google_container_cluster"]["cluster"]
    versions = stack["data"]["google_container_engine_versions"]["versions"]
    assert versions["location"] == cfg.zone
    channel = cfg.gke.release_channel
    assert cluster["min_master_version"] == (
        "${data.google_container_engine_versions.versions.release_channel_default_version"
        f'["{channel}"]}}'
    )
    # The documented floor stays: a precondition over the version the channel offers.
    (pre,) = cluster["lifecycle"]["precondition"]
    assert f">= {int('1' + '033' + '000' + '0001712000')})" in pre["condition"]
    assert cfg.gke.min_version == facts.GKE_FLEX_START_TPU_MIN_VERSION
    master = cluster["private_cluster_config"]["master_ipv4_cidr_block"]
    assert master == vpc.derived_control_plane_cidr(cfg.name) != "172.16.0.32/28"
    nat = stack["resource"]["google_compute_router_nat"]["nat"]
    assert nat["source_subnetwork_ip_ranges_to_nat"] == "LIST_OF_SUBNETWORKS"
    assert nat["subnetwork"] == [{"name": "default", "source_ip_ranges_to_nat": ["ALL_IP_RANGES"]}]
    assert "ALL_SUBNETWORKS" not in json.dumps(stack)


def test_terraform_refuses_a_channel_default_below_min_version(
    synth: Synthesizer, terraform: str, tmp_path: Path
) -> None:
    """The synthesized precondition, evaluated by the real Terraform with the data source's
    value replaced by a version: below the floor false, at or above it true."""
    cfg = parse_config(RAW)
    cluster = synth(RAW)[cfg.gke_stack_name]["resource"]["google_container_cluster"]["cluster"]
    condition = cluster["lifecycle"]["precondition"][0]["condition"]
    assert condition.startswith("${") and condition.endswith("}")
    ref = cluster["min_master_version"].removeprefix("${").removesuffix("}")
    for version, holds in [
        ("1.33.0-gke.1711999", "false"),
        ("1.32.9-gke.9999999", "false"),
        (cfg.gke.min_version, "true"),
        ("1.34.3-gke.1300000", "true"),
    ]:
        expr = condition[2:-1].replace(ref, json.dumps(version))
        shown = subprocess.run(
            [terraform, "console"],
            input=expr,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=terraform_env(tmp_path),
            check=True,
        ).stdout.strip()
        assert shown == holds, (version, shown)
