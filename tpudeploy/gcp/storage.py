"""`make destroy-all`'s first step: delete every archive (all generations) in the compile-cache
bucket, so that Terraform may delete the bucket.

The bucket keeps `force_destroy = false` (stacks/secrets.py): a plan that replaces it must never
drop the cache silently, and Cloud Storage refuses to delete a bucket that holds any object
version. Emptying it is therefore an explicit, confirmed step of destroying everything.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO
from urllib.parse import quote

from tpudeploy.config import DeployConfig
from tpudeploy.errors import UserError
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import STORAGE


class CacheBucketError(UserError):
    """A Cloud Storage call that failed; the message says what to do."""


class CacheBucket:
    """The JSON API calls needed: list object generations, delete one generation."""

    def __init__(self, *, session: Any, base_url: str = STORAGE.base_url) -> None:
        self.session = session
        self.base_url = base_url.rstrip("/")

    @classmethod
    def from_env(cls) -> CacheBucket:
        """STORAGE_EMULATOR_HOST=host:port (the client libraries' convention) means plain HTTP
        and no credentials; otherwise Application Default Credentials (tpudeploy/gcp/session.py)."""
        session, base_url = gcp_session.session(STORAGE, CacheBucketError)
        return cls(session=session, base_url=base_url)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The answer's JSON ({} for an empty one); None when the bucket or object is gone."""
        failures = gcp_session.Failures(
            CacheBucketError,
            unreachable="cannot reach Cloud Storage ({error}); check the network",
            refused=(
                f"Cloud Storage refused {method} {path} (HTTP {{status}}): your "
                "account needs roles/storage.admin on the bucket, and fresh credentials "
                "(`gcloud auth application-default login`)"
            ),
            otherwise=f"Cloud Storage answered HTTP {{status}} for {path}",
        )
        response = gcp_session.call(
            self.session,
            method,
            self.base_url + path,
            failures,
            timeout=60,
            ok=(200, 204),
            allow_404=True,
            **kwargs,
        )
        if response is None:
            return None
        return response.json() if response.content else {}

    def generations(self, bucket: str) -> list[tuple[str, str]] | None:
        """(object, generation) of every version in `bucket`; None when the bucket is gone."""
        found: list[tuple[str, str]] = []
        token = ""
        while True:
            params = {"versions": "true", **({"pageToken": token} if token else {})}
            page = self._call("GET", f"/storage/v1/b/{quote(bucket)}/o", params=params)
            if page is None:
                return None
            found += [(item["name"], str(item["generation"])) for item in page.get("items", [])]
            token = page.get("nextPageToken", "")
            if not token:
                return found

    def delete(self, bucket: str, name: str, generation: str) -> None:
        path = f"/storage/v1/b/{quote(bucket)}/o/{quote(name, safe='')}"
        self._call("DELETE", path, params={"generation": generation})


def empty_cache(
    cfg: DeployConfig,
    project: str,
    store: CacheBucket,
    *,
    assume_yes: bool,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    """Delete every generation in the compile-cache bucket after a confirmation (or --yes)."""
    out = out or sys.stdout
    stdin = stdin or sys.stdin
    bucket = cfg.compile_cache_bucket(project)
    versions = store.generations(bucket)
    if not versions:
        print(f"compile cache gs://{bucket}: nothing to delete", file=out)
        return 0
    print(
        f"compile cache gs://{bucket} holds {len(versions)} archive version(s); destroying "
        "everything deletes them (the next node compiles cold: 857 s instead of 497 s in the "
        "build log)",
        file=out,
    )
    if not assume_yes:
        if not stdin.isatty():
            print(
                "error: not deleting without confirmation: run `make destroy-all AUTO_APPROVE=1`",
                file=out,
            )
            return 2
        print("delete them? type yes: ", end="", file=out, flush=True)
        if stdin.readline().strip() != "yes":
            print("kept the compile cache; nothing destroyed", file=out)
            return 1
    for name, generation in versions:
        store.delete(bucket, name, generation)
    print(f"deleted {len(versions)} archive version(s) from gs://{bucket}", file=out)
    return 0
