"""Loopback fake of Cloud Storage: buckets and their IAM (JSON API), objects (XML and JSON API).

Like the real service: bucket names are global, a bucket with objects (any generation) cannot be
deleted, and a caller other than the owner needs a bucket-level role for each object operation.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error
from tools.rehearsal.fakes.inventory import OWNER, ROLE_PERMISSIONS

SERVICE = "storage.googleapis.com"

# IAM Conditions on Cloud Storage, as its documentation states them. The resource attributes a
# condition sees (https://cloud.google.com/iam/docs/conditions-resource-attributes): an object is
# projects/_/buckets/BUCKET/objects/OBJECT of type storage.googleapis.com/Object, a bucket
# projects/_/buckets/BUCKET of type storage.googleapis.com/Bucket. A bucket policy with
# conditions needs uniform bucket-level access (https://cloud.google.com/storage/docs/
# access-control/iam) and policy version 3 or greater (https://cloud.google.com/storage/docs/
# json_api/v1/buckets/setIamPolicy).
OBJECT_NAME = "projects/_/buckets/{bucket}/objects/{object}"
BUCKET_NAME = "projects/_/buckets/{bucket}"
OBJECT_TYPE = "storage.googleapis.com/Object"
BUCKET_TYPE = "storage.googleapis.com/Bucket"
CONDITIONS_MIN_POLICY_VERSION = 3
# A condition's fields: "The condition's title is required, but the description is optional ...
# The expression field is required" (https://cloud.google.com/iam/docs/conditions-overview).
CONDITION_REQUIRED_FIELDS = ("title", "expression")
# The CEL the fake reads: comparisons of resource.name / .type / .service joined by && or ||
# (&& binds tighter, as in CEL). Anything else it cannot read grants nothing: a fake must never
# be kinder than the service.
_COMPARISON = re.compile(
    r"\s*resource\.(?P<attr>name|type|service)"
    r'(?:\.startsWith\(\s*"(?P<prefix>[^"\\]*)"\s*\)|\s*==\s*"(?P<equal>[^"\\]*)")\s*'
)


def condition_holds(expression: str, attributes: dict[str, str]) -> bool:
    """Whether a bucket-policy condition grants on a resource with these attributes."""
    for alternative in expression.split("||"):
        terms = [_COMPARISON.fullmatch(term) for term in alternative.split("&&")]
        if all(terms) and all(_term_holds(t, attributes) for t in terms if t):
            return True
    return False


def _term_holds(term: re.Match[str], attributes: dict[str, str]) -> bool:
    value = attributes.get(term["attr"], "")
    if term["prefix"] is not None:
        return value.startswith(term["prefix"])
    return bool(value == term["equal"])


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
        # The JSON API's object calls Terraform's gcs backend makes (cloud.google.com/go/storage
        # behind storage_custom_endpoint): metadata or media of one object, a one-request
        # upload, a delete under a generation precondition.
        self.route("GET", _BUCKET + r"/o/(?P<object>.+)", self._object)
        self.route("POST", r"/upload" + _BUCKET + r"/o", self._insert_object)
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
        version = (self._bucket(m["bucket"]) or {}).get("_policy_version", 1)
        return 200, {
            "kind": "storage#policy",
            "version": version,
            "etag": f"CA{len(bindings)}=",
            "bindings": bindings,
        }

    def _set_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        if self._bucket(m["bucket"]) is None:
            return api_error(404, "The specified bucket does not exist.")
        bindings = list((body or {}).get("bindings") or [])
        refused = self.inventory.check_members(bindings)
        if refused:
            return refused
        if any(b.get("condition") for b in bindings):
            bucket = self._bucket(m["bucket"]) or {}
            uniform = (bucket.get("iamConfiguration") or {}).get("uniformBucketLevelAccess") or {}
            if not uniform.get("enabled"):
                return api_error(
                    400, "IAM conditions need uniform bucket-level access enabled on the bucket."
                )
            if int((body or {}).get("version") or 1) < CONDITIONS_MIN_POLICY_VERSION:
                return api_error(
                    400, "A policy with IAM conditions must have version 3 or greater."
                )
            for binding in bindings:
                condition = binding.get("condition") or {}
                missing = [
                    f for f in CONDITION_REQUIRED_FIELDS if condition and not condition.get(f)
                ]
                if missing:
                    return api_error(400, f"An IAM condition needs a {missing[0]}.")
        policy = self.inventory.policy(self.api, f"b/{m['bucket']}")
        policy[:] = bindings
        (self._bucket(m["bucket"]) or {})["_policy_version"] = int((body or {}).get("version") or 1)
        return 200, {"kind": "storage#policy", "etag": f"CA{len(bindings)}=", "bindings": bindings}

    def _list(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        if not self._allowed(who, m["bucket"], None, "storage.objects.list"):
            return api_error(403, f"{who} does not have storage.objects.list access")
        versions = query.get("versions") == "true"
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "")
        items = []
        prefixes: set[str] = set()
        for name, generations in sorted(bucket["_objects"].items()):
            if not name.startswith(prefix) or not generations:
                continue
            # Delimited: "items will contain only objects whose names, aside from the prefix,
            # do not contain delimiter"; the rest are folded into `prefixes` (objects.list).
            rest = name[len(prefix) :]
            if delimiter and delimiter in rest:
                prefixes.add(prefix + rest[: rest.index(delimiter) + len(delimiter)])
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
        listed: dict[str, Any] = {"kind": "storage#objects", "items": items}
        if prefixes:
            listed["prefixes"] = sorted(prefixes)
        return 200, listed

    def _delete_object(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        if not self._allowed(who, m["bucket"], m["object"], "storage.objects.delete"):
            return api_error(403, f"{who} does not have storage.objects.delete access")
        generations = bucket["_objects"].get(m["object"], [])
        unmet = _precondition(generations, query)
        if unmet:
            return unmet
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
        if not self._allowed(who, m["bucket"], m["object"], "storage.objects.get"):
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
        existing = bucket["_objects"].get(m["object"])
        # Create-only uploads: the precondition fails before any permission is looked at.
        if existing and self.headers.get("x-goog-if-generation-match") == "0":
            return 412, b"<Error><Code>PreconditionFailed</Code></Error>"
        # Replacing an object needs delete as well as create (objectCreator cannot).
        needed = ["storage.objects.create"] + (["storage.objects.delete"] if existing else [])
        if not all(self._allowed(who, m["bucket"], m["object"], p) for p in needed):
            return 403, b"<Error><Code>AccessDenied</Code></Error>"
        data = body if isinstance(body, bytes) else b"" if body is None else repr(body).encode()
        generations = existing or []
        if not (bucket.get("versioning") or {}).get("enabled"):
            generations = []
        generations.append((self.inventory.next_id(), data))
        bucket["_objects"][m["object"]] = generations
        return 200, b""

    def _object(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        """objects.get: the live generation's metadata, or its bytes with alt=media."""
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        if not self._allowed(who, m["bucket"], m["object"], "storage.objects.get"):
            return api_error(403, f"{who} does not have storage.objects.get access")
        generations = bucket["_objects"].get(m["object"])
        if not generations:
            return api_error(404, f"No such object: {m['bucket']}/{m['object']}")
        generation, data = generations[-1]
        if query.get("alt") == "media":
            return 200, bytes(data)
        return 200, _object_resource(m["bucket"], m["object"], generation, data)

    def _insert_object(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        """objects.insert, uploadType=multipart (metadata then media, one request) or media."""
        bucket = self._bucket(m["bucket"])
        if bucket is None:
            return api_error(404, "The specified bucket does not exist.")
        kind = query.get("uploadType", "")
        if kind == "multipart":
            parsed = _multipart(self.headers.get("content-type", ""), body)
            if parsed is None:
                return api_error(400, "Invalid multipart request.")
            name, data = str(parsed[0].get("name") or query.get("name", "")), parsed[1]
        elif kind == "media":
            name = query.get("name", "")
            data = body if isinstance(body, bytes) else b""
        else:
            return api_error(400, f"the fake storage API takes no uploadType {kind!r}")
        if not name:
            return api_error(400, "Required parameter: name")
        existing = bucket["_objects"].get(name) or []
        unmet = _precondition(existing, query)
        if unmet:
            return unmet
        needed = ["storage.objects.create"] + (["storage.objects.delete"] if existing else [])
        if not all(self._allowed(who, m["bucket"], name, p) for p in needed):
            return api_error(403, f"{who} does not have storage.objects.create access")
        generations = existing if (bucket.get("versioning") or {}).get("enabled") else []
        generation = self.inventory.next_id()
        generations.append((generation, data))
        bucket["_objects"][name] = generations
        return 200, _object_resource(m["bucket"], name, generation, data)

    def _allowed(self, who: str, bucket: str, obj: str | None, permission: str) -> bool:
        """Owner always; otherwise a bucket binding for `who` whose role holds `permission` and
        whose condition, if any, holds on the object (or on the bucket when obj is None)."""
        if who == OWNER:
            return True
        attributes = (
            {"name": OBJECT_NAME.format(bucket=bucket, object=obj), "type": OBJECT_TYPE}
            if obj is not None
            else {"name": BUCKET_NAME.format(bucket=bucket), "type": BUCKET_TYPE}
        )
        attributes["service"] = SERVICE
        service = permission.split(".", 1)[0]
        for binding in self.inventory.policies.get(f"{self.api}/b/{bucket}", []):
            if who not in binding.get("members", []):
                continue
            granted = ROLE_PERMISSIONS.get(str(binding.get("role")), set())
            if not ({permission, "*", f"{service}.*"} & granted):
                continue
            condition = binding.get("condition")
            if not condition or condition_holds(str(condition.get("expression", "")), attributes):
                return True
        return False

    # ---- for the rehearsal's checks

    def objects(self, bucket: str) -> dict[str, int]:
        """Object name -> number of generations kept."""
        with self.inventory.locked():
            found = self._bucket(bucket)
            return {k: len(v) for k, v in (found or {}).get("_objects", {}).items() if v}


def _public(bucket: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in bucket.items() if not k.startswith("_")}


def _precondition(generations: list[Any], query: dict[str, str]) -> Answer | None:
    """ifGenerationMatch: "Makes the operation conditional on whether the object's current
    generation matches the given value. Setting to 0 makes the operation succeed only if there
    are no live versions of the object" (objects.insert / objects.delete, JSON API). Terraform's
    gcs backend takes its lock with ifGenerationMatch=0 and releases it with the lock's own."""
    wanted = query.get("ifGenerationMatch")
    if wanted is None:
        return None
    live = str(generations[-1][0]) if generations else "0"
    if live != wanted:
        return api_error(412, "At least one of the pre-conditions you specified did not hold.")
    return None


def _object_resource(bucket: str, name: str, generation: Any, data: bytes) -> dict[str, Any]:
    return {
        "kind": "storage#object",
        "bucket": bucket,
        "name": name,
        "generation": str(generation),
        "metageneration": "1",
        "size": str(len(data)),
        "contentType": "application/octet-stream",
        "timeCreated": "2026-08-09T16:00:00.000Z",
        "updated": "2026-08-09T16:00:00.000Z",
    }


def _multipart(content_type: str, body: Any) -> tuple[dict[str, Any], bytes] | None:
    """A multipart/related upload's metadata (JSON) and media parts."""
    if not isinstance(body, bytes) or "boundary=" not in content_type:
        return None
    boundary = content_type.split("boundary=", 1)[1].split(";")[0].strip().strip('"')
    parts = body.split(b"--" + boundary.encode())
    sections = []
    for part in parts[1:]:
        if part.startswith(b"--"):
            break
        _head, _, content = part.partition(b"\r\n\r\n")
        sections.append(content[:-2] if content.endswith(b"\r\n") else content)
    if len(sections) != 2:
        return None
    try:
        metadata = json.loads(sections[0])
    except ValueError:
        return None
    return (metadata if isinstance(metadata, dict) else {}), sections[1]
