"""Loopback fakes of what the GKE ops commands read (make wait, status, endpoint, smoke): the
container API's clusters.get (endpoint and CA) and the cluster's Kubernetes API over HTTPS,
serving objects a test puts, in the API reference's shapes, with the status a kubelet or a
controller would have written. The rehearsal's fake (tools/rehearsal/fakes/k8s.py) is the
other side: it stores and validates what Terraform creates, and has no kubelet to fill status.

Interface (tests, the GKE rehearsal):
    with FakeKubernetes(tmp_dir) as kube, FakeContainer(kube) as container:
        kube.put(deployment("demo", ...)); kube.put(pod(...)); kube.put(node(...))
        CONTAINER_EMULATOR_HOST=container.host  -> `make wait/status/endpoint` find the cluster
Objects are plain dicts in the shapes of the Kubernetes API reference (the builders below);
`put` stores one by apiVersion, kind, namespace and name, as the API server's REST paths name
it. What the real servers refuse, this refuses the same way (RULES).
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import re
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tools.rehearsal.fakes import k8s_exec, k8s_iam
from tools.rehearsal.fakes.base import Answer, LoopbackServer, api_error
from tools.rehearsal.fakes.iamrules import Checked
from tools.rehearsal.fakes.inventory import Inventory
from tpudeploy import facts
from tpudeploy.tlscert import make_bundle

# Each rule this fake enforces, with where the real service says so.
RULES: dict[str, str] = {
    # An API server with webhook token authentication (GKE: Google OAuth access tokens) answers
    # a request without a bearer token 401, as a Status object.
    "no token -> 401 Status": "https://kubernetes.io/docs/reference/access-authn-authz/authentication/",
    # Errors are Status objects: kind Status, status Failure, reason, code.
    "errors are Status": "https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/status/",
    # labelSelector: comma-separated requirements, AND-ed; key=value, key==value, key!=value,
    # key (exists), !key (does not exist).
    "labelSelector": "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#api",
    # Core group objects live under /api/v1, others under /apis/<group>/<version>; namespaced
    # ones under namespaces/<ns>/<plural>/<name>.
    "REST paths": "https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-uris",
    # A list answers kind <Kind>List with items.
    "lists": "https://kubernetes.io/docs/reference/using-api/api-concepts/#collections",
    # GET .../pods/NAME/log (PodLogOptions): "container: The container for which to stream
    # logs. Defaults to only container if there is one container in the pod"; with more, the
    # server answers 400 "a container name must be specified for pod NAME, choose one of:
    # [...]"; "sinceSeconds: A relative time in seconds before the current time from which to
    # show logs", a positive integer (0 is refused: "must be greater than 0"). The body is the
    # log as text/plain.
    "pods/log": "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#read-log-of-the-specified-pod",
    # clusters.get answers endpoint (an IP) and masterAuth.clusterCaCertificate (base64 PEM).
    "clusters.get": "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster",
}

_LOG_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<pod>[^/]+)/log$")

# kind -> (plural, namespaced), for the kinds the ops commands read.
KINDS: dict[str, tuple[str, bool]] = {
    "Pod": ("pods", True),
    "Node": ("nodes", False),
    "Service": ("services", True),
    "Deployment": ("deployments", True),
    "HorizontalPodAutoscaler": ("horizontalpodautoscalers", True),
    "Gateway": ("gateways", True),
}
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$"
)


def _status(code: int, reason: str, message: str) -> Answer:
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _selected(labels: dict[str, str], selector: str) -> bool:
    for requirement in filter(None, (r.strip() for r in selector.split(","))):
        if requirement.startswith("!"):
            if requirement[1:] in labels:
                return False
        elif "!=" in requirement:
            key, value = requirement.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in requirement:
            key, value = re.split("==?", requirement, maxsplit=1)
            if labels.get(key) != value:
                return False
        elif requirement not in labels:
            return False
    return True


class FakeKubernetes(LoopbackServer):
    """A cluster's API server: GET of a stored object or a list, by REST path, over HTTPS."""

    TOKEN_HEADER = "authorization"  # noqa: S105 - a header name

    def __init__(self, directory: Path, *, iam: tuple[Inventory, Checked] | None = None) -> None:
        """`iam`: judge each read as GKE does (tools/rehearsal/fakes/k8s_iam.py), with the
        inventory's tokens and policies, on this cluster; None: any bearer token reads (the
        ops commands' tests, run as the person who deployed)."""
        self.iam = iam
        # GKE's CA signs the API server's certificate; here one self-signed leaf plays both.
        bundle = make_bundle("kube-apiserver")
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / "kube-apiserver.crt", directory / "kube-apiserver.key"
        cert.write_text(bundle.cert_pem)
        key.write_text(bundle.key_pem)
        key.chmod(0o600)
        self.ca_pem = bundle.cert_pem
        self.objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        # Exec (tools/rehearsal/fakes/k8s_exec.py): each (pod, container)'s environment for the
        # local process that stands in for it, and what was asked of it.
        self.exec_env: dict[tuple[str, str], dict[str, str]] = {}
        self.execs: list[dict[str, Any]] = []
        # pods/log: each (namespace, pod, container)'s lines, each with when it was written.
        self.logs: dict[tuple[str, str, str], list[tuple[datetime.datetime, str]]] = {}
        super().__init__(self._route, tls=(cert, key))

    def log(self, ns: str, pod: str, container: str, line: str, when: datetime.datetime) -> None:
        self.logs.setdefault((ns, pod, container), []).append((when, line))

    def read_log(
        self, ns: str, pod: str, query: str, headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        """(status, content type, body) of GET .../pods/POD/log?QUERY (RULES["pods/log"])."""

        def refuse(code: int, reason: str, message: str) -> tuple[int, str, bytes]:
            return code, "application/json", json.dumps(_status(code, reason, message)[1]).encode()

        token = headers.get(self.TOKEN_HEADER, "")
        if not token.startswith("Bearer ") or not token[7:].strip():
            return refuse(401, "Unauthorized", "Unauthorized")
        if self.iam is not None:
            inventory, cluster = self.iam
            principal = inventory.principal(headers)
            if principal is None:
                return refuse(401, "Unauthorized", "Unauthorized")
            refused = k8s_iam.refusal(
                inventory, principal, cluster, ("GET", "", "pods/log", ns, pod), None
            )
            if refused is not None:
                return refused[0], "application/json", json.dumps(refused[1]).encode()
        obj = self.objects.get(("v1", "pods", ns, pod))

        if obj is None:
            return refuse(404, "NotFound", f'pods "{pod}" not found')
        names = [c["name"] for c in (obj.get("status") or {}).get("containerStatuses") or []]
        params = parse_qs(query)
        container = (params.get("container") or [""])[0]
        if not container:
            if len(names) != 1:
                return refuse(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {pod}, choose one of: "
                    f"[{' '.join(names)}]",
                )
            container = names[0]
        if container not in names:
            return refuse(400, "BadRequest", f"container {container} is not valid for pod {pod}")
        lines = self.logs.get((ns, pod, container), [])
        since = (params.get("sinceSeconds") or [""])[0]
        if since:
            if not since.isdigit() or int(since) < 1:
                return refuse(
                    422, "Invalid", f"sinceSeconds: Invalid value: {since}: must be greater than 0"
                )
            cutoff = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=int(since))
            lines = [(when, line) for when, line in lines if when >= cutoff]
        return 200, "text/plain", "".join(f"{line}\n" for _, line in lines).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        base = super()._handler()
        fake = self

        class Handler(base):  # type: ignore[valid-type,misc]
            def do_GET(self) -> None:
                log = _LOG_PATH.match(urlsplit(self.path).path)
                if log:
                    code, kind, data = fake.read_log(
                        log["ns"],
                        log["pod"],
                        urlsplit(self.path).query,
                        {k.lower(): v for k, v in self.headers.items()},
                    )
                    self.send_response(code)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                upgrade = (self.headers.get("Upgrade") or "").lower() == "websocket"
                if not (upgrade and urlsplit(self.path).path.endswith("/exec")):
                    base.do_GET(self)  # type: ignore[attr-defined]
                    return
                token = self.headers.get("Authorization") or ""
                if not token.startswith("Bearer ") or not token[7:].strip():
                    k8s_exec._plain(self, *_status(401, "Unauthorized", "Unauthorized"))
                    return
                k8s_exec.serve_exec(
                    self,
                    find_pod=lambda ns, name: fake.objects.get(("v1", "pods", ns, name)),
                    env_for=lambda pod, container: fake.exec_env.get((pod, container), {}),
                    status=_status,
                    record=fake.execs.append,
                )

        return Handler

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind = obj["kind"]
        plural, namespaced = KINDS[kind]
        meta = obj["metadata"]
        ns = meta.get("namespace", "") if namespaced else ""
        key = (obj["apiVersion"], plural, ns, meta["name"])
        with self._lock:
            self.objects[key] = copy.deepcopy(obj)
        return obj

    def delete(self, obj: dict[str, Any]) -> None:
        plural, namespaced = KINDS[obj["kind"]]
        ns = obj["metadata"].get("namespace", "") if namespaced else ""
        with self._lock:
            self.objects.pop((obj["apiVersion"], plural, ns, obj["metadata"]["name"]), None)

    def _route(self, method: str, raw: str, body: Any, headers: dict[str, str]) -> Answer:
        token = headers.get(self.TOKEN_HEADER, "")
        if not token.startswith("Bearer ") or not token[7:].strip():
            return _status(401, "Unauthorized", "Unauthorized")
        if method != "GET":
            return _status(405, "MethodNotAllowed", "this fake serves reads only")
        parts = urlsplit(raw)
        m = _PATH.match(unquote(parts.path))
        if not m:
            return _status(
                404, "NotFound", f"the server could not find the requested resource ({parts.path})"
            )
        api_version = "v1" if m["core"] else f"{m['group']}/{m['version']}"
        plural, ns, name = m["plural"], m["ns"] or "", m["name"]
        if self.iam is not None:
            inventory, cluster = self.iam
            principal = inventory.principal(headers)
            if principal is None:
                return _status(401, "Unauthorized", "Unauthorized")
            request = ("GET", m["group"] or "", plural, m["ns"], name)
            refused = k8s_iam.refusal(inventory, principal, cluster, request, None)
            if refused is not None:
                return refused
        if name:
            obj = self.objects.get((api_version, plural, ns, name))
            if obj is None:
                return _status(404, "NotFound", f'{plural} "{name}" not found')
            return 200, obj
        selector = (parse_qs(parts.query).get("labelSelector") or [""])[0]
        items = [
            obj
            for (version, kind_plural, obj_ns, _), obj in sorted(self.objects.items())
            if version == api_version
            and kind_plural == plural
            and (not ns or obj_ns == ns)
            and _selected(obj["metadata"].get("labels") or {}, selector)
        ]
        kind = next((k for k, (p, _) in KINDS.items() if p == plural), plural)
        return 200, {
            "kind": f"{kind}List",
            "apiVersion": api_version,
            "metadata": {"resourceVersion": "1"},
            "items": items,
        }


