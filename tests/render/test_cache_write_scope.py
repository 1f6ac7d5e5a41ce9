"""The node may create its own configuration's compile-cache archives only (issue 22, item 2):
the condition on its objectCreator grant, and the storage fake enforcing it by Cloud Storage's
documented rule (an object's resource.name is projects/_/buckets/BUCKET/objects/OBJECT)."""

# ruff: noqa: S310 - every URL opened here is a loopback fake started by the test

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.storage import FakeStorage, condition_holds
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.render import (
    cache_bucket_grants,
    cache_object_prefix,
    cache_write_condition,
    compile_cache_key,
)

PROJECT = "scope-proj"
CFG = parse_config({"project": PROJECT})
BUCKET = CFG.compile_cache_bucket(PROJECT)
NODE = f"serviceAccount:{CFG.service_account_id}@{PROJECT}.iam.gserviceaccount.com"
DIGEST = "d" * 64
PINNED = parse_config({"project": PROJECT, "vllm": {"image": f"vllm/vllm-tpu@sha256:{DIGEST}"}})
ROOT = Path(__file__).resolve().parents[2]
# The condition block of google_storage_bucket_iam_member (and of the GKE stack's same grant):
# expression and title Required, description Optional, nothing else
# (https://registry.terraform.io/providers/hashicorp/google-beta/latest/docs/resources/
# storage_bucket_iam#condition); IAM itself: "The condition's title is required, but the
# description is optional" (https://cloud.google.com/iam/docs/conditions-overview). The stacks
# pass the dict as the block's keyword arguments, so any other key breaks the synth.
CONDITION_BLOCK = {"expression": True, "title": True, "description": False}


def test_the_grant_names_this_configurations_key_as_cloud_storage_spells_objects() -> None:
    condition = cache_write_condition(CFG, BUCKET)
    key = compile_cache_key(CFG)
    assert condition["expression"] == (
        f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/xla/{key}/")'
    )
    assert cache_object_prefix(CFG) == f"xla/{key}/"


def test_a_pinned_image_narrows_the_grant_to_its_one_archive() -> None:
    key = compile_cache_key(PINNED)
    expression = cache_write_condition(PINNED, BUCKET)["expression"]
    assert expression == (
        f'resource.name == "projects/_/buckets/{BUCKET}/objects/xla/{key}/{DIGEST}.tar.gz"'
    )


@pytest.mark.parametrize("cfg", [CFG, PINNED], ids=["tag", "pinned"])
def test_the_condition_is_a_block_terraform_and_iam_accept(cfg: DeployConfig) -> None:
    condition = cache_write_condition(cfg, BUCKET)
    assert set(condition) <= set(CONDITION_BLOCK), f"not a condition block field: {condition}"
    for field, required in CONDITION_BLOCK.items():
        assert not required or condition.get(field), f"{field} is required"


def test_the_condition_titles_are_the_ones_the_security_docs_tell_an_auditor_to_look_for() -> None:
    """What the console and get-iam-policy list is the title: docs/security.md names both."""
    docs = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    section = docs.partition("## Compile cache: who may write which archive")[2]
    named = set(re.findall(r"`(this-[a-z-]+-only)`", section))
    titles = {cache_write_condition(c, BUCKET)["title"] for c in (CFG, PINNED)}
    assert titles == named and len(titles) == 2


def test_the_grants_keep_the_terraform_addresses_live_deployments_hold() -> None:
    """Both platforms declare these grants (stacks/secrets.py, stacks/gke/cluster.py) as
    google_storage_bucket_iam_member.compile-cache-SUFFIX, the address every live deployment's
    state holds and the rehearsal's deliberate break edits (tests/rehearsal_breaks.py): a
    renamed suffix would make the next apply replace both bindings. What the roles allow is
    checked against the storage fake below."""
    grants = cache_bucket_grants(CFG, BUCKET)
    breaks = (ROOT / "tests" / "rehearsal_breaks.py").read_text(encoding="utf-8")
    assert '["compile-cache-writer"]' in breaks and "writer" in grants
    assert sorted(grants) == ["reader", "writer"]
    assert grants["reader"][1] is None
    assert grants["writer"][1] == cache_write_condition(CFG, BUCKET)


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
    # The node's grants exactly as the stacks declare them.
    bindings: list[dict[str, Any]] = []
    for role, condition in cache_bucket_grants(CFG, BUCKET).values():
        binding: dict[str, Any] = {"role": role, "members": [NODE]}
        if condition:
            binding["condition"] = condition
        bindings.append(binding)
    policy = {"version": version, "bindings": bindings}
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
    # Neither role replaces an archive (that needs storage.objects.delete).
    assert call(gcs, "PUT", own, b"replaced", token)[0] == 403
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


@pytest.mark.parametrize("field", ["title", "expression"])
def test_the_fake_refuses_a_condition_without_its_required_fields(
    gcs: FakeStorage, field: str
) -> None:
    bucket = {"name": BUCKET, "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}}}
    assert call(gcs, "POST", f"/storage/v1/b?project={PROJECT}", bucket)[0] == 200
    condition = {k: v for k, v in cache_write_condition(CFG, BUCKET).items() if k != field}
    binding = {"role": "roles/storage.objectCreator", "members": [NODE], "condition": condition}
    status, answer = call(
        gcs, "PUT", f"/storage/v1/b/{BUCKET}/iam", {"version": 3, "bindings": [binding]}
    )
    assert (status, field in answer.decode()) == (400, True)


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
