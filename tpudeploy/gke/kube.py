"""Read-only access to the deployment's GKE cluster: the container API for its endpoint and CA,
then the Kubernetes API over HTTPS with the user's own Google access token, as the serving
stack's kubernetes provider is configured (data google_container_cluster + google_client_config).
No kubectl and no gke-gcloud-auth-plugin: GKE's API server takes a Google OAuth access token as
a bearer token (cloud.google.com/kubernetes-engine/docs/how-to/api-server-authentication).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from tpudeploy.config import DeployConfig
from tpudeploy.errors import UserError, no_credentials, refused_credentials
from tpudeploy.gke import cluster as names
from tpudeploy.names import CLOUD_PLATFORM_SCOPE

EMULATOR_ENV = "CONTAINER_EMULATOR_HOST"
CONTAINER_API = "https://container.googleapis.com/v1"
TIMEOUT = 20.0


class KubeError(UserError):
    """The cluster cannot be found, reached or read; the message says what to do."""


class ClusterMissing(KubeError):
    """clusters.get answered 404: there is no cluster (not yet, or no longer)."""


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """https://<endpoint>, the cluster's CA (PEM) and a bearer token."""

    url: str
    ca_pem: str
    token: str


def _credentials_token() -> str:
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError, RefreshError
    from google.auth.transport.requests import Request

    try:
        credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    except DefaultCredentialsError as exc:
        raise KubeError(no_credentials(exc)) from None
    try:
        credentials.refresh(Request())  # type: ignore[no-untyped-call]
    except RefreshError as exc:
        raise KubeError(refused_credentials(exc)) from None
    return str(credentials.token)


def cluster_access(cfg: DeployConfig, project: str) -> ClusterAccess:
    """The cluster's endpoint and CA from clusters.get (container.clusters.get on the cluster:
    cloud.google.com/kubernetes-engine/docs/reference/api-permissions), and a token.

    CONTAINER_EMULATOR_HOST=host:port: a loopback fake over plain HTTP, a fixed test token."""
    import requests

    name = f"projects/{project}/locations/{cfg.zone}/clusters/{names.cluster_name(cfg)}"
    emulator = os.environ.get(EMULATOR_ENV, "").strip()
    if emulator:
        token = "emulator-token"  # noqa: S105 - what the loopback fake expects, not a secret
        base = f"http://{emulator}/v1"
    else:
        token = _credentials_token()
        base = CONTAINER_API
    try:
        response = requests.get(
            f"{base}/{name}", headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
        )
    except requests.RequestException as exc:
        raise KubeError(
            f"cannot reach the GKE API ({type(exc).__name__}); check the network"
        ) from None
    if response.status_code == 404:
        raise ClusterMissing(
            f"cluster {names.cluster_name(cfg)} does not exist in {cfg.zone} (project {project}): "
            "`make deploy` creates it (secrets, cluster, serving), then `make wait`"
        )
    if response.status_code in (401, 403):
        raise KubeError(
            f"the GKE API refused to show cluster {names.cluster_name(cfg)} (HTTP "
            f"{response.status_code}): your account needs container.clusters.get "
            "(roles/container.viewer) on the project, and fresh credentials "
            "(`gcloud auth application-default login`)"
        )
    if response.status_code != 200:
        raise KubeError(f"the GKE API answered HTTP {response.status_code} for {name}; try again")
    body = response.json()
    endpoint = body.get("endpoint") or ""
    ca_b64 = (body.get("masterAuth") or {}).get("clusterCaCertificate") or ""
    if not endpoint or not ca_b64:
        raise KubeError(
            f"cluster {names.cluster_name(cfg)} has no endpoint or CA yet (status "
            f"{body.get('status', '?')}): it is still being created; try again in a few minutes"
        )
    ca_pem = base64.b64decode(ca_b64).decode()
    return ClusterAccess(f"https://{endpoint}", ca_pem, token)


class KubeApi:
    """GET of objects and lists, TLS verified against the cluster's own CA."""

    def __init__(self, access: ClusterAccess, *, timeout: float = TIMEOUT) -> None:
        self.access = access
        self.timeout = timeout
        self._context = ssl.create_default_context(cadata=access.ca_pem)

    @classmethod
    def for_deployment(cls, cfg: DeployConfig, project: str) -> KubeApi:
        return cls(cluster_access(cfg, project))

    def get(self, path: str, *, params: dict[str, str] | None = None) -> dict[str, Any] | None:
        """The object (or list) at `path`; None when the API answers 404."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        request = urllib.request.Request(  # noqa: S310 - the url is https://<cluster endpoint>
            f"{self.access.url}{path}{query}",
            headers={
                "Authorization": f"Bearer {self.access.token}",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(  # noqa: S310 - https to the cluster's own endpoint
                request, timeout=self.timeout, context=self._context
            ) as response:
                result: dict[str, Any] = json.loads(response.read())
                return result
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            message = _status_message(exc)
            if exc.code in (401, 403):
                raise KubeError(
                    f"the cluster's API refused GET {path} (HTTP {exc.code}: {message}): your "
                    "account needs read access to the tpudeploy namespace's objects and the "
                    "nodes (roles/container.viewer on the project), and fresh credentials "
                    "(`gcloud auth application-default login`)"
                ) from None
            raise KubeError(
                f"the cluster's API answered HTTP {exc.code} for GET {path}: {message}"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise KubeError(
                f"cannot reach the cluster's control plane at {self.access.url} ({reason}): "
                "its authorized networks are [network] allowed_cidrs; run from an address in "
                "them, or add yours and `make deploy`"
            ) from None

    def items(self, path: str, selector: str = "") -> list[dict[str, Any]]:
        """A list's items, filtered by a label selector."""
        found = self.get(path, params={"labelSelector": selector} if selector else None)
        return list((found or {}).get("items") or [])


def _status_message(exc: urllib.error.HTTPError) -> str:
    """A Kubernetes Status object's message, else the HTTP reason."""
    try:
        return str(json.loads(exc.read()).get("message") or exc.reason)
    except (ValueError, OSError, AttributeError):
        return str(exc.reason)
