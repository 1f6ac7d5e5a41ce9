"""The state bucket's client: what buckets.insert is sent, and an existing bucket's settings
judged from buckets.get's answer (the fake Cloud Storage's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.storage import FakeStorage
from tpudeploy.gcp.statebucket import StateBucketApi, StateBucketSpec, missing_settings

PROJECT = "bucket-proj"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[StateBucketApi]:
    inventory = Inventory()
    inventory.enable(PROJECT, "storage.googleapis.com")
    with FakeStorage(inventory) as fake:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake.host)
        yield StateBucketApi.from_env()


def test_a_created_bucket_reads_back_with_nothing_missing(api: StateBucketApi) -> None:
    assert api.get("fresh-tfstate") is None
    api.insert(PROJECT, StateBucketSpec("fresh-tfstate", "US-WEST4", noncurrent_versions=3))
    got = api.get("fresh-tfstate")
    assert got is not None
    assert missing_settings(got) == []
    assert got["lifecycle"]["rule"][0]["condition"] == {"isLive": False, "numNewerVersions": 3}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"versioning": {"enabled": False}}, "versioning"),
        ({"iamConfiguration": {"publicAccessPrevention": "enforced"}}, "uniform bucket-level"),
        (
            {"iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}}},
            "public access prevention",
        ),
    ],
)
def test_each_missing_setting_is_named_with_its_fix(
    api: StateBucketApi, change: dict[str, object], named: str
) -> None:
    body = {**StateBucketSpec("old-tfstate", "US").body(), **change}
    api.session.post(
        f"{api.base_url}/storage/v1/b", params={"project": PROJECT}, json=body, timeout=5
    )
    got = api.get("old-tfstate")
    assert got is not None
    missing = missing_settings(got)
    assert len(missing) == 1
    assert missing[0].startswith(named)
    assert "gcloud storage buckets update gs://old-tfstate" in missing[0]


def test_the_fake_takes_a_generation_matched_lock_once(api: StateBucketApi) -> None:
    """What Terraform's gcs backend relies on to lock: ifGenerationMatch=0 creates only when no
    live version exists; a delete under the wrong generation is refused."""
    api.insert(PROJECT, StateBucketSpec("lock-tfstate", "US"))
    upload = f"{api.base_url}/upload/storage/v1/b/lock-tfstate/o"
    params = {"uploadType": "media", "name": "s/default.tflock", "ifGenerationMatch": "0"}
    first = api.session.post(upload, params=params, data=b"{}", timeout=5)
    assert first.status_code == 200
    assert api.session.post(upload, params=params, data=b"{}", timeout=5).status_code == 412
    generation = first.json()["generation"]
    lock = f"{api.base_url}/storage/v1/b/lock-tfstate/o/s%2Fdefault.tflock"
    stale = str(int(generation) + 1)
    wrong = api.session.delete(lock, params={"ifGenerationMatch": stale}, timeout=5)
    assert wrong.status_code == 412
    right = api.session.delete(lock, params={"ifGenerationMatch": generation}, timeout=5)
    assert right.status_code == 204
    assert api.session.post(upload, params=params, data=b"{}", timeout=5).status_code == 200
