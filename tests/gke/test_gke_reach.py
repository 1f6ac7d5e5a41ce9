"""Who can reach a GKE deployment (issue 36, items 7 and 8): the control plane's authorized
networks and the Service's internal load balancer, as `make check` says them and as the stacks
declare them."""

from __future__ import annotations

from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import reach, replicaplan, summary
from tpudeploy.platform import platform_for


def _cfg(**sections: object) -> DeployConfig:
    return parse_config({"platform": "gke", **sections})


def test_no_ipv4_range_leaves_the_control_plane_open_and_check_warns_with_the_fix() -> None:
    for allowed in ([], ["2001:db8::/64"]):
        cfg = _cfg(network={"allowed_cidrs": allowed})
        assert reach.authorized_networks(cfg) == ()
        found = [f for f in platform_for(cfg).findings(cfg) if f.key == "network.allowed_cidrs"]
        assert [f.severity for f in found] == ["warning"]
        assert "from any address" in found[0].message and "/32" in found[0].message
        assert "from ANY address" in reach.control_plane_line(cfg)


def test_ipv4_ranges_become_the_authorized_networks_and_the_warning_goes() -> None:
    cfg = _cfg(network={"allowed_cidrs": ["2001:db8::/64", "203.0.113.7/32"]})
    assert reach.authorized_networks(cfg) == ("203.0.113.7/32",)
    assert not [f for f in platform_for(cfg).findings(cfg) if f.key == "network.allowed_cidrs"]
    assert "only from 203.0.113.7/32 (authorized networks)" in reach.control_plane_line(cfg)


def test_the_endpoint_is_regional_unless_global_access_is_asked_for() -> None:
    cfg = _cfg()
    assert reach.GLOBAL_ACCESS_ANNOTATION not in reach.service_annotations(cfg)
    assert "clients in us-west4 of VPC default only" in reach.endpoint_line(cfg)
    assert "nothing on the internet" in reach.endpoint_line(cfg)
    wide = _cfg(gke={"global_access": True})
    assert reach.service_annotations(wide)[reach.GLOBAL_ACCESS_ANNOTATION] == "true"
    assert "any region of VPC default" in reach.endpoint_line(wide)


def test_check_says_who_reaches_what_and_what_is_unfinished() -> None:
    text = "\n".join(summary.summary(_cfg()))
    assert "control plane: " in text and "endpoint: " in text
    assert "unfinished: metrics adapter" in text
    assert "unfinished: the system node's price" in text
    assert "Gateway's load balancer is not priced" not in text


def test_the_deadline_line_prices_what_it_leaves() -> None:
    text = "\n".join(summary.summary(_cfg()))
    deadline = next(line for line in text.splitlines() if line.startswith("deadline:"))
    rule = next(
        rate for item, rate in replicaplan.replica_plan(_cfg()).idle_items if "forwarding" in item
    )
    assert f"load balancer rule (${rule:.4f}/h until make destroy-all)" in deadline
