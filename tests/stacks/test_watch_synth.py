"""The dashboard and alert policies as the stacks declare them: the dashboard in the long-lived
secrets stack, the policies in the billing stack, each accepted by the Monitoring API's schema,
and two deployments in one project sharing none. Reuses the session's synths (no new one)."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Stacks, gke_configs, resources
from tools.rehearsal.fakes.monitoring_rules import problems
from tools.rehearsal.resources.base import ProviderConfig
from tools.rehearsal.resources.monitoring import MonitoringAlertPolicy
from tpudeploy.config import parse_config


def _dashboards(stack: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        json.loads(r["dashboard_json"])
        for r in resources(stack, "google_monitoring_dashboard").values()
    ]


def _policies(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resources(stack, "google_monitoring_alert_policy")


def test_the_tpu_vm_declares_a_dashboard_and_its_alerts(default_stacks: Stacks) -> None:
    cfg = parse_config({})
    (board,) = _dashboards(default_stacks[cfg.secrets_stack_name])
    assert problems(board, "Dashboard") == []
    assert board["displayName"].startswith(f"{cfg.name}: ")
    assert not _dashboards(default_stacks[cfg.node_stack_name])
    policies = _policies(default_stacks[cfg.node_stack_name])
    assert set(policies) == {
        "alert-kv-wall",
        "alert-waiting",
        "alert-errors",
        "alert-boot-disagrees",
        # The node's Ops Agent ships vLLM's metrics: the absence alert too (issue 38).
        "alert-no-server",
    }
    assert not _policies(default_stacks[cfg.secrets_stack_name])


def _api_body(policy: dict[str, Any]) -> dict[str, Any]:
    """The request the provider sends for the synthesized arguments (the stand-in's mapping;
    Terraform's state holds a single nested block as a one-element list, the JSON as an object)."""
    state = {
        **policy,
        "documentation": [policy["documentation"]],
        "conditions": [
            {
                **c,
                "condition_prometheus_query_language": [c["condition_prometheus_query_language"]],
            }
            for c in policy["conditions"]
        ],
    }
    return MonitoringAlertPolicy(ProviderConfig({"project": "p"})).body(state)


def test_gke_pair_each_its_own_dashboard_policies_and_series(
    gke_pair: tuple[Stacks, Stacks],
) -> None:
    names: list[set[str]] = []
    for raw, stacks in zip(gke_configs(), gke_pair, strict=True):
        cfg = parse_config(raw)
        (board,) = _dashboards(stacks[cfg.secrets_stack_name])
        assert problems(board, "Dashboard") == []
        policies = _policies(stacks[cfg.serving_stack_name])
        # The cluster stack holds the deadline and its "stops soon" warning only (issue 38).
        # (its API body is checked in tests/shared/test_stopsoon.py and the rehearsal)
        assert set(_policies(stacks[cfg.gke_stack_name])) == {"alert-deadline-soon"}
        assert set(policies) == {
            "alert-kv-wall",
            "alert-waiting",
            "alert-no-server",
            "alert-errors",
            # the spot pool's preemptions (Compute Engine's audit entries of its VMs)
            "alert-preempted",
        }
        for policy in policies.values():
            body = _api_body(policy)
            assert problems(body, "AlertPolicy") == [], body
            query = body["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
            # vLLM's series by the cluster's label; the log-based metrics by their own name
            own_metric = f"user_{cfg.name.replace('-', '_')}_"
            assert f'cluster="{cfg.name}"' in query or own_metric in query
        names.append({board["displayName"], *(p["display_name"] for p in policies.values())})
    assert not names[0] & names[1]
