"""The ladder's classifier: each documented capacity or quota error moves to the next rung; an
auth, permission, config or unknown error stops the walk."""

from __future__ import annotations

import pytest

from tpudeploy.tpuvm.capacity_errors import classify

# Each as it reaches `make deploy`: Terraform's error line relaying the TPU API's message.
NEXT_RUNG = [
    pytest.param(
        "Error: Error waiting to create Vm: Error waiting for Creating Vm: Error code 8, message: "
        'There is no more capacity in the zone "us-west4-a"; you can try in another zone where '
        "Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) "
        "[EID: 0x9171da80a38afc2]",
        "stockout",
        id="stockout-operation",
    ),
    pytest.param(
        "Error: Error creating Vm: googleapi: Error 429: Quota limit "
        "'TPUV5sLitepodServingPerProjectPerRegionForTPUAPI' has been exceeded. Limit: 0 in "
        "region us-west4.",
        "quota",
        id="quota-limit",
    ),
    pytest.param(
        "Error: googleapi: Error 403: QUOTA_EXCEEDED", "quota", id="quota-exceeded-status"
    ),
    pytest.param(
        "queued resource gemma4-v5e-qr went FAILED while waiting: Insufficient quota to satisfy "
        "the request",
        "quota",
        id="queued-resource-quota",
    ),
    pytest.param(
        "tpudeploy: timed out after 1h0m (timeout 3600 s) waiting for gemma4-v5e-qr to become "
        "ACTIVE; last state WAITING_FOR_RESOURCES. No capacity came in time: raise "
        "flex_start_timeout or try another time",
        "stockout",
        id="flex-start-wait",
    ),
]
STOP = [
    pytest.param(
        "Error: googleapi: Error 401: Request had invalid authentication credentials.", id="auth"
    ),
    pytest.param(
        "Error: googleapi: Error 403: Permission 'tpu.nodes.create' denied on resource",
        id="permission",
    ),
    pytest.param(
        "Error: googleapi: Error 400: Service account gemma4-v5e-node@p.iam.gserviceaccount.com "
        "does not exist.",
        id="config",
    ),
    pytest.param(
        "Error: googleapi: Error 400: Cloud TPU received a bad request. FLEX_START provisioning "
        "model is not supported for accelerator type",
        id="flex-refused-zone",
    ),
    pytest.param("Error: googleapi: Error 503: The service is currently unavailable.", id="5xx"),
    pytest.param("", id="nothing-printed"),
]


@pytest.mark.parametrize(("output", "kind"), NEXT_RUNG)
def test_a_documented_capacity_or_quota_error_moves_to_the_next_rung(
    output: str, kind: str
) -> None:
    found = classify("Planning...\n" + output + "\n  with google_tpu_v2_vm.node,\n")
    assert found is not None and found.kind == kind
    assert found.line == output.strip()[:300]
    assert found.source.startswith(("cloud.google.com", "github.com"))


@pytest.mark.parametrize("output", STOP)
def test_any_other_error_stops_the_walk(output: str) -> None:
    assert classify(output) is None
