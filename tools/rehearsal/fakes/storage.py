"""Loopback fake of Cloud Storage: buckets and their IAM (JSON API), objects (XML and JSON API).

Like the real service: bucket names are global, a bucket with objects (any generation) cannot be
deleted, and a caller other than the owner needs a bucket-level role for each object operation.
"""

from __future__ import annotations

import re
from typing import Any

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error

SERVICE = "storage.googleapis.com"
_BUCKETS = r"/storage/v1/b"
_BUCKET = _BUCKETS + r"/(?P<bucket>[^/]+)"
_OBJECT = r"/(?P<bucket>[a-z0-9][a-z0-9._-]{1,61}[a-z0-9])/(?P<object>.+)"


class FakeStorage(ApiFake):
    api = "storage"

    def routes(self) -> None:
        b = "storage.buckets."
        self.route("POST", _BUCKETS, self._insert, (b + "create",))
        self.route("GET", _BUCKET, self._get, (b + "get",))
        self.route("PATCH", _BUCKET, self._patch, (b + "update",))
        self.route("DELETE", _BUCKET, self._delete, (b + "delete",))
        self.route("GET", _BUCKET + r"/iam", self._get_policy, (b + "getIamPolicy",))
        self.route("PUT", _BUCKET + r"/iam", self._set_policy, (b + "setIamPolicy",))
        self.route("GET", _BUCKET + r"/o", self._list)
        self.route("DELETE", _BUCKET + r"/o/(?P<object>.+)", self._delete_object)
        # The XML API the node's boot script uses: GET / PUT of one object.
        self.route("GET", _OBJECT, self._download)
        self.route("PUT", _OBJECT, self._upload)

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Any]:
        """The project (where a bucket is created: ?project=) and the bucket."""
        name = m.groupdict().get("bucket") or str((body or {}).get("name", ""))
        existing = self._bucket(name) or {}
        project = query.get("project") or str(existing.get("_project", ""))
        return [iamrules.project(project), iamrules.bucket(project, name)]

    def _bucket(self, name: str) -> dict[str, Any] | None:
        return self.inventory.get(self.api, f"b/{name}")

    def _insert(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        project = query.get("project", "")
        disabled = self.inventory.require_service(project, SERVICE)
        if disabled:
            return disabled
        bucket = dict(body or {})
        name = str(bucket.get("name", ""))
        if self._bucket(name) is not None:
            return api_error(
                409,
                "The requested bucket name is not available. The bucket namespace is shared by "
                "all users of the system. Please select a different name and try again.",
            )
        bucket.update(
            kind="storage#bucket",
            id=name,
            selfLink=f"http://{self.host}/storage/v1/b/{name}",
            projectNumber="123456789012",
            storageClass=bucket.get("storageClass", "STANDARD"),
            timeCreated="2026-08-09T16:00:00.000Z",
            updated="2026-08-09T16:00:00.000Z",
            metageneration="1",
            etag="CAE=",
            _project=project,
            _objects={},
        )
        self.inventory.put(self.api, f"b/{name}", bucket)
        return 200, _public(bucket)

    def _get(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        return 200, _public(bucket)

    def _patch(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        bucket.update({k: v for k, v in (body or {}).items() if not k.startswith("_")})
        return 200, _public(bucket)

    def _delete(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        if any(bucket["_objects"].values()):
            return api_error(409, "The bucket you tried to delete is not empty.")
        self.inventory.delete(self.api, f"b/{m['bucket']}")
        return 204, b""

    def _get_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        if self._bucket(m["bucket"]) is None:
            return api_error(404, "The specified bucket does not exist.")
        bindings = self.inventory.policy(self.api, f"b/{m['bucket']}")
        return 200, {"kind": "storage#policy", "etag": f"CA{len(bindings)}=", "bindings": bindings}

    def _set_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        if self._bucket(m["bucket"]) is None:
            return api_error(404, "The specified bucket does not exist.")
        bindings = list((body or {}).get("bindings") or [])
        refused = self.inventory.check_members(bindings)
        if refused:
            return refused
        policy = self.inventory.policy(self.api, f"b/{m['bucket']}")
        policy[:] = bindings
        return 200, {"kind": "storage#policy", "etag": f"CA{len(bindings)}=", "bindings": bindings}

    def _list(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        if not self.inventory.allowed(who, self.api, f"b/{m['bucket']}", "storage.objects.list"):
            return api_error(403, f"{who} does not have storage.objects.list access")
        versions = query.get("versions") == "true"
        prefix = query.get("prefix", "")
        items = []
        for name, generations in sorted(bucket["_objects"].items()):
            if not name.startswith(prefix):
                continue
            shown = generations if versions else generations[-1:]
            for generation, data in shown:
                items.append(
                    {
                        "name": name,
                        "bucket": m["bucket"],
                        "generation": str(generation),
                        "size": str(len(data)),
                    }
                )
        if query.get("maxResults", "").isdigit():
            items = items[: int(query["maxResults"])]
        return 200, {"kind": "storage#objects", "items": items}

    def _delete_object(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        if not self.inventory.allowed(who, self.api, f"b/{m['bucket']}", "storage.objects.delete"):
            return api_error(403, f"{who} does not have storage.objects.delete access")
        generations = bucket["_objects"].get(m["object"], [])
        wanted = query.get("generation")
        kept = [g for g in generations if wanted and str(g[0]) != wanted]
        if len(kept) == len(generations):
            return api_error(404, f"No such object: {m['bucket']}/{m['object']}")
        bucket["_objects"][m["object"]] = kept
        return 204, b""

    def _download(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return 404, b"<Error><Code>NoSuchBucket</Code></Error>"
        if not self.inventory.allowed(who, self.api, f"b/{m['bucket']}", "storage.objects.get"):
            return 403, b"<Error><Code>AccessDenied</Code></Error>"
        generations = bucket["_objects"].get(m["object"])
        if not generations:
            return 404, b"<Error><Code>NoSuchKey</Code></Error>"
        data: bytes = generations[-1][1]
        return 200, data

    def _upload(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return 404, b"<Error><Code>NoSuchBucket</Code></Error>"
        key = f"b/{m['bucket']}"
        existing = bucket["_objects"].get(m["object"])
        # Create-only uploads: the precondition fails before any permission is looked at.
        if existing and self.headers.get("x-goog-if-generation-match") == "0":
            return 412, b"<Error><Code>PreconditionFailed</Code></Error>"
        # Replacing an object needs delete as well as create (objectCreator cannot).
        needed = ["storage.objects.create"] + (["storage.objects.delete"] if existing else [])
        if not all(self.inventory.allowed(who, self.api, key, p) for p in needed):
            return 403, b"<Error><Code>AccessDenied</Code></Error>"
        data = body if isinstance(body, bytes) else b"" if body is None else repr(body).encode()
        generations = existing or []
        if not (bucket.get("versioning") or {}).get("enabled"):
            generations = []
        generations.append((self.inventory.next_id(), data))
        bucket["_objects"][m["object"]] = generations
        return 200, b""

    # ---- for the rehearsal's checks

    def objects(self, bucket: str) -> dict[str, int]:
        """Object name -> number of generations kept."""
        with self.inventory.locked():
            found = self._bucket(bucket)
            return {k: len(v) for k, v in (found or {}).get("_objects", {}).items() if v}


def _public(bucket: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in bucket.items() if not k.startswith("_")}
