"""The fake Monitoring API refuses what the real one refuses: a disabled API, a field or enum
value its discovery document does not define; it keeps what the stacks send."""

from __future__ import annotations

from tests.rehearsal.test_rehearsal_node_rules import call
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.monitoring import FakeMonitoring
from tpudeploy.alertpolicies import POLICIES, alert_policy, email_channel
from tpudeploy.config import parse_config
from tpudeploy.dashboard import dashboard

PROJECT = "monitoring-unit"
CFG = parse_config({"project": PROJECT})


def test_the_api_must_be_enabled_then_takes_the_dashboard_and_gives_it_a_name() -> None:
    with FakeMonitoring(Inventory()) as fake:
        path = f"/v1/projects/{PROJECT}/dashboards"
        board = dashboard(CFG, selector='job="x"')
        status, body = call(fake.host, "POST", path, board)
        assert status == 403 and "SERVICE_DISABLED" in body["error"]["message"]
        fake.inventory.enable(PROJECT, "monitoring.googleapis.com")
        status, body = call(fake.host, "POST", path, board)
        assert status == 200 and body["name"].startswith(f"projects/{PROJECT}/dashboards/")
        stored = call(fake.host, "GET", f"/v1/{body['name']}")[1]
        assert stored["displayName"] == board["displayName"]
        assert call(fake.host, "DELETE", f"/v1/{body['name']}")[0] == 200
        assert call(fake.host, "GET", f"/v1/{body['name']}")[0] == 404


def test_an_unknown_field_or_value_is_refused_with_400() -> None:
    with FakeMonitoring(Inventory()) as fake:
        fake.inventory.enable(PROJECT, "monitoring.googleapis.com")
        board = dashboard(CFG, selector='job="x"')
        board["mosaicLayout"]["legacyRows"] = []
        status, body = call(fake.host, "POST", f"/v1/projects/{PROJECT}/dashboards", board)
        assert status == 400 and 'Unknown name "legacyRows"' in body["error"]["message"]
        policy = alert_policy(CFG, POLICIES[0], selector='job="x"', channels=[])
        policy["combiner"] = "XOR"
        status, body = call(fake.host, "POST", f"/v3/projects/{PROJECT}/alertPolicies", policy)
        assert status == 400 and "'XOR' is not one of" in body["error"]["message"]
        policy["combiner"] = "OR"
        assert call(fake.host, "POST", f"/v3/projects/{PROJECT}/alertPolicies", policy)[0] == 200
        channel = email_channel(CFG, "oncall@example.com")
        path = f"/v3/projects/{PROJECT}/notificationChannels"
        assert call(fake.host, "POST", path, channel)[0] == 200
