"""Tests for the flex-start QueuedResource client, through the real discovery client and a fake."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_tpu_api import FakeTpuApi
from tpudeploy.tpuvm import queued_resource as qr
from tpudeploy.tpuvm.queued_resource import (
    QueuedResourceError,
    QueuedResourceSpec,
    TpuApi,
)

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "gemma-demo-123"
ZONE = "us-west4-a"
FOUR_HOURS = 4 * 60 * 60
SCRIPT = "#!/bin/bash\nset -euo pipefail\necho boot\n"
SA = f"tpu-node@{PROJECT}.iam.gserviceaccount.com"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


def make_spec(**overrides: Any) -> QueuedResourceSpec:
    values: dict[str, Any] = {
        "project": PROJECT,
        "zone": ZONE,
        "queued_resource_id": "gemma4-qr",
        "node_id": "gemma4-qr-node",
        "accelerator_type": "v5litepod-1",
        "runtime_version": "v2-alpha-tpuv5-lite",
        "startup_script": SCRIPT,
        "service_account_email": SA,
        "network": "default",
        "max_run_duration_seconds": FOUR_HOURS,
        "metadata": {"enable-oslogin": "TRUE", "block-project-ssh-keys": "TRUE"},
        "tags": ["gemma4-vllm"],
        "labels": {"app": "gemma4"},
    }
    values.update(overrides)
    return QueuedResourceSpec(**values)


@pytest.fixture
def spec() -> QueuedResourceSpec:
    return make_spec()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTpuApi]:
    with FakeTpuApi() as server:
        monkeypatch.setenv("TPU_EMULATOR_HOST", server.host)
        yield server


@pytest.fixture
def api(fake: FakeTpuApi) -> TpuApi:
    return TpuApi(sleep=no_wait, log=io.StringIO())


def no_wait(seconds: float) -> None:
    """googleapiclient's wait between retries, skipped."""


def run_create(spec: QueuedResourceSpec, api: TpuApi, **kwargs: Any) -> tuple[dict[str, Any], str]:
    out = io.StringIO()
    result = qr.create(spec, api=api, poll=0.005, out=out, **kwargs)
    return result, out.getvalue()


def methods(fake: FakeTpuApi) -> list[str]:
    return [f"{r.method} {r.path.rsplit('/', 2)[-2]}" for r in fake.requests]


# --------------------------------------------------------------------------- body


def discovery_schemas() -> dict[str, Any]:
    from googleapiclient import discovery_cache

    doc = discovery_cache.get_static_doc("tpu", "v2alpha1")
    assert doc is not None
    schemas: dict[str, Any] = json.loads(doc)["schemas"]
    return schemas


def test_body_is_exact(spec: QueuedResourceSpec) -> None:
    body = spec.to_body()
    expected_node = {
        "acceleratorType": "v5litepod-1",
        "runtimeVersion": "v2-alpha-tpuv5-lite",
        "metadata": {
            "enable-oslogin": "TRUE",
            "block-project-ssh-keys": "TRUE",
            "startup-script": SCRIPT,
        },
        "serviceAccount": {"email": SA, "scope": [CLOUD_PLATFORM]},
        "networkConfig": {"network": "default", "enableExternalIps": True},
        # The same hardening as the VM path (google_tpu_v2_vm's shielded_instance_config).
        "shieldedInstanceConfig": {"enableSecureBoot": True},
        "tags": ["gemma4-vllm"],
        "labels": {"app": "gemma4", "tpudeploy-spec": spec.fingerprint()},
    }
    assert body == {
        "provisioningModel": "FLEX_START",
        "runDuration": {"maxRunDuration": f"{FOUR_HOURS}s"},
        "tpu": {
            "nodeSpec": [
                {
                    "parent": f"projects/{PROJECT}/locations/{ZONE}",
                    "nodeId": "gemma4-qr-node",
                    "node": expected_node,
                }
            ]
        },
    }


def test_body_fields_exist_in_discovery_doc_and_no_spot_tier(spec: QueuedResourceSpec) -> None:
    schemas = discovery_schemas()
    body = spec.to_body()
    assert set(body) <= set(schemas["QueuedResource"]["properties"])
    assert "FLEX_START" in schemas["QueuedResource"]["properties"]["provisioningModel"]["enum"]
    assert set(body["runDuration"]) <= set(schemas["RunDuration"]["properties"])
    node_spec = body["tpu"]["nodeSpec"][0]
    assert set(node_spec) <= set(schemas["NodeSpec"]["properties"])
    node = node_spec["node"]
    assert set(node) <= set(schemas["Node"]["properties"])
    assert set(node["serviceAccount"]) <= set(schemas["ServiceAccount"]["properties"])
    assert set(node["networkConfig"]) <= set(schemas["NetworkConfig"]["properties"])
    # FLEX_START is the only provisioning statement: no spot/guaranteed/best-effort tier.
    for tier in ("spot", "guaranteed", "bestEffort", "reservationName", "queueingPolicy"):
        assert tier not in body
    assert "schedulingConfig" not in node
    assert "spot" not in json.dumps(body).lower().replace("block-project-ssh-keys", "")


