"""The rehearsal's parts, each on its own and fast: generated schemas, the stand-in provider under
`terraform validate`, the fake cloud's rules, the fake vLLM, and the rehearsal CLI's errors."""

# ruff: noqa: S310 - every URL opened here is a loopback fake started by the test

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, terraform_env
from tools.rehearsal import schema
from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.fakes.metadata import FakeMetadata
from tools.rehearsal.mirror import lock_file, write_mirror
from tools.rehearsal.resources import RESOURCES, VALIDATE_ONLY

PROJECT = "rehearsal-unit"
MODEL = "google/gemma-4-E2B-it"
SA = f"node-account@{PROJECT}.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def schemas() -> dict[str, Any]:
    return schema.load_stand_in()


# ---- schemas from the jsii assembly


def block(schemas: dict[str, Any], rtype: str) -> dict[str, Any]:
    found: dict[str, Any] = schemas["resource_schemas"][rtype]["block"]
    return found


def test_every_resource_type_the_stacks_use_has_a_schema_and_a_fake(
    schemas: dict[str, Any],
) -> None:
    used = {
        "google_project_service",
        "google_service_account",
        "google_secret_manager_secret",
        "google_secret_manager_secret_iam_member",
        "google_storage_bucket",
        "google_storage_bucket_iam_member",
        "google_compute_firewall",
        "google_tpu_v2_vm",
        # spot and on-demand: the deadline job and its account's one permission
        "google_cloud_scheduler_job",
        "google_project_iam_custom_role",
        "google_project_iam_member",
    }
    assert used <= set(RESOURCES)
    assert set(schemas["resource_schemas"]) == set(RESOURCES) | set(VALIDATE_ONLY)
    assert schemas["provider_version"] == "6.50.0"


def test_tpu_v2_vm_schema_is_the_real_providers(schemas: dict[str, Any]) -> None:
    """Facts of google-beta 6.50.0's google_tpu_v2_vm (its documentation): required name and
    runtime, computed endpoints with nested access configs, one-element config blocks."""
    vm = block(schemas, "google_tpu_v2_vm")
    attrs, blocks = vm["attributes"], vm["block_types"]
    assert attrs["name"] == {"type": "string", "required": True}
    assert attrs["runtime_version"] == {"type": "string", "required": True}
    assert attrs["metadata"]["type"] == ["map", "string"] and not attrs["metadata"].get("computed")
    endpoint = [
        "object",
        {
            "access_config": ["list", ["object", {"external_ip": "string"}]],
            "ip_address": "string",
            "port": "number",
        },
    ]
    assert attrs["network_endpoints"] == {"type": ["list", endpoint], "computed": True}
    assert attrs["project"] == {"type": "string", "optional": True, "computed": True}
    assert blocks["network_config"]["nesting_mode"] == "list"
    assert blocks["network_config"]["max_items"] == 1
    assert blocks["shielded_instance_config"]["block"]["attributes"]["enable_secure_boot"][
        "required"
    ]
    assert blocks["timeouts"]["nesting_mode"] == "single"
    assert "spot" in blocks["scheduling_config"]["block"]["attributes"]


def test_sets_lists_and_the_provider_block(schemas: dict[str, Any]) -> None:
    firewall = block(schemas, "google_compute_firewall")
    # allow/deny and source_ranges are sets in the real provider (order does not matter).
    assert firewall["block_types"]["allow"]["nesting_mode"] == "set"
    assert firewall["attributes"]["source_ranges"]["type"] == ["set", "string"]
    assert (
        block(schemas, "google_storage_bucket")["block_types"]["lifecycle_rule"]["nesting_mode"]
        == "list"
    )
    provider = schemas["provider"]["block"]["attributes"]
    assert {"project", "region", "zone", "default_labels"} <= set(provider)
    # cdktf's own meta-argument is not an attribute of the provider.
    assert "alias" not in provider


