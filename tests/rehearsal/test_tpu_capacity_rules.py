"""The TPU fake's capacity rules (tools/rehearsal/fakes/tpu_rules.py): a stockout by zone, type and
provisioning fails the create's operation with code 8 and Google's words; a spent quota refuses the
call with 429; elsewhere the node is created. And the product's classifier reads both as a reason
to try the next rung, as the real provider prints them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_tpu_api import FakeTpuApi
from tests.rehearsal.test_rehearsal_node_rules import call
from tpudeploy.tpuvm.capacity_errors import classify

WEST, CENTRAL = "projects/p/locations/us-west4-a", "projects/p/locations/us-central1-a"
SPOT: dict[str, object] = {"acceleratorType": "v5litepod-1", "schedulingConfig": {"spot": True}}
ON_DEMAND: dict[str, object] = {"acceleratorType": "v5litepod-1"}


@pytest.fixture
def tpu() -> Iterator[FakeTpuApi]:
    with FakeTpuApi() as fake:
        fake.stockouts.add(("us-west4-a", "v5litepod-1", "spot"))
        fake.spent_quotas.add(("us-central1", "on-demand"))
        yield fake


def _operation_error(tpu: FakeTpuApi, parent: str, body: dict[str, object]) -> object:
    status, op = call(tpu.host, "POST", f"/v2/{parent}/nodes?nodeId=n", body)
    assert status == 200
    _, done = call(tpu.host, "GET", f"/v2/{op['name']}")
    return done.get("error")


def test_a_stockout_fails_the_operation_and_leaves_no_node(tpu: FakeTpuApi) -> None:
    error = _operation_error(tpu, WEST, SPOT)
    assert isinstance(error, dict) and error["code"] == 8
    assert error["message"].startswith('There is no more capacity in the zone "us-west4-a"; you')
    assert tpu.node(f"{WEST}/nodes/n") is None and tpu.billing() == []
    # The stand-in provider relays it as the real one does; the walk reads it as a stockout.
    relayed = f"Error waiting for Creating Vm: Error code 8, message: {error['message']}"
    found = classify(relayed)
    assert found is not None and found.kind == "stockout"


def test_the_stockout_is_by_zone_and_provisioning(tpu: FakeTpuApi) -> None:
    assert _operation_error(tpu, WEST, ON_DEMAND) is None  # on-demand in the same zone: fine
    assert _operation_error(tpu, CENTRAL, SPOT) is None  # spot in another zone: fine


def test_a_spent_quota_refuses_the_call(tpu: FakeTpuApi) -> None:
    status, body = call(tpu.host, "POST", f"/v2/{CENTRAL}/nodes?nodeId=n", ON_DEMAND)
    assert status == 429 and body["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert "'tpu-v5s-litepod-serving' has been exceeded" in body["error"]["message"]
    found = classify(f"Error: googleapi: Error 429: {body['error']['message']}")
    assert found is not None and found.kind == "quota"
