"""Loopback fake of a GKE cluster's Kubernetes API: it stores objects and validates each, as the
API server would, against the schemas of the cluster's own version.

Interface (for any test or tool that needs a cluster):

    k8s = FakeKubernetes(inventory)            # an ApiFake: start(), stop(), host
    k8s.open_cluster(key, cluster)             # the container fake calls this on create
    k8s.objects()                              # {"<apiVersion>/<plural>/<ns>/<name>": object}
    k8s.close_cluster(key)                     # on delete: every object goes with the cluster

REST paths are the API server's: /api/v1[/namespaces/NS]/PLURAL[/NAME] and
/apis/GROUP/VERSION[/namespaces/NS]/PLURAL[/NAME]; POST creates, GET reads, PUT replaces,
DELETE deletes. Every call needs a bearer token the fake cloud issued (the inventory's tokens).
What it refuses is tools/rehearsal/fakes/k8s_rules.py: core kinds by kubernetes-validate at the
cluster's minor (strict: an unknown field is refused, as a server-side field validation
`Strict` does), custom resources by their schemas in schemas/ (vendored), only for the CRDs the
cluster's add-ons install; names by Kubernetes' naming rules; a namespaced object needs its
namespace; a namespace's deletion deletes its objects.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from tools.rehearsal.fakes import iamrules, k8s_iam
from tools.rehearsal.fakes import k8s_rules as rules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer
from tools.rehearsal.fakes.inventory import Inventory

_CORE = (
    r"/api/(?P<version>v1)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?"
)
_GROUP = (
    r"/apis/(?P<group>[^/]+)/(?P<version>[^/]+)(?:/namespaces/(?P<ns>[^/]+))?"
    r"/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?"
)

_CORE_RE, _GROUP_RE = re.compile(_CORE), re.compile(_GROUP)
_CLUSTER_KEY = re.compile(r"projects/([^/]+)/locations/([^/]+)/clusters/([^/]+)")


def status(code: int, reason: str, message: str) -> Answer:
    """The API server's Status object for a failure."""
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeKubernetes(ApiFake):
    api = "k8s"

    def __init__(self, inventory: Inventory | None = None) -> None:
        self.cluster: str | None = None
        self.version = ""
        self.crds: dict[tuple[str, str], str | None] = {}
        # Custom resources stored without a schema to check them by (none published): named in
        # the rehearsal's report, never silently counted as validated.
        self.unchecked: set[str] = set()
        super().__init__(inventory)

    def routes(self) -> None:
        self.route("GET", r"/version", self._version)
        for pattern in (_CORE, _GROUP):
            self.route("POST", pattern, self._serve)
            self.route("PUT", pattern, self._serve)
            self.route("GET", pattern, self._serve)
            self.route("DELETE", pattern, self._remove)

    def _find(
        self, method: str, path: str, query: dict[str, str], body: Any, principal: str
    ) -> Answer:
        """GKE's authorization before anything else (tools/rehearsal/fakes/k8s_iam.py): a
        resource request needs its IAM permission on this cluster; discovery is open."""
        if self.cluster is not None and not k8s_iam.OPEN_PATHS.fullmatch(path):
            m = _CORE_RE.fullmatch(path) or _GROUP_RE.fullmatch(path)
            if m is not None:
                group = m.groupdict().get("group") or ""
                key = _CLUSTER_KEY.fullmatch(self.cluster)
                assert key is not None, self.cluster  # the container fake's own key
                cluster = iamrules.gke_cluster(*key.groups())
                request = (method, group, m["plural"], m["ns"], m["name"])
                at = self.inventory.request_time(self.headers)
                refused = k8s_iam.refusal(self.inventory, principal, cluster, request, body, at)
                if refused is not None:
                    return refused
        return super()._find(method, path, query, body, principal)

    # ---- the cluster's lifetime

    def open_cluster(self, key: str, cluster: dict[str, Any]) -> None:
        self.cluster = key
        self.version = rules.minor(str(cluster.get("currentMasterVersion", "")))
        self.crds = rules.installed_crds(cluster)
        for name in rules.INITIAL_NAMESPACES:
            self.inventory.put(
                self.api,
                f"v1/namespaces//{name}",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )

    def close_cluster(self, key: str) -> None:
        if self.cluster != key:
            return
        for name in self.inventory.names(self.api):
            self.inventory.delete(self.api, name)
        self.cluster = None

    def objects(self) -> dict[str, dict[str, Any]]:
        """What was created through the API (the cluster's initial namespaces left out)."""
        initial = {f"v1/namespaces//{name}" for name in rules.INITIAL_NAMESPACES}
        return {
            n: obj
            for n in self.inventory.names(self.api)
            if n not in initial and (obj := self.inventory.get(self.api, n))
        }

    # ---- requests

    def _version(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        if self.cluster is None:
            return status(503, "ServiceUnavailable", "no cluster: its control plane is gone")
        major, minor, _ = self.version.split(".")
        return 200, {"major": major, "minor": minor, "gitVersion": f"v{self.version}"}

    def _where(self, m: re.Match[str]) -> tuple[str, str, str | None, str | None]:
        group = m.groupdict().get("group") or ""
        api_version = f"{group}/{m['version']}" if group else m["version"]
        return api_version, m["plural"], m["ns"], m["name"]

    def _serve(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        """POST and PUT write `body`; GET reads one object."""
        if self.cluster is None:
            return status(503, "ServiceUnavailable", "no cluster: its control plane is gone")
        api_version, plural, ns, name = self._where(m)
        collection = f"{api_version}/{plural}/{ns or ''}"
        if isinstance(body, dict):
            return self._write(api_version, plural, ns, name, collection, body)
        if name is None:
            return status(405, "MethodNotAllowed", "the fake serves no lists")
        found = self.inventory.get(self.api, f"{collection}/{name}")
        if found is None:
            return status(404, "NotFound", f'{plural} "{name}" not found')
        return 200, found

    def _remove(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        if self.cluster is None:
            return status(503, "ServiceUnavailable", "no cluster: its control plane is gone")
        api_version, plural, ns, name = self._where(m)
        key = f"{api_version}/{plural}/{ns or ''}/{name}"
        found = self.inventory.get(self.api, key)
        if found is None:
            return status(404, "NotFound", f'{plural} "{name}" not found')
        return self._delete(key, found)

    def _delete(self, key: str, found: dict[str, Any]) -> Answer:
        self.inventory.delete(self.api, key)
        if found.get("kind") == "Namespace":
            name = found["metadata"]["name"]
            for other in self.inventory.names(self.api):
                if other.split("/")[-2] == name:
                    self.inventory.delete(self.api, other)
        return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}

    def _write(
        self,
        api_version: str,
        plural: str,
        ns: str | None,
        name: str | None,
        collection: str,
        body: dict[str, Any],
    ) -> Answer:
        kind = str(body.get("kind", ""))
        if body.get("apiVersion") != api_version or rules.plural(kind) != plural:
            return status(
                400,
                "BadRequest",
                f"the object's apiVersion/kind {body.get('apiVersion')}/{kind} does not belong "
                f"at {api_version}/{plural}",
            )
        meta = body.get("metadata") or {}
        object_name = str(meta.get("name", ""))
        problem = rules.name_problem(kind, object_name)
        if problem:
            return status(422, "Invalid", f'{kind} "{object_name}" is invalid: {problem}')
        if ns is not None and meta.get("namespace", ns) != ns:
            return status(400, "BadRequest", "the namespace of the object does not match the URL")
        if ns is not None and self.inventory.get(self.api, f"v1/namespaces//{ns}") is None:
            return status(404, "NotFound", f'namespaces "{ns}" not found')
        invalid = rules.validate(body, self.version, self.crds)
        if invalid is rules.NO_KIND:
            return status(
                404, "NotFound", f"the server could not find the requested resource ({kind})"
            )
        if invalid is rules.UNCHECKED:
            self.unchecked.add(f"{api_version}/{kind}")
        elif invalid:
            return status(422, "Invalid", f'{kind} "{object_name}" is invalid: {invalid}')
        key = f"{collection}/{object_name}"
        prior = self.inventory.get(self.api, key)
        if name is None and prior is not None:
            return status(409, "AlreadyExists", f'{plural} "{object_name}" already exists')
        if name is not None and (prior is None or name != object_name):
            return status(404, "NotFound", f'{plural} "{name}" not found')
        stored = dict(body)
        stored["metadata"] = {
            **meta,
            **({"namespace": ns} if ns else {}),
            "uid": (prior or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()),
            "resourceVersion": str(self.inventory.next_id()),
            "generation": int((prior or {}).get("metadata", {}).get("generation", 0)) + 1,
            "creationTimestamp": "2026-12-01T00:00:00Z",
        }
        self.inventory.put(self.api, key, stored)
        return (200 if prior else 201), stored