def test_subnetwork_and_private_ips(spec: QueuedResourceSpec) -> None:
    body = make_spec(subnetwork="tpu-subnet", enable_external_ips=False).to_body()
    assert body["tpu"]["nodeSpec"][0]["node"]["networkConfig"] == {
        "network": "default",
        "subnetwork": "tpu-subnet",
        "enableExternalIps": False,
    }


def test_fingerprint_changes_with_startup_script(spec: QueuedResourceSpec) -> None:
    assert make_spec(startup_script=SCRIPT + "echo two\n").fingerprint() != spec.fingerprint()
    assert make_spec().fingerprint() == spec.fingerprint()


# --------------------------------------------------------------------------- spec JSON


def test_json_round_trip(spec: QueuedResourceSpec) -> None:
    again = QueuedResourceSpec.from_json(spec.to_json())
    assert again == spec
    assert again.to_body() == spec.to_body()


def test_json_defaults() -> None:
    data = json.loads(make_spec().to_json())
    for key in ("scopes", "tags", "labels", "metadata", "subnetwork", "enable_external_ips"):
        del data[key]
    loaded = QueuedResourceSpec.from_json(json.dumps(data))
    assert loaded.scopes == (CLOUD_PLATFORM,)
    assert loaded.enable_external_ips is True
    assert loaded.subnetwork is None


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d.pop("project"), "missing required key(s) ['project']"),
        (lambda d: d.update(colour="blue"), "unknown key(s) ['colour']"),
        (lambda d: d.update(max_run_duration_seconds="4h"), "max_run_duration_seconds='4h'"),
        (lambda d: d.update(max_run_duration_seconds=8 * 86400), "7 days"),
        (lambda d: d.update(max_run_duration_seconds=True), "integer"),
        (lambda d: d.update(zone="us-west4"), "zone='us-west4'"),
        (lambda d: d.update(node_id="Gemma_Node"), "node_id='Gemma_Node'"),
        (lambda d: d.update(service_account_email="nobody"), "service_account_email"),
        (lambda d: d.update(tags="gemma"), "tags='gemma'"),
        (lambda d: d.update(labels={"App": "x"}), "labels['App']"),
        (lambda d: d.update(metadata={"startup-script": "x"}), "startup_script"),
        (lambda d: d.update(enable_external_ips="yes"), "enable_external_ips='yes'"),
        (lambda d: d.update(startup_script=""), "startup_script=''"),
    ],
)
def test_invalid_spec_is_one_clear_line(mutate: Any, fragment: str) -> None:
    data = json.loads(make_spec().to_json())
    mutate(data)
    with pytest.raises(ValueError) as info:
        QueuedResourceSpec.from_json(json.dumps(data))
    assert fragment in str(info.value)
    assert str(info.value).startswith("queued resource spec")


# Each refusal as the user reads it: the spec key, the value given, what to write instead.
SPEC_REFUSALS = [
    ({"project": ""}, "project", "", "must be a non-empty string"),
    ({"network": 5}, "network", 5, "must be a non-empty string"),
    ({"project": "Bad_Project"}, "project", "Bad_Project", "must be a Google Cloud project id"),
    ({"zone": "us-west4"}, "zone", "us-west4", "must be a zone such as 'us-west4-a'"),
    ({"queued_resource_id": "qr/1"}, "queued_resource_id", "qr/1", "use [A-Za-z0-9_.~+%-]"),
    (
        {"node_id": "Gemma_Node"},
        "node_id",
        "Gemma_Node",
        "use lowercase letters, digits and '-', start with a letter",
    ),
    ({"service_account_email": "nobody"}, "service_account_email", "nobody", "must be an email"),
    (
        {"max_run_duration_seconds": "4h"},
        "max_run_duration_seconds",
        "4h",
        "must be an integer number of seconds",
    ),
    (
        {"max_run_duration_seconds": True},
        "max_run_duration_seconds",
        True,
        "must be an integer number of seconds",
    ),
    (
        {"max_run_duration_seconds": 0},
        "max_run_duration_seconds",
        0,
        "must be between 1 and 604800 (7 days, flex-start's maximum)",
    ),
    (
        {"max_run_duration_seconds": 604801},
        "max_run_duration_seconds",
        604801,
        "must be between 1 and 604800 (7 days, flex-start's maximum)",
    ),
    ({"subnetwork": ""}, "subnetwork", "", "must be a non-empty string or null"),
    ({"subnetwork": " "}, "subnetwork", " ", "must be a non-empty string or null"),
    ({"subnetwork": 7}, "subnetwork", 7, "must be a non-empty string or null"),
    ({"enable_external_ips": "yes"}, "enable_external_ips", "yes", "must be true or false"),
    ({"enable_secure_boot": 1}, "enable_secure_boot", 1, "must be true or false"),
    ({"description": 5}, "description", 5, "must be a string"),
    ({"metadata": {"a": 1}}, "metadata['a']", 1, "keys and values must be strings"),
    ({"labels": {"a": 1}}, "labels['a']", 1, "keys and values must be strings"),
    (
        {"metadata": {"startup-script": "echo"}},
        "metadata['startup-script']",
        "...",
        "set it through startup_script, not metadata",
    ),
    (
        {"labels": {"App": "x"}},
        "labels['App']",
        "App",
        "key must be lowercase [a-z0-9_-], not 'tpudeploy-spec'",
    ),
    (
        {"labels": {"tpudeploy-spec": "x"}},
        "labels['tpudeploy-spec']",
        "tpudeploy-spec",
        "key must be lowercase [a-z0-9_-], not 'tpudeploy-spec'",
    ),
    (
        {"labels": {"app": "Gemma 4"}},
        "labels['app']",
        "Gemma 4",
        "value must be at most 63 of [a-z0-9_-]",
    ),
    ({"scopes": [CLOUD_PLATFORM, ""]}, "scopes", "", "items must be non-empty strings"),
    ({"tags": ["gemma4-vllm", 5]}, "tags", 5, "items must be non-empty strings"),
    ({"scopes": []}, "scopes", [], f"give at least one scope, e.g. {CLOUD_PLATFORM}"),
]


