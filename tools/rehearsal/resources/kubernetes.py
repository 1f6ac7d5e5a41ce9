"""Every kubernetes provider resource type, by one handler driven by the schemas: the typed
resources become API objects through tools/rehearsal/k8s_shape.py (the API's own schemas say
which field each block sets), `kubernetes_manifest` sends its manifest as is. Both go to the
cluster the provider block names (the fake Kubernetes API, tools/rehearsal/fakes/k8s.py), with
the provider's bearer token. A new resource type in a stack needs no change here.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from functools import cache
from typing import Any, ClassVar
from urllib.parse import urlsplit

from tools.rehearsal import k8s_shape
from tools.rehearsal.resources.base import ApiError, Resource, State, _loopback

PEM = "-----BEGIN CERTIFICATE-----"


def _unwrap(value: Any) -> Any:
    """A dynamic attribute's msgpack value: [type as JSON bytes, value]."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], bytes):
        return value[1]
    return value


class KubernetesObject(Resource):
    type_name: ClassVar[str] = ""
    api = "k8s"
    # metadata (name, namespace) replaces the object, as the provider's ForceNew does; the rest
    # is replaced in place (PUT).
    updatable = frozenset({"spec", "data", "binary_data", "manifest", "timeouts", "wait"})

    # ---- the provider's connection

    def _base(self) -> tuple[str, str]:
        raw = self.provider.raw
        host = str(raw.get("host") or "")
        url = urlsplit(host if "://" in host else f"https://{host}")
        if url.scheme != "https" or not _loopback(url.netloc):
            raise ApiError(
                f"kubernetes provider host {host!r}: the rehearsal needs https://<loopback>"
            )
        ca = str(raw.get("cluster_ca_certificate") or "")
        if not ca.startswith(PEM):
            raise ApiError(
                "cluster_ca_certificate is not a PEM certificate (the cluster reports it base64)"
            )
        token = str(raw.get("token") or "")
        if not token:
            raise ApiError("the kubernetes provider has no token")
        # TLS is not rehearsed: the fake API speaks HTTP on loopback.
        return f"http://{url.netloc}", token

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any] | None:
        base, token = self._base()
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        request = urllib.request.Request(base + path, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and method in ("GET", "DELETE"):
                return None
            try:
                message = json.loads(exc.read()).get("message")
            except ValueError:
                message = str(exc)
            raise ApiError(f"the Kubernetes API refused {method} {path}: {message}") from None
        except OSError as exc:
            raise ApiError(f"cannot reach the Kubernetes API at {base}: {exc}") from None
        loaded: dict[str, Any] = json.loads(raw) if raw else {}
        return loaded

    @cache  # noqa: B019 - one provider process, one cluster
    def _minor(self) -> str:
        version = self._call("GET", "/version") or {}
        return f"{version.get('major')}.{str(version.get('minor', '')).rstrip('+')}.0"

    # ---- objects

    def _object(self, state: State) -> dict[str, Any]:
        if self.type_name == "kubernetes_manifest":
            obj = _unwrap(state.get("manifest"))
            if not isinstance(obj, dict):
                raise ApiError("kubernetes_manifest: manifest is not an object")
            return obj
        values = {k: v for k, v in state.items() if v is not None}
        obj = k8s_shape.manifest(self.type_name, values, self._minor())
        if obj is None:
            raise ApiError(f"the stand-in kubernetes cannot map {self.type_name} to an API kind")
        return obj

    @staticmethod
    def _path(obj: dict[str, Any], *, named: bool) -> str:
        api_version = str(obj.get("apiVersion", ""))
        prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace")
        path = prefix + (f"/namespaces/{ns}" if ns else "")
        from tools.rehearsal.fakes.k8s_rules import plural

        path += f"/{plural(str(obj.get('kind', '')))}"
        return path + (f"/{meta.get('name')}" if named else "")

    def _computed(self, stored: dict[str, Any], state: State) -> State:
        meta = stored.get("metadata") or {}
        ns, name = meta.get("namespace"), meta.get("name")
        if self.type_name == "kubernetes_manifest":
            return {"object": state.get("manifest")}
        return {"id": f"{ns}/{name}" if ns else str(name)}

    def create(self, planned: State) -> State:
        obj = self._object(planned)
        stored = self._call("POST", self._path(obj, named=False), obj) or {}
        return self._computed(stored, planned)

    def read(self, state: State) -> State | None:
        obj = self._object(state)
        stored = self._call("GET", self._path(obj, named=True))
        return None if stored is None else self._computed(stored, state)

    def update(self, prior: State, planned: State) -> State:
        obj = self._object(planned)
        stored = self._call("PUT", self._path(obj, named=True), obj) or {}
        return self._computed(stored, planned)

    def delete(self, state: State) -> None:
        obj = self._object(state)
        self._call("DELETE", self._path(obj, named=True))


@cache
def _handler_class(type_name: str) -> type[Resource]:
    return type(f"Kubernetes_{type_name}", (KubernetesObject,), {"type_name": type_name})


def handler(type_name: str, schema: dict[str, Any]) -> type[Resource] | None:
    """The handler of any resource type the generated schema holds."""
    if type_name not in schema.get("resource_schemas", {}):
        return None
    return _handler_class(type_name)