class FakeContainer(LoopbackServer):
    """The container API's clusters.get for every cluster `clusters` names (default: any),
    answering the fake API server's address and CA. Plain HTTP, as the other *_EMULATOR_HOSTs."""

    def __init__(self, kube: FakeKubernetes, *, clusters: set[str] | None = None) -> None:
        self.kube = kube
        self.clusters = clusters
        super().__init__(self._route)

    def _route(self, method: str, raw: str, body: Any, headers: dict[str, str]) -> Answer:
        m = re.match(
            r"^/v1/projects/(?P<p>[^/]+)/locations/(?P<l>[^/]+)/clusters/(?P<c>[^/?]+)$",
            urlsplit(raw).path,
        )
        if method != "GET" or not m:
            return api_error(404, f"no route for {method} {raw}")
        if self.clusters is not None and m["c"] not in self.clusters:
            name = f"projects/{m['p']}/locations/{m['l']}/clusters/{m['c']}"
            return api_error(404, f"Not found: {name}.")
        return 200, {
            "name": m["c"],
            "location": m["l"],
            "status": "RUNNING",
            "endpoint": self.kube.host,
            "masterAuth": {
                "clusterCaCertificate": base64.b64encode(self.kube.ca_pem.encode()).decode()
            },
        }


# --- object builders in the API reference's shapes --------------------------------------------