@pytest.mark.parametrize(("change", "key", "value", "fix"), SPEC_REFUSALS)
def test_each_spec_refusal_names_key_value_and_fix(
    change: dict[str, Any], key: str, value: object, fix: str
) -> None:
    with pytest.raises(ValueError) as info:
        make_spec(**change)
    assert str(info.value) == f"queued resource spec: {key}={value!r}: {fix}"


@pytest.mark.parametrize(
    ("seconds", "ok"), [(1, True), (604800, True), (0, False), (604801, False)]
)
def test_run_duration_bounds_are_one_second_to_seven_days(seconds: int, ok: bool) -> None:
    if ok:
        assert make_spec(max_run_duration_seconds=seconds).to_body()["runDuration"] == {
            "maxRunDuration": f"{seconds}s"
        }
    else:
        with pytest.raises(ValueError, match="7 days"):
            make_spec(max_run_duration_seconds=seconds)


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        ("metadata", "x", "object"),
        ("labels", ["a"], "object"),
        ("scopes", CLOUD_PLATFORM, "list"),
        ("tags", "gemma4-vllm", "list"),
    ],
)
def test_spec_json_of_the_wrong_shape_names_the_shape(key: str, value: object, kind: str) -> None:
    data = json.loads(make_spec().to_json())
    data[key] = value
    with pytest.raises(ValueError) as info:
        QueuedResourceSpec.from_json(json.dumps(data))
    assert str(info.value) == (
        f"queued resource spec: {key}={value!r}: must be a JSON {kind} of strings"
    )


def test_the_fingerprint_format_is_stable(spec: QueuedResourceSpec) -> None:
    """Running queued resources carry it as their tpudeploy-spec label: a new format would make
    the next deploy take every running node for a different spec. It is 16 hex digits of
    sha256 over the request body without the label, keys sorted."""
    body = spec.to_body()
    label = body["tpu"]["nodeSpec"][0]["node"]["labels"].pop("tpudeploy-spec")
    expected = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    assert label == spec.fingerprint() == expected


def test_the_terraform_input_lists_keys_in_sorted_order(spec: QueuedResourceSpec) -> None:
    """terraform_data replaces the queued resource when its input text changes: sorted keys keep
    that text independent of the order the spec's fields are declared in."""
    data = json.loads(spec.to_json())
    assert list(data) == sorted(data)
    assert list(data["metadata"]) == sorted(data["metadata"])
    assert QueuedResourceSpec.from_json(spec.to_json()) == spec


def test_the_spec_keeps_its_own_copies_of_what_it_was_given() -> None:
    """A frozen spec: changing the caller's dicts and lists afterwards changes nothing sent."""
    metadata = {"enable-oslogin": "TRUE"}
    labels = {"app": "gemma4"}
    scopes = [CLOUD_PLATFORM]
    spec = make_spec(metadata=metadata, labels=labels, scopes=scopes)
    body, fingerprint = spec.to_body(), spec.fingerprint()
    metadata["extra"] = "1"
    labels["extra"] = "1"
    scopes.append("https://www.googleapis.com/auth/devstorage.read_only")
    assert spec.to_body() == body and spec.fingerprint() == fingerprint
    assert spec.scopes == (CLOUD_PLATFORM,)


def test_description_and_the_spec_label_without_user_labels() -> None:
    spec = make_spec(description="vLLM google/gemma-4-E2B-it (flex-start)", labels={})
    node = spec.to_body()["tpu"]["nodeSpec"][0]["node"]
    assert node["description"] == "vLLM google/gemma-4-E2B-it (flex-start)"
    assert node["labels"] == {"tpudeploy-spec": spec.fingerprint()}