def test_a_type_the_provider_lacks_is_named(tmp_path: Path) -> None:
    with pytest.raises(schema.SchemaError, match="no resource type google_tpu_v3_vm"):
        schema.generate(["google_tpu_v3_vm"], schema.assembly_tarball())


# ---- Terraform judges configurations with those schemas


@pytest.fixture(scope="module")
def validate_dir(tmp_path_factory: pytest.TempPathFactory, terraform: str) -> Iterator[Path]:
    """A folder initialised with the stand-in from its mirror, offline."""
    root = tmp_path_factory.mktemp("validate")
    schema_file = schema.stand_in_schema()
    config = write_mirror(root / "tf", python=sys.executable, repo=REPO_ROOT, schema=schema_file)
    env = {
        **terraform_env(root),
        "TF_CLI_CONFIG_FILE": str(config),
        "HTTPS_PROXY": "http://127.0.0.1:9",
    }
    lock = lock_file(root / "tf", env=env)
    work = root / "stack"
    work.mkdir()
    (work / ".terraform.lock.hcl").write_text(lock.read_text())
    yield work


def tf_json(resource: dict[str, Any]) -> str:
    return json.dumps(
        {
            "terraform": {
                "required_providers": {
                    "google-beta": {"source": "hashicorp/google-beta", "version": "6.50.0"}
                }
            },
            "provider": {"google-beta": [{"project": PROJECT, "zone": "us-west4-a"}]},
            "resource": {"google_tpu_v2_vm": {"node": {"provider": "google-beta", **resource}}},
        }
    )