def deployment(
    name: str,
    namespace: str,
    *,
    replicas: int,
    ready: int = 0,
    updated: int | None = None,
    available: int | None = None,
    generation: int = 1,
    observed: int | None = None,
    labels: dict[str, str] | None = None,
    total: int | None = None,
) -> dict[str, Any]:
    """apps/v1 Deployment with its status (DeploymentStatus: replicas, updatedReplicas,
    readyReplicas, availableReplicas, observedGeneration; absent fields mean 0)."""
    status: dict[str, Any] = {"observedGeneration": generation if observed is None else observed}
    for key, value in (
        ("replicas", replicas if total is None else total),
        ("updatedReplicas", replicas if updated is None else updated),
        ("readyReplicas", ready),
        ("availableReplicas", ready if available is None else available),
    ):
        if value:
            status[key] = value
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generation": generation,
            "labels": labels or {},
        },
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels or {}}},
        "status": status,
    }


def pod(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str],
    phase: str = "Pending",
    node: str = "",
    started_at: str = "2026-12-01T10:00:00Z",
    unschedulable: str = "",
    init_running: bool = False,
    containers: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """v1 Pod: status.phase, conditions (PodScheduled False with reason Unschedulable while no
    node fits), initContainerStatuses / containerStatuses with state waiting|running|terminated,
    ready and started (ContainerStatus)."""
    conditions: list[dict[str, Any]] = []
    if unschedulable:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        )
    elif node:
        conditions.append({"type": "PodScheduled", "status": "True"})
    all_ready = bool(containers) and all(c.get("ready") for c in (containers or {}).values())
    if node:
        conditions.append({"type": "Ready", "status": "True" if all_ready else "False"})
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if node:
        status["startTime"] = started_at
    if init_running:
        status["initContainerStatuses"] = [
            {
                "name": "frontdoor-prep",
                "ready": False,
                "state": {"running": {"startedAt": started_at}},
            }
        ]
    if containers is not None:
        status["containerStatuses"] = [
            {
                "name": cname,
                "ready": bool(c.get("ready")),
                "started": bool(c.get("started")),
                "restartCount": int(c.get("restarts", 0)),
                "state": c.get("state") or {"running": {"startedAt": started_at}},
                # Required ContainerStatus fields: the image the pod names, and the one it runs
                # (containerd: repo@sha256:<manifest digest>).
                "image": c.get("image", facts.IMAGE),
                "imageID": c.get("imageID", ""),
            }
            for cname, c in containers.items()
        ]
    spec: dict[str, Any] = {"containers": [{"name": n} for n in (containers or {"vllm": {}})]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "creationTimestamp": started_at,
        },
        "spec": spec,
        "status": status,
    }