def _echo(spec: QueuedResourceSpec, change: Any) -> dict[str, Any]:
    """The spec's body as the API would echo it back, with one field changed by `change`."""
    body = spec.to_body()
    change(body, body["tpu"]["nodeSpec"][0], body["tpu"]["nodeSpec"][0]["node"])
    return body


@pytest.mark.parametrize(
    ("change", "difference"),
    [
        (
            lambda b, s, n: b.update(provisioningModel="SPOT"),
            "provisioningModel: existing 'SPOT', wanted 'FLEX_START'",
        ),
        (
            lambda b, s, n: b.update(runDuration={"maxRunDuration": "3600s"}),
            "runDuration.maxRunDuration: existing '3600s', wanted '14400s'",
        ),
        (
            lambda b, s, n: b.update(runDuration={"maxRunDuration": 14400}),
            "runDuration.maxRunDuration: existing 14400, wanted '14400s'",
        ),
        (
            lambda b, s, n: s.update(nodeId="other-node"),
            "nodeId: existing 'other-node', wanted 'gemma4-qr-node'",
        ),
        (
            lambda b, s, n: n.update(acceleratorType="v5litepod-4"),
            "node.acceleratorType: existing 'v5litepod-4', wanted 'v5litepod-1'",
        ),
        (
            lambda b, s, n: n.update(runtimeVersion="v2-alpha-tpuv6e"),
            "node.runtimeVersion: existing 'v2-alpha-tpuv6e', wanted 'v2-alpha-tpuv5-lite'",
        ),
        (
            lambda b, s, n: n.update(tags=["other"]),
            "node.tags: existing ['other'], wanted ['gemma4-vllm']",
        ),
        (
            lambda b, s, n: n["metadata"].update(extra="1"),
            "node.metadata: keys ['extra'] differ",
        ),
        (
            lambda b, s, n: n.update(metadata="startup"),
            "node.metadata: existing 'startup', wanted {",
        ),
        (
            lambda b, s, n: n.update(serviceAccount={"email": "other@x.iam.gserviceaccount.com"}),
            f"node.serviceAccount.email: existing 'other@x.iam.gserviceaccount.com', wanted {SA!r}",
        ),
        (
            lambda b, s, n: n["labels"].update({"tpudeploy-spec": "0123456789abcdef"}),
            "node.labels[tpudeploy-spec]: existing '0123456789abcdef', wanted '",
        ),
    ],
)
def test_each_drifted_field_is_named(change: Any, difference: str) -> None:
    spec = make_spec()
    (found,) = qr.spec_differences(spec, _echo(spec, change))
    assert found.startswith(difference)


def test_fields_the_api_leaves_out_are_not_differences() -> None:
    spec = make_spec()

    def strip(b: dict[str, Any], s: dict[str, Any], n: dict[str, Any]) -> None:
        for key in ("metadata", "serviceAccount", "labels", "tags"):
            del n[key]
        del b["runDuration"]

    assert qr.spec_differences(spec, _echo(spec, strip)) == []
    assert qr.spec_differences(spec, {"provisioningModel": "FLEX_START"}) == []


def test_not_json() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        QueuedResourceSpec.from_json("{project:")
    with pytest.raises(ValueError, match="expected a JSON object"):
        QueuedResourceSpec.from_json("[1, 2]")


# --------------------------------------------------------------------------- create


