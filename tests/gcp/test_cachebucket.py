"""`make destroy-all`'s first step: the compile-cache bucket emptied, all generations, confirmed."""

# ruff: noqa: S310 - every URL opened here is a loopback fake started by the test

from __future__ import annotations

import io
import json
import urllib.request
from collections.abc import Iterator

import pytest

from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.storage import FakeStorage
from tpudeploy.config import parse_config
from tpudeploy.gcp.storage import CacheBucket, CacheBucketError, empty_cache

PROJECT = "cache-proj"
CFG = parse_config({"project": PROJECT})
BUCKET = CFG.compile_cache_bucket(PROJECT)


class Stdin(io.StringIO):
    def __init__(self, text: str, tty: bool) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def gcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeStorage]:
    inventory = Inventory()
    inventory.enable(PROJECT, "storage.googleapis.com")
    with FakeStorage(inventory) as fake:
        assert isinstance(fake, FakeStorage)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake.host)
        yield fake


def make_bucket(gcs: FakeStorage, archives: dict[str, int]) -> None:
    """The bucket, versioned like the stack's, with `count` uploads of each archive."""
    base = f"http://{gcs.host}"
    body = json.dumps({"name": BUCKET, "versioning": {"enabled": True}}).encode()
    create = urllib.request.Request(
        f"{base}/storage/v1/b?project={PROJECT}", data=body, method="POST"
    )
    urllib.request.urlopen(create, timeout=5).close()
    for name, count in archives.items():
        for i in range(count):
            put = urllib.request.Request(
                f"{base}/{BUCKET}/{name}",
                data=b"archive %d" % i,
                method="PUT",
                headers={"Content-Type": "application/gzip"},
            )
            urllib.request.urlopen(put, timeout=5).close()


def test_every_generation_goes_and_the_bucket_can_then_be_deleted(gcs: FakeStorage) -> None:
    make_bucket(gcs, {"xla/a/cache.tar.gz": 3, "xla/b/cache.tar.gz": 1})
    out = io.StringIO()
    assert empty_cache(CFG, PROJECT, CacheBucket.from_env(), assume_yes=True, out=out) == 0
    assert gcs.objects(BUCKET) == {}
    assert f"deleted 4 archive version(s) from gs://{BUCKET}" in out.getvalue()
    delete = urllib.request.Request(f"http://{gcs.host}/storage/v1/b/{BUCKET}", method="DELETE")
    urllib.request.urlopen(delete, timeout=5).close()


def test_nothing_is_deleted_without_a_confirmation(gcs: FakeStorage) -> None:
    make_bucket(gcs, {"xla/a/cache.tar.gz": 2})
    out = io.StringIO()
    rc = empty_cache(
        CFG, PROJECT, CacheBucket.from_env(), assume_yes=False, stdin=Stdin("", False), out=out
    )
    assert rc == 2 and "AUTO_APPROVE=1" in out.getvalue()
    rc = empty_cache(
        CFG, PROJECT, CacheBucket.from_env(), assume_yes=False, stdin=Stdin("no\n", True), out=out
    )
    assert rc == 1 and "kept the compile cache" in out.getvalue()
    assert gcs.objects(BUCKET) == {"xla/a/cache.tar.gz": 2}
    rc = empty_cache(
        CFG, PROJECT, CacheBucket.from_env(), assume_yes=False, stdin=Stdin("yes\n", True), out=out
    )
    assert rc == 0 and gcs.objects(BUCKET) == {}


def test_a_missing_or_empty_bucket_is_nothing_to_do(gcs: FakeStorage) -> None:
    out = io.StringIO()
    assert empty_cache(CFG, PROJECT, CacheBucket.from_env(), assume_yes=False, out=out) == 0
    assert "nothing to delete" in out.getvalue()


def test_refusals_are_errors_with_the_fix(gcs: FakeStorage) -> None:
    make_bucket(gcs, {"xla/a/cache.tar.gz": 1})
    store = CacheBucket.from_env()
    # Someone else's token: the fake answers 401 like Cloud Storage would.
    store.session.headers["Authorization"] = "Bearer ya29.not-yours"
    with pytest.raises(CacheBucketError, match=r"roles/storage\.admin"):
        store.generations(BUCKET)
