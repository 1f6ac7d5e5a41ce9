"""The node may create its own configuration's compile-cache archives only (issue 22, item 2):
the condition on its objectCreator grant, and the storage fake enforcing it by Cloud Storage's
documented rule (an object's resource.name is projects/_/buckets/BUCKET/objects/OBJECT)."""

# ruff: noqa: S310 - every URL opened here is a loopback fake started by the test

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.storage import FakeStorage, condition_holds
from tpudeploy.config import parse_config
from tpudeploy.render import cache_object_prefix, cache_write_condition, compile_cache_key

PROJECT = "scope-proj"
CFG = parse_config({"project": PROJECT})
BUCKET = CFG.compile_cache_bucket(PROJECT)
NODE = f"serviceAccount:{CFG.service_account_id}@{PROJECT}.iam.gserviceaccount.com"
DIGEST = "d" * 64


def test_the_grant_names_this_configurations_key_as_cloud_storage_spells_objects() -> None:
    condition = cache_write_condition(CFG, BUCKET)
    key = compile_cache_key(CFG)
    assert condition["expression"] == (
        f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/xla/{key}/")'
    )
    assert cache_object_prefix(CFG) == f"xla/{key}/"


def test_a_pinned_image_narrows_the_grant_to_its_one_archive() -> None:
    pinned = parse_config({"project": PROJECT, "vllm": {"image": f"vllm/vllm-tpu@sha256:{DIGEST}"}})
    key = compile_cache_key(pinned)
    expression = cache_write_condition(pinned, BUCKET)["expression"]
    assert expression == (
        f'resource.name == "projects/_/buckets/{BUCKET}/objects/xla/{key}/{DIGEST}.tar.gz"'
    )


@pytest.fixture
def gcs() -> Iterator[FakeStorage]:
    inventory = Inventory()
    inventory.enable(PROJECT, "storage.googleapis.com")
    email = NODE.removeprefix("serviceAccount:")
    inventory.put("iam", f"projects/{PROJECT}/serviceAccounts/{email}", {"email": email})
    with FakeStorage(inventory) as fake:
        yield fake


def call(
    gcs: FakeStorage, method: str, path: str, body: Any = None, token: str = ""
) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(
        f"http://{gcs.host}{path}", data=data, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def bucket_with_node_grant(gcs: FakeStorage, *, uniform: bool = True, version: int = 3) -> int:
    bucket = {
        "name": BUCKET,
        "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": uniform}},
    }
    assert call(gcs, "POST", f"/storage/v1/b?project={PROJECT}", bucket)[0] == 200
    policy = {
        "version": version,
        "bindings": [
            {"role": "roles/storage.objectViewer", "members": [NODE]},
            {
                "role": "roles/storage.objectCreator",
                "members": [NODE],
                "condition": cache_write_condition(CFG, BUCKET),
            },
        ],
    }
    return call(gcs, "PUT", f"/storage/v1/b/{BUCKET}/iam", policy)[0]


def test_the_node_creates_its_own_archive_and_cannot_plant_another_configs(
    gcs: FakeStorage,
) -> None:
    """Issue 22, item 2: with objectCreator on the whole bucket, an archive planted for
    max_model_len = 16384 was restored by the next boot of that configuration."""
    assert bucket_with_node_grant(gcs) == 200
    token = gcs.inventory.mint_token(NODE)
    own = f"/{BUCKET}/{cache_object_prefix(CFG)}{DIGEST}.tar.gz"
    assert call(gcs, "PUT", own, b"archive", token)[0] == 200
    assert call(gcs, "GET", own, token=token) == (200, b"archive")
    other = parse_config({"project": PROJECT, "vllm": {"max_model_len": 16384}})
    plant = f"/{BUCKET}/{cache_object_prefix(other)}{DIGEST}.tar.gz"
    assert cache_object_prefix(other) != cache_object_prefix(CFG)
    assert call(gcs, "PUT", plant, b"planted", token)[0] == 403
    # Nor beside the key: the prefix ends with its slash.
    beside = f"/{BUCKET}/{cache_object_prefix(CFG).rstrip('/')}x/{DIGEST}.tar.gz"
    assert call(gcs, "PUT", beside, b"planted", token)[0] == 403
    assert gcs.objects(BUCKET) == {f"{cache_object_prefix(CFG)}{DIGEST}.tar.gz": 1}


@pytest.mark.parametrize(("uniform", "version"), [(False, 3), (True, 1)])
def test_conditions_need_uniform_access_and_policy_version_3(
    gcs: FakeStorage, uniform: bool, version: int
) -> None:
    assert bucket_with_node_grant(gcs, uniform=uniform, version=version) == 400


@pytest.mark.parametrize(
    ("expression", "holds"),
    [
        ('resource.name.startsWith("projects/_/buckets/b/objects/xla/")', True),
        ('resource.name == "projects/_/buckets/b/objects/xla/k/d.tar.gz"', True),
        ('resource.type == "storage.googleapis.com/Object" && resource.name == "x"', False),
        ('resource.name == "x" || resource.type == "storage.googleapis.com/Object"', True),
        # What the fake cannot read grants nothing (the bucket's own name is not an object's).
        ('resource.name.endsWith(".tar.gz")', False),
        ('resource.name.startsWith("b/xla/")', False),
    ],
)
def test_condition_language(expression: str, holds: bool) -> None:
    attributes = {
        "name": "projects/_/buckets/b/objects/xla/k/d.tar.gz",
        "type": "storage.googleapis.com/Object",
        "service": "storage.googleapis.com",
    }
    assert condition_holds(expression, attributes) is holds