def test_create_sends_exact_body_and_waits(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.script_states(spec.name, ["WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"])
    result, log = run_create(spec, api)

    posts = fake.calls("POST")
    assert len(posts) == 1
    assert posts[0].path == f"/v2alpha1/projects/{PROJECT}/locations/{ZONE}/queuedResources"
    assert posts[0].query["queuedResourceId"] == "gemma4-qr"
    sent = posts[0].body
    assert sent == spec.to_body()
    assert sent["provisioningModel"] == "FLEX_START"
    assert sent["runDuration"] == {"maxRunDuration": "14400s"}
    node = sent["tpu"]["nodeSpec"][0]["node"]
    assert node["metadata"]["startup-script"] == SCRIPT
    assert node["serviceAccount"] == {"email": SA, "scope": [CLOUD_PLATFORM]}
    # Emulator mode: anonymous, so no bearer token leaves the process.
    assert "authorization" not in posts[0].headers

    assert result["state"]["state"] == "ACTIVE"
    positions = [log.index(s) for s in ("WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE")]
    assert positions == sorted(positions)
    assert "elapsed" in log
    assert "34.16.0.2" in log  # node IP reported once ACTIVE
    assert "billing stops) at 2026-08-09T16:00:00Z" in log


def test_existing_active_same_spec_is_left_alone(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
    _, log = run_create(spec, api)
    assert fake.calls("POST") == []
    assert fake.calls("DELETE") == []
    assert "already exists in ACTIVE" in log


def test_existing_waiting_same_spec_is_waited_on(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.add_queued_resource(spec.name, spec.to_body(), ["WAITING_FOR_RESOURCES", "ACTIVE"])
    result, _ = run_create(spec, api)
    assert fake.calls("POST") == []
    assert result["state"]["state"] == "ACTIVE"


@pytest.mark.parametrize("dead", ["SUSPENDED", "FAILED"])
def test_dead_queued_resource_is_replaced(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec, dead: str
) -> None:
    fake.add_queued_resource(spec.name, spec.to_body(), [dead])
    result, log = run_create(spec, api)
    calls = [(r.method, r.query.get("force")) for r in fake.requests if r.method != "GET"]
    assert calls == [("DELETE", "true"), ("POST", None)]
    # The DELETE was confirmed gone (a 404 GET) before the POST.
    index_post = fake.requests.index(fake.calls("POST")[0])
    before = fake.requests[index_post - 1]
    assert before.method == "GET" and "queuedResources" in before.path
    assert result["state"]["state"] == "ACTIVE"
    assert f"exists in {dead}" in log and "deleting it and creating it again" in log


def test_different_spec_fails_and_touches_nothing(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    old = make_spec(runtime_version="v2-alpha-tpuv5-lite-old", max_run_duration_seconds=3600)
    fake.add_queued_resource(spec.name, old.to_body(), ["ACTIVE"])
    with pytest.raises(QueuedResourceError) as info:
        run_create(spec, api)
    message = str(info.value)
    assert "DIFFERENT spec" in message and "destroy" in message
    assert "runtimeVersion" in message and "maxRunDuration" in message
    assert fake.calls("POST") == [] and fake.calls("DELETE") == []


def test_changed_startup_script_detected_by_label_even_without_metadata_echo(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    old_body = make_spec(startup_script="#!/bin/bash\necho old\n").to_body()
    del old_body["tpu"]["nodeSpec"][0]["node"]["metadata"]  # API may not echo metadata
    fake.add_queued_resource(spec.name, old_body, ["ACTIVE"])
    with pytest.raises(QueuedResourceError, match="tpudeploy-spec"):
        run_create(spec, api)


def test_failed_while_waiting_reports_reason(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    reason = "Insufficient capacity for v5litepod-1 in us-west4-a"
    fake.script_states(
        spec.name,
        [
            "WAITING_FOR_RESOURCES",
            {"state": "FAILED", "failedData": {"error": {"message": reason}}},
        ],
    )
    with pytest.raises(QueuedResourceError) as info:
        run_create(spec, api)
    assert reason in str(info.value) and "FAILED" in str(info.value)


def test_suspended_while_waiting_is_an_error(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.script_states(spec.name, ["PROVISIONING", "SUSPENDED"])
    with pytest.raises(QueuedResourceError, match="went SUSPENDED while waiting"):
        run_create(spec, api)


def test_timeout_while_waiting_for_capacity(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.script_states(spec.name, ["WAITING_FOR_RESOURCES"])
    out = io.StringIO()
    with pytest.raises(QueuedResourceError) as info:
        qr.create(spec, api=api, poll=0.01, timeout=0.15, out=out)
    message = str(info.value)
    assert "timed out" in message and "last state WAITING_FOR_RESOURCES" in message
    assert "timeout 0.15 s" in message
    assert len(fake.calls("GET", "queuedResources")) >= 3  # it did poll, not give up at once


def test_create_operation_error_is_reported(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    message = 'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"'
    fake.fail_next_create_operation(3, message)
    with pytest.raises(QueuedResourceError) as info:
        run_create(spec, api)
    assert message in str(info.value)
    assert "us-west4-a" in str(info.value)
    assert fake.calls("GET", "/operations/")


def test_zone_rule_hint_on_400(fake: FakeTpuApi, api: TpuApi) -> None:
    spec = make_spec(zone="europe-west4-a")
    message = 'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"'
    fake.inject("POST", "/queuedResources", 400, message)
    with pytest.raises(QueuedResourceError) as info:
        run_create(spec, api)
    text = str(info.value)
    assert message in text and "HTTP 400" in text
    # Every zone the data knows to accept it, not a prose copy that forgot one.
    assert "us-west4-a" in text and "us-central1-a" in text and "europe-west4-a" in text
    assert "only in us-west4-a" not in text


def test_quota_hint(fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec) -> None:
    fake.inject("POST", "/queuedResources", 403, "Quota 'TPUV5LitepodPerProjectPerZone' exceeded")
    with pytest.raises(QueuedResourceError, match="What to do: quota"):
        run_create(spec, api)


def test_409_without_resource_has_hint(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.inject("POST", "/queuedResources", 409, "operation in progress")
    with pytest.raises(QueuedResourceError, match="already exists or an operation is in progress"):
        run_create(spec, api)


# --------------------------------------------------------------------------- retries


def test_retry_after_429_and_503(fake: FakeTpuApi, spec: QueuedResourceSpec) -> None:
    log = io.StringIO()
    waits: list[float] = []
    api = TpuApi(sleep=waits.append, log=log)
    fake.inject("GET", "/queuedResources/", 503, "backend unavailable")
    fake.inject("POST", "/queuedResources", 429, "rate limited")
    result, _ = run_create(spec, api)
    assert result["state"]["state"] == "ACTIVE"
    assert len(fake.calls("POST")) == 2  # the 429'd POST was sent again
    assert len(waits) == 2
    # googleapiclient's own retry notice, shown on the progress stream with the call's name.
    lines = log.getvalue().splitlines()
    assert len(lines) == 2
    get, post = lines
    assert get.startswith("tpudeploy: get queued resource: Sleeping ")
    assert "retry 1 of 5" in get and get.endswith("after 503")
    assert post.startswith("tpudeploy: create queued resource: Sleeping ")
    assert "retry 1 of 5" in post and post.endswith("after 429")


def test_retries_are_bounded(fake: FakeTpuApi, spec: QueuedResourceSpec) -> None:
    api = TpuApi(num_retries=2, sleep=no_wait, log=io.StringIO())
    fake.inject("GET", "/queuedResources/", 500, "boom", times=10)
    with pytest.raises(QueuedResourceError) as info:
        run_create(spec, api)
    assert "(HTTP 500): boom (gave up after 3 attempts)" in str(info.value)
    assert "try again in a few minutes" in str(info.value)
    assert len(fake.calls("GET")) == 3


def test_backoff_grows_exponentially(
    fake: FakeTpuApi, spec: QueuedResourceSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The library waits random() * 2**n before retry n; a fixed random() shows the doubling.
    monkeypatch.setattr("random.random", lambda: 0.5)
    waits: list[float] = []
    api = TpuApi(num_retries=4, sleep=waits.append, log=io.StringIO())
    fake.inject("GET", "/queuedResources/", 503, "busy", times=3)
    fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
    run_create(spec, api)
    assert waits == [1.0, 2.0, 4.0]


@pytest.mark.parametrize("status", [400, 403, 409])
def test_client_errors_are_not_retried(
    fake: FakeTpuApi, spec: QueuedResourceSpec, status: int
) -> None:
    waits: list[float] = []
    log = io.StringIO()
    api = TpuApi(sleep=waits.append, log=log)
    fake.inject("POST", "/queuedResources", status, "refused")
    with pytest.raises(QueuedResourceError, match=rf"\(HTTP {status}\): refused\. What to do"):
        run_create(spec, api)
    assert len(fake.calls("POST")) == 1
    assert waits == [] and log.getvalue() == ""


def test_401_is_not_retried_and_names_the_login(fake: FakeTpuApi, api: TpuApi) -> None:
    # The transport refreshes the credentials once after a 401; anonymous (emulator) ones
    # cannot be, and expired user credentials fail the same way: one clear error either way.
    fake.inject("POST", "/queuedResources", 401, "Request had invalid authentication")
    with pytest.raises(QueuedResourceError) as info:
        run_create(make_spec(), api)
    assert "Google refused your credentials" in str(info.value)
    assert "gcloud auth application-default login" in str(info.value)
    assert len(fake.calls("POST")) == 1


def test_refused_connections_are_retried_then_reported(
    spec: QueuedResourceSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loopback port nobody listens on: every attempt is refused.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("TPU_EMULATOR_HOST", f"127.0.0.1:{port}")
    waits: list[float] = []
    log = io.StringIO()
    api = TpuApi(num_retries=3, sleep=waits.append, log=log)
    with pytest.raises(QueuedResourceError) as info:
        qr.status(spec, api=api)
    assert len(waits) == 3
    assert log.getvalue().count("tpudeploy: get queued resource: Sleeping ") == 3
    assert "get queued resource failed (HTTP 0): network error: " in str(info.value)
    assert "Traceback" not in str(info.value)


# --------------------------------------------------------------------------- delete


def test_delete_missing_succeeds(fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec) -> None:
    qr.delete(spec, api=api, poll=0.005, out=io.StringIO())
    assert fake.calls("DELETE") == []


def test_delete_404_counts_as_deleted(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
    fake.inject("DELETE", "/queuedResources/", 404, "not found")
    qr.delete(spec, api=api, poll=0.005, out=io.StringIO())
    assert len(fake.calls("DELETE")) == 1


def test_delete_waits_until_gone(spec: QueuedResourceSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeTpuApi(delete_polls=3) as fake:
        monkeypatch.setenv("TPU_EMULATOR_HOST", fake.host)
        api = TpuApi(sleep=no_wait, log=io.StringIO())
        fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
        out = io.StringIO()
        qr.delete(spec, api=api, poll=0.005, out=out)
        deletes = fake.calls("DELETE")
        assert len(deletes) == 1 and deletes[0].query["force"] == "true"
        # 1 GET before the DELETE, 3 answered DELETING, then the 404 that ends the wait.
        gets = fake.calls("GET", "/queuedResources/")
        assert len(gets) == 1 + 3 + 1
        assert not fake.exists(spec.name)
        assert "DELETING" in out.getvalue() and "deleted" in out.getvalue()


def test_delete_retries_while_provisioning(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.add_queued_resource(spec.name, spec.to_body(), ["PROVISIONING", "PROVISIONING", "ACTIVE"])
    refusal = "Cannot delete queued resource in state PROVISIONING"
    fake.refuse_delete(spec.name, 400, refusal, times=2)
    out = io.StringIO()
    qr.delete(spec, api=api, poll=0.005, out=out)
    assert len(fake.calls("DELETE")) == 3
    assert out.getvalue().count("cannot delete yet in PROVISIONING") == 2
    assert refusal in out.getvalue()
    assert not fake.exists(spec.name)


def test_delete_refused_until_timeout(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    fake.add_queued_resource(spec.name, spec.to_body(), ["PROVISIONING"])
    fake.refuse_delete(spec.name, 400, "Cannot delete in PROVISIONING", times=1000)
    with pytest.raises(QueuedResourceError, match=r"timed out .* to be deleted; last state") as e:
        qr.delete(spec, api=api, poll=0.01, timeout=0.1, out=io.StringIO())
    # The way out names the spec's own project (tests/tpuvm/test_gcloud_commands.py has gcloud
    # parse it).
    assert str(e.value).endswith(
        "It may still bill: run destroy again, or `gcloud alpha compute tpus queued-resources "
        f"delete {spec.queued_resource_id} --zone={spec.zone} --project={spec.project} --force`"
    )


def test_delete_403_is_not_retried(fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec) -> None:
    fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
    fake.inject(
        "DELETE", "/queuedResources/", 403, "Permission 'tpu.queuedResources.delete' denied"
    )
    with pytest.raises(QueuedResourceError, match=r"roles/tpu\.admin"):
        qr.delete(spec, api=api, poll=0.005, out=io.StringIO())
    assert len(fake.calls("DELETE")) == 1


# --------------------------------------------------------------------------- status


def test_status_active(fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec) -> None:
    fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
    info = qr.status(spec, api=api)
    assert info["queued_resource_state"] == "ACTIVE"
    assert info["node_state"] == "READY"
    assert info["external_ip"] == "34.16.0.2" and info["internal_ip"] == "10.182.0.2"
    assert info["termination_time"] == "2026-08-09T16:00:00Z"
    assert info["max_run_duration"] == f"{FOUR_HOURS}s"
    screen = qr.format_status(info)
    assert "billing stops at 2026-08-09T16:00:00Z" in screen
    assert fake.calls("GET", f"/nodes/{spec.node_id}")


def test_status_missing(fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec) -> None:
    info = qr.status(spec, api=api)
    assert info["queued_resource_state"] == "NOT_FOUND" and info["node_state"] == "NOT_FOUND"
    assert "nothing is billing" in qr.format_status(info)


# --------------------------------------------------------------------------- CLI


def run_cli(
    fake: FakeTpuApi, *args: str, spec_json: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != qr.SPEC_ENV}
    env["TPU_EMULATOR_HOST"] = fake.host
    env["PYTHONPATH"] = str(ROOT)
    if spec_json is not None:
        env[qr.SPEC_ENV] = spec_json
    return subprocess.run(
        [sys.executable, "-m", "tpudeploy.tpuvm.queued_resource", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_create_then_status_then_delete(fake: FakeTpuApi, spec: QueuedResourceSpec) -> None:
    fake.script_states(spec.name, ["WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"])
    created = run_cli(fake, "create", "--poll", "0.01", "--timeout", "30", spec_json=spec.to_json())
    assert created.returncode == 0, created.stderr
    assert "WAITING_FOR_RESOURCES" in created.stderr and "ACTIVE" in created.stderr
    assert fake.calls("POST")[0].body == spec.to_body()

    shown = run_cli(fake, "status", spec_json=spec.to_json())
    assert shown.returncode == 0, shown.stderr
    assert "34.16.0.2" in shown.stdout and "billing stops at" in shown.stdout

    deleted = run_cli(fake, "delete", "--poll", "0.01", spec_json=spec.to_json())
    assert deleted.returncode == 0, deleted.stderr
    assert not fake.exists(spec.name)


def test_cli_403_is_one_clear_error(fake: FakeTpuApi, spec: QueuedResourceSpec) -> None:
    api_message = (
        "Cloud TPU API has not been used in project 123 before or it is disabled. "
        "Enable it by visiting https://console.developers.google.com/apis/api/tpu.googleapis.com"
    )
    fake.inject("GET", "/queuedResources/", 403, api_message)
    result = run_cli(fake, "create", "--poll", "0.01", spec_json=spec.to_json())
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert api_message in result.stderr
    assert f"gcloud services enable tpu.googleapis.com --project={PROJECT}" in result.stderr
    assert "roles/tpu.admin" in result.stderr
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1  # one message, one line


def test_cli_spec_file_and_missing_spec(
    fake: FakeTpuApi, spec: QueuedResourceSpec, tmp_path: Path
) -> None:
    missing = run_cli(fake, "status", spec_json=None)
    assert missing.returncode == 1
    assert "TPUDEPLOY_QR_SPEC" in missing.stderr and "Traceback" not in missing.stderr

    path = tmp_path / "spec.json"
    path.write_text(spec.to_json(), encoding="utf-8")
    shown = run_cli(fake, "status", "--spec-file", str(path), spec_json=None)
    assert shown.returncode == 0, shown.stderr
    assert "NOT_FOUND" in shown.stdout


def test_cli_bad_spec_in_process(
    fake: FakeTpuApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(make_spec().to_json())
    data["max_run_duration_seconds"] = 0
    monkeypatch.setenv(qr.SPEC_ENV, json.dumps(data))
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    assert qr.main(["create"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: queued resource spec: max_run_duration_seconds=0")
    assert fake.requests == []
    # The handlers that turn SIGTERM into a clean-up are main's own, not left in the caller.
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_different_metadata_names_keys_without_dumping_script(
    fake: FakeTpuApi, api: TpuApi, spec: QueuedResourceSpec
) -> None:
    old_script = "#!/bin/bash\necho a-much-older-boot-script\n"
    fake.add_queued_resource(spec.name, make_spec(startup_script=old_script).to_body(), ["ACTIVE"])
    with pytest.raises(QueuedResourceError) as info:
        run_create(spec, api)
    message = str(info.value)
    assert "node.metadata: keys ['startup-script'] differ" in message
    assert "older-boot-script" not in message and "echo boot" not in message


def test_without_emulator_missing_adc_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # An unreadable GOOGLE_APPLICATION_CREDENTIALS fails inside google.auth.default() before
    # any network access, which exercises the real (non-emulator) credential path offline.
    monkeypatch.delenv("TPU_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    monkeypatch.setenv(qr.SPEC_ENV, make_spec().to_json())
    assert qr.main(["status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no Google Cloud credentials")
    assert "gcloud auth application-default login" in err


# --------------------------------------------------------------------------- make destroy's cleanup


def test_make_destroys_cleanup_deletes_the_configs_queued_resource_whatever_the_state_says(
    fake: FakeTpuApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make destroy` runs tpudeploy.tpuvm.flex.delete_queued_resource after `cdktf destroy`:
    the queued resource is named from the config, so one Terraform lost track of is found."""
    from tpudeploy.config import parse_config
    from tpudeploy.tpuvm.flex import delete_queued_resource, queued_resource_spec

    cfg = parse_config({"project": PROJECT})
    spec = queued_resource_spec(cfg, PROJECT)
    fake.add_queued_resource(spec.name, spec.to_body(), ["ACTIVE"])
    monkeypatch.setenv(qr.POLL_ENV, "0.005")
    assert delete_queued_resource(cfg, PROJECT, timeout=None) == 0
    assert not fake.exists(spec.name)
    assert [r.path.rsplit("/", 1)[-1] for r in fake.calls("DELETE")] == [spec.queued_resource_id]
    # Nothing left: a second cleanup succeeds without deleting anything.
    assert delete_queued_resource(cfg, PROJECT, timeout=None) == 0
    assert len(fake.calls("DELETE")) == 1
    assert "error" not in capsys.readouterr().err


def test_a_cleanup_that_cannot_delete_says_so_and_fails(
    fake: FakeTpuApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tpudeploy.config import parse_config
    from tpudeploy.tpuvm.flex import delete_queued_resource, queued_resource_spec

    cfg = parse_config({"project": PROJECT})
    spec = queued_resource_spec(cfg, PROJECT)
    fake.add_queued_resource(spec.name, spec.to_body(), ["PROVISIONING"])
    fake.refuse_delete(spec.name, 400, "Cannot delete in PROVISIONING", times=1000)
    monkeypatch.setenv(qr.POLL_ENV, "0.01")
    assert delete_queued_resource(cfg, PROJECT, timeout=0.1) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("error: ") and "It may still bill: run destroy again" in last


def test_the_cleanup_waits_the_default_half_hour_and_polls_as_the_environment_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No timeout given (`make destroy` passes none) is qr.DEFAULT_DELETE_TIMEOUT; the poll
    interval is TPUDEPLOY_QR_POLL_SECONDS, else qr.DEFAULT_POLL."""
    from tpudeploy.config import parse_config
    from tpudeploy.tpuvm.flex import delete_queued_resource, queued_resource_spec

    seen: list[tuple[str, float, float]] = []

    class Recording:
        def __init__(self, spec: QueuedResourceSpec, *, poll: float) -> None:
            self.spec, self.poll = spec, poll

        def delete(self, *, timeout: float) -> None:
            seen.append((self.spec.name, self.poll, timeout))

    monkeypatch.setattr(qr, "QueuedResourceClient", Recording)
    cfg = parse_config({"project": PROJECT})
    name = queued_resource_spec(cfg, PROJECT).name
    monkeypatch.delenv(qr.POLL_ENV, raising=False)
    assert delete_queued_resource(cfg, PROJECT, timeout=None) == 0
    monkeypatch.setenv(qr.POLL_ENV, "2.5")
    assert delete_queued_resource(cfg, PROJECT, timeout=60.0) == 0
    assert seen == [
        (name, qr.DEFAULT_POLL, qr.DEFAULT_DELETE_TIMEOUT),
        (name, 2.5, 60.0),
    ]