def run_tf(terraform: str, args: list[str], work: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **terraform_env(work.parent),
        "TF_CLI_CONFIG_FILE": str(work.parent / "tf" / "terraform.rc"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
    }
    return subprocess.run(
        [terraform, *args], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )


def test_terraform_refuses_an_attribute_the_real_provider_lacks(
    terraform: str, validate_dir: Path
) -> None:
    valid = {
        "name": "n",
        "runtime_version": "v2-alpha-tpuv5-lite",
        "accelerator_type": "v5litepod-1",
    }
    (validate_dir / "main.tf.json").write_text(tf_json(valid))
    init = run_tf(terraform, ["init", "-input=false"], validate_dir)
    assert init.returncode == 0, init.stdout + init.stderr
    ok = run_tf(terraform, ["validate", "-no-color"], validate_dir)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    (validate_dir / "main.tf.json").write_text(tf_json({**valid, "provisioning_model": "SPOT"}))
    refused = run_tf(terraform, ["validate", "-no-color"], validate_dir)
    assert refused.returncode != 0
    assert 'No argument or block type is named "provisioning_model"' in refused.stderr
    (validate_dir / "main.tf.json").write_text(tf_json({"name": "n"}))
    missing = run_tf(terraform, ["validate", "-no-color"], validate_dir)
    assert 'The argument "runtime_version" is required' in missing.stderr


# ---- the fake cloud's rules


def call(host: str, method: str, path: str, body: Any = None, token: str = "") -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{host}{path}", data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw


@pytest.fixture
def cloud() -> Iterator[FakeCloud]:
    with FakeCloud() as fake:
        yield fake


def enable(cloud: FakeCloud, *services: str) -> None:
    for service in services:
        call(
            cloud.serviceusage.host, "POST", f"/v1/projects/{PROJECT}/services/{service}:enable", {}
        )


def test_apis_refuse_until_enabled_and_grants_need_existing_accounts(cloud: FakeCloud) -> None:
    status, body = call(
        cloud.secretmanager.host,
        "POST",
        f"/v1/projects/{PROJECT}/secrets?secretId=s",
        {"replication": {"automatic": {}}},
    )
    assert status == 403 and "SERVICE_DISABLED" in body["error"]["message"]
    enable(cloud, "secretmanager.googleapis.com", "iam.googleapis.com")
    assert (
        call(
            cloud.secretmanager.host,
            "POST",
            f"/v1/projects/{PROJECT}/secrets?secretId=s",
            {"replication": {"automatic": {}}},
        )[0]
        == 200
    )
    policy = {
        "policy": {
            "bindings": [
                {"role": "roles/secretmanager.secretAccessor", "members": [f"serviceAccount:{SA}"]}
            ]
        }
    }
    status, body = call(
        cloud.secretmanager.host, "POST", f"/v1/projects/{PROJECT}/secrets/s:setIamPolicy", policy
    )
    assert status == 400 and "does not exist" in body["error"]["message"]


def node_with_secret(cloud: FakeCloud, *, role: str) -> tuple[str, str]:
    """A node whose account has `role` on secret `s` (version 'v1'); its name and a token."""
    enable(cloud, "secretmanager.googleapis.com", "iam.googleapis.com", "tpu.googleapis.com")
    call(
        cloud.iam.host,
        "POST",
        f"/v1/projects/{PROJECT}/serviceAccounts",
        {"accountId": "node-account", "serviceAccount": {}},
    )
    sm = cloud.secretmanager.host
    call(
        sm, "POST", f"/v1/projects/{PROJECT}/secrets?secretId=s", {"replication": {"automatic": {}}}
    )
    call(
        sm,
        "POST",
        f"/v1/projects/{PROJECT}/secrets/s:addVersion",
        {"payload": {"data": base64.b64encode(b"v1").decode()}},
    )
    call(
        sm,
        "POST",
        f"/v1/projects/{PROJECT}/secrets/s:setIamPolicy",
        {"policy": {"bindings": [{"role": role, "members": [f"serviceAccount:{SA}"]}]}},
    )
    parent = f"projects/{PROJECT}/locations/us-west4-a"
    status, _ = call(
        cloud.tpu.host,
        "POST",
        f"/v2/{parent}/nodes?nodeId=n",
        {"serviceAccount": {"email": SA}, "metadata": {"enable-guest-attributes": "TRUE"}},
    )
    assert status == 200
    with cloud.inventory.locked() as inv:
        return f"{parent}/nodes/n", inv.mint_token(f"serviceAccount:{SA}")


@pytest.mark.parametrize(
    ("role", "status"),
    [("roles/secretmanager.secretAccessor", 200), ("roles/secretmanager.viewer", 403)],
)
def test_the_node_reads_a_secret_only_with_an_accessor_grant(
    cloud: FakeCloud, role: str, status: int
) -> None:
    _, token = node_with_secret(cloud, role=role)
    path = f"/v1/projects/{PROJECT}/secrets/s/versions/latest:access"
    got, body = call(cloud.secretmanager.host, "GET", path, token=token)
    assert got == status
    if status == 200:
        assert base64.b64decode(body["payload"]["data"]) == b"v1"
    forged = "ya29.forged"  # a token no metadata server minted
    assert call(cloud.secretmanager.host, "GET", path, token=forged)[0] == 401


def test_metadata_server_gives_the_node_its_identity_and_publishes_guest_attributes(
    cloud: FakeCloud,
) -> None:
    name, _ = node_with_secret(cloud, role="roles/secretmanager.secretAccessor")
    with FakeMetadata(inventory=cloud.inventory, tpu=cloud.tpu, node_name=name) as md:
        assert isinstance(md, FakeMetadata)
        plain = urllib.request.Request(f"{md.url}/project/project-id")
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(plain, timeout=5)
        flavored = urllib.request.Request(
            f"{md.url}/instance/service-accounts/default/token",
            headers={"Metadata-Flavor": "Google"},
        )
        with urllib.request.urlopen(flavored, timeout=5) as response:
            token = json.loads(response.read())["access_token"]
        put = urllib.request.Request(
            f"{md.url}/instance/guest-attributes/tpudeploy/phase",
            data=b"ready",
            method="PUT",
            headers={"Metadata-Flavor": "Google"},
        )
        urllib.request.urlopen(put, timeout=5).close()
    assert cloud.inventory.principal({"authorization": f"Bearer {token}"}) == f"serviceAccount:{SA}"
    status, body = call(
        cloud.tpu.host, "POST", f"/v2/{name}:getGuestAttributes", {"queryPath": "tpudeploy/"}
    )
    assert status == 200
    items = body["guestAttributes"][0]["queryValue"]["items"]
    assert items == [{"namespace": "tpudeploy", "key": "phase", "value": "ready"}]


def test_storage_objects_need_a_grant_and_a_bucket_with_objects_stays(cloud: FakeCloud) -> None:
    _, token = node_with_secret(cloud, role="roles/secretmanager.secretAccessor")
    enable(cloud, "storage.googleapis.com")
    gcs = cloud.storage.host
    assert (
        call(
            gcs,
            "POST",
            f"/storage/v1/b?project={PROJECT}",
            {"name": "cache-bucket", "versioning": {"enabled": True}},
        )[0]
        == 200
    )

    def upload(data: bytes) -> int:
        request = urllib.request.Request(
            f"http://{gcs}/cache-bucket/xla/k/cache.tar.gz",
            data=data,
            method="PUT",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert upload(b"one") == 403
    call(
        gcs,
        "PUT",
        "/storage/v1/b/cache-bucket/iam",
        {"bindings": [{"role": "roles/storage.objectAdmin", "members": [f"serviceAccount:{SA}"]}]},
    )
    assert upload(b"one") == 200 and upload(b"two") == 200
    assert cloud.storage.objects("cache-bucket") == {"xla/k/cache.tar.gz": 2}
    status, body = call(gcs, "DELETE", "/storage/v1/b/cache-bucket")
    assert status == 409 and "not empty" in body["error"]["message"]


def test_the_tpu_api_refuses_flex_start_where_the_seed_saw_it_refused(cloud: FakeCloud) -> None:
    enable(cloud, "tpu.googleapis.com")
    parent = f"projects/{PROJECT}/locations/europe-west4-a"
    body = {
        "provisioningModel": "FLEX_START",
        "tpu": {
            "nodeSpec": [
                {"parent": parent, "nodeId": "n", "node": {"acceleratorType": "v5litepod-1"}}
            ]
        },
    }
    status, answer = call(
        cloud.tpu.host, "POST", f"/v2alpha1/{parent}/queuedResources?queuedResourceId=q", body
    )
    assert status == 400
    assert (
        'FLEX_START provisioning model is not supported for accelerator type "v5litepod-1"'
        in (answer["error"]["message"])
    )


# ---- the fake vLLM


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_vllm(port: int, env: dict[str, str], expected_token: str) -> subprocess.Popen[bytes]:
    script = REPO_ROOT / "tools" / "rehearsal" / "fake_vllm.py"
    return subprocess.Popen(
        [
            sys.executable,
            "-S",
            str(script),
            "--hf-token-sha256",
            hashlib.sha256(expected_token.encode()).hexdigest(),
            "vllm",
            "serve",
            "google/gemma-4-E2B-it",
            "--port",
            str(port),
        ],
        env={"PATH": os.environ["PATH"], **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def post(port: int, body: dict[str, Any], key: str = "") -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None


def wait_for(port: int) -> None:
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing answered on port {port}")


def test_fake_vllm_needs_the_stored_token_and_answers_chat_and_tool_calls(
    tmp_path: Path,
) -> None:
    token = "hf_" + "unitTestTokenNotReal"
    wrong = start_vllm(free_port(), {"HF_TOKEN": "hf_other"}, token)
    assert wrong.wait(timeout=10) == 1
    assert b"not the stored token" in (wrong.stdout.read() if wrong.stdout else b"")
    absent = start_vllm(free_port(), {}, token)
    assert absent.wait(timeout=10) == 1

    # As on the node: the token is a file mounted into the container (HF_TOKEN_PATH).
    token_file = tmp_path / "hf_token"
    token_file.write_text(token)
    port = free_port()
    server = start_vllm(port, {"HF_TOKEN_PATH": str(token_file)}, token)
    keyed_port = free_port()
    keyed = start_vllm(keyed_port, {"HF_TOKEN": token, "VLLM_API_KEY": "k"}, token)
    try:
        wait_for(port)
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "Say hi."}]}
        status, answer = post(port, chat)
        assert status == 200 and answer["choices"][0]["message"]["content"]
        tool = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "What is the weather in Paris right now?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        }
        status, answer = post(port, tool)
        (call_,) = answer["choices"][0]["message"]["tool_calls"]
        assert call_["function"]["name"] == "get_weather"
        assert json.loads(call_["function"]["arguments"]) == {"city": "Paris"}
        assert post(port, {**chat, "model": "other"})[0] == 404
        # With VLLM_API_KEY (not on the node, where the proxy checks the key) /v1 needs it.
        wait_for(keyed_port)
        assert post(keyed_port, chat)[0] == 401
        assert post(keyed_port, chat, key="k")[0] == 200
    finally:
        for proc in (server, keyed):
            proc.terminate()
            proc.wait(timeout=10)


# ---- the rehearsal's own errors


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--provisioning", "v5e"], ["PROVISIONING='v5e'", "flex-start, spot, on-demand"]),
        (["--scenario", "weather"], ["SCENARIO='weather'", "lifecycle, preemption, deadline"]),
        (["--scenario", "preemption"], ["SCENARIO=preemption", "PROVISIONING=spot or on-demand"]),
    ],
)
def test_bad_arguments_are_one_line_errors(args: list[str], words: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tools.rehearsal", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    for word in words:
        assert word in result.stderr
    assert "Traceback" not in result.stderr


def test_each_stack_output_is_read_through_the_cli_prefixes() -> None:
    """A CI run of the rehearsal saw the secrets stack's "No changes." without its stack name:
    the cdktf CLI names a stack only when the output switches to it (trimmed from that log)."""
    from tools.rehearsal.lifecycle import stack_output

    log = "\n".join(
        [
            "npx cdktf deploy gemma4-v5e-secrets gemma4-v5e-node",
            "gemma4-v5e-secrets  google_secret_manager_secret.hf-token: Refreshing state...",
            "                    google_storage_bucket.compile-cache: Refreshing state...",
            "",
            "                    No changes. Your infrastructure matches the configuration.",
            "gemma4-v5e-secrets  ",
            "                    Apply complete! Resources: 0 added, 0 changed, 0 destroyed.",
            "gemma4-v5e-node  google_tpu_v2_vm.node: Refreshing state...",
            "gemma4-v5e-node  Plan: 1 to add, 0 to change, 0 to destroy.",
            "make: *** [Makefile:90: deploy] Error 1",
            "                    indented, but after make's line: no stack's",
        ]
    )
    out = stack_output(log, ("gemma4-v5e-secrets", "gemma4-v5e-node"))
    assert out["gemma4-v5e-secrets"].splitlines() == [
        "google_secret_manager_secret.hf-token: Refreshing state...",
        "google_storage_bucket.compile-cache: Refreshing state...",
        "",
        "No changes. Your infrastructure matches the configuration.",
        "",
        "Apply complete! Resources: 0 added, 0 changed, 0 destroyed.",
    ]
    assert out["gemma4-v5e-node"].splitlines() == [
        "google_tpu_v2_vm.node: Refreshing state...",
        "Plan: 1 to add, 0 to change, 0 to destroy.",
    ]


def test_the_stand_in_provider_starts_without_the_fakes() -> None:
    """Terraform starts the stand-in provider for every init, validate, plan and apply: it
    talks to the fakes over loopback and imports none of them (importing them all, the IAM
    rules' CEL among them, made each start 0.6 s slower)."""
    probe = (
        "import sys, tools.rehearsal.provider, tools.rehearsal.resources.kubernetes; "
        "print(sorted(m for m in sys.modules if m.startswith(('tools.rehearsal.fakes', 'celpy'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["['tools.rehearsal.fakes']"], done.stdout