def node(name: str, *, labels: dict[str, str], ready: bool = True) -> dict[str, Any]:
    """v1 Node with its labels and the Ready condition."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def hpa(
    name: str,
    namespace: str,
    *,
    current: int,
    desired: int,
    metric: str,
    average: str | None,
    conditions: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    more: dict[str, str] | None = None,
) -> dict[str, Any]:
    """autoscaling/v2 HorizontalPodAutoscaler status: currentReplicas, desiredReplicas,
    currentMetrics[].pods.current.averageValue (`metric`, then each of `more`), conditions
    (AbleToScale, ScalingActive, ScalingLimited) with status and reason."""
    status: dict[str, Any] = {
        "currentReplicas": current,
        "desiredReplicas": desired,
        "conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions],
    }
    readings = {**({metric: average} if average is not None else {}), **(more or {})}
    if readings:
        status["currentMetrics"] = [
            {
                "type": "Pods",
                "pods": {"metric": {"name": name}, "current": {"averageValue": value}},
            }
            for name, value in readings.items()
        ]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "status": status,
    }


def service(name: str, namespace: str, *, ingress_ip: str = "") -> dict[str, Any]:
    """v1 Service of type LoadBalancer: status.loadBalancer.ingress[].ip once provisioned."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"ip": ingress_ip}] if ingress_ip else []}},
    }


def gateway(name: str, namespace: str, *, address: str = "", message: str = "") -> dict[str, Any]:
    """gateway.networking.k8s.io/v1 Gateway status: addresses[] (type IPAddress, value) once
    programmed; else the Programmed condition False with the controller's message."""
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": "Programmed",
                "status": "True" if address else "False",
                "reason": "Programmed" if address else "Pending",
                "message": message,
            }
        ]
    }
    if address:
        status["addresses"] = [{"type": "IPAddress", "value": address}]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace},
        "status": status,
    }
