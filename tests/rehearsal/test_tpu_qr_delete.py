"""Deleting a queued resource in the fake TPU API, as Google documents it (issue 39: a flex-start
node's idle stop deletes its own queued resource): an ACTIVE one goes only with force=true, and
the caller needs tpu.queuedResources.delete through a project grant. Two deployments in one
project: the grant reaches no farther than the project, so what it cannot refuse is said here."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fake_tpu_api import FakeTpuApi
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.tpu_rules import QR_DELETABLE_WITHOUT_FORCE

P = "qr-unit"
PARENT = f"projects/{P}/locations/us-central1-a"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
END = NOW + timedelta(hours=2)


def call(host: str, method: str, path: str, token: str | None = None, body: Any = None) -> int:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{host}{path}", data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        call.last_error = json.loads(exc.read())["error"]["message"]  # type: ignore[attr-defined]
        return exc.code


def _qr_body(node_id: str) -> dict[str, Any]:
    return {
        "provisioningModel": "FLEX_START",
        "tpu": {"nodeSpec": [{"parent": PARENT, "nodeId": node_id, "node": {}}]},
    }


def _active(tpu: FakeTpuApi, qr_id: str) -> str:
    """A queued resource whose node runs; its path."""
    name = f"{PARENT}/queuedResources/{qr_id}"
    tpu.add_queued_resource(name, _qr_body(qr_id.removesuffix("-qr")), ["ACTIVE"])
    return name


@pytest.mark.parametrize("version", ["v2", "v2alpha1"])
def test_an_active_queued_resource_goes_only_with_force(version: str) -> None:
    with FakeTpuApi() as tpu:
        name = _active(tpu, "a-qr")
        assert call(tpu.host, "DELETE", f"/{version}/{name}") == 400
        assert "force=true" in call.last_error  # type: ignore[attr-defined]
        assert tpu.exists(name)
        assert call(tpu.host, "DELETE", f"/{version}/{name}?force=true") == 200
        assert call(tpu.host, "GET", f"/v2alpha1/{name}") == 200  # DELETING
        assert call(tpu.host, "GET", f"/v2alpha1/{name}") == 404
        # Its node goes with it: nothing bills.
        assert tpu.billing() == []


@pytest.mark.parametrize("state", sorted(QR_DELETABLE_WITHOUT_FORCE))
def test_a_queued_resource_with_no_running_node_goes_without_force(state: str) -> None:
    with FakeTpuApi() as tpu:
        name = f"{PARENT}/queuedResources/w-qr"
        tpu.add_queued_resource(name, _qr_body("w"), [state])
        assert call(tpu.host, "DELETE", f"/v2/{name}") == 200


def _inventory() -> Inventory:
    inv = Inventory()
    inv.enable(P, "tpu.googleapis.com")
    role = f"projects/{P}/roles/tpudeployNodeStop_a"
    inv.put("iam", role, {"name": role, "includedPermissions": ["tpu.queuedResources.delete"]})
    # Deployment a's idle grant (stacks/tpuvm/node.py): its node's account, until its end.
    inv.policy("cloudresourcemanager", f"projects/{P}").append(
        {
            "role": role,
            "members": [f"serviceAccount:a-node@{P}.iam.gserviceaccount.com"],
            "condition": {
                "title": "idle-stop-until-deadline",
                "expression": f'request.time < timestamp("{END.strftime("%Y-%m-%dT%H:%M:%SZ")}")',
            },
        }
    )
    return inv


@pytest.fixture
def two() -> Iterator[tuple[FakeTpuApi, Inventory, str, str]]:
    """Two flex-start deployments, a (idle stop on) and b (off), in one project."""
    inv = _inventory()
    with FakeTpuApi(inventory=inv) as tpu:
        yield tpu, inv, _active(tpu, "a-qr"), _active(tpu, "b-qr")


def test_a_node_without_the_grant_cannot_delete_a_queued_resource(
    two: tuple[FakeTpuApi, Inventory, str, str],
) -> None:
    tpu, inv, a, _ = two
    b_node = inv.mint_token(f"serviceAccount:b-node@{P}.iam.gserviceaccount.com", at=NOW)
    assert call(tpu.host, "DELETE", f"/v2/{a}?force=true", b_node) == 403
    assert "tpu.queuedResources.delete" in call.last_error  # type: ignore[attr-defined]
    assert tpu.exists(a)


def test_the_grant_ends_with_the_run(two: tuple[FakeTpuApi, Inventory, str, str]) -> None:
    tpu, inv, a, _ = two
    late = inv.mint_token(
        f"serviceAccount:a-node@{P}.iam.gserviceaccount.com", at=END + timedelta(minutes=1)
    )
    assert call(tpu.host, "DELETE", f"/v2/{a}?force=true", late) == 403
    on_time = inv.mint_token(f"serviceAccount:a-node@{P}.iam.gserviceaccount.com", at=NOW)
    assert call(tpu.host, "DELETE", f"/v2/{a}?force=true", on_time) == 200


def test_the_residual_risk_the_grant_cannot_narrow(
    two: tuple[FakeTpuApi, Inventory, str, str],
) -> None:
    """Cloud TPU gives IAM conditions no resource name (iamrules.ATTRIBUTES), so a's grant
    reaches b's queued resource until a's end: docs/security.md and `make check` say so. A
    condition naming a's queued resource would never grant at all."""
    tpu, inv, _, b = two
    a_node = inv.mint_token(f"serviceAccount:a-node@{P}.iam.gserviceaccount.com", at=NOW)
    assert call(tpu.host, "DELETE", f"/v2/{b}?force=true", a_node) == 200
    binding = inv.policy("cloudresourcemanager", f"projects/{P}")[0]
    binding["condition"]["expression"] += f' && resource.name == "{PARENT}/queuedResources/a-qr"'
    tpu2_a = f"{PARENT}/queuedResources/a-qr"
    assert call(tpu.host, "DELETE", f"/v2/{tpu2_a}?force=true", a_node) == 403
