"""Read-only access to the deployment's GKE cluster: the container API gives its endpoint, CA and
the user's own Google access token (tpudeploy/gcp/container.py), then this reads the Kubernetes
API over HTTPS with that token, as the serving stack's kubernetes provider does. No kubectl and
no gke-gcloud-auth-plugin. The Kubernetes API is not a Google API: it is the cluster's own, at
its endpoint, verified against its own CA.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from tpudeploy.config import DeployConfig
from tpudeploy.gcp import container
from tpudeploy.gcp.container import TIMEOUT, ClusterAccess, KubeError
from tpudeploy.gke import identifiers


def cluster_access(cfg: DeployConfig, project: str) -> ClusterAccess:
    """The deployment's cluster (tpudeploy.gke.identifiers names it) through the container API."""
    return container.cluster_access(project, cfg.zone, identifiers.cluster_name(cfg))


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
        body = self._read(path, params, "application/json")
        if body is None:
            return None
        result: dict[str, Any] = json.loads(body)
        return result

    def text(self, path: str, *, params: dict[str, str] | None = None) -> str | None:
        """A plain-text answer (a container's log); None when the API answers 404."""
        body = self._read(path, params, "text/plain")
        return None if body is None else body.decode("utf-8", errors="replace")

    def _read(self, path: str, params: dict[str, str] | None, accept: str) -> bytes | None:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        request = urllib.request.Request(  # noqa: S310 - the url is https://<cluster endpoint>
            f"{self.access.url}{path}{query}",
            headers={"Authorization": f"Bearer {self.access.token}", "Accept": accept},
        )
        try:
            with urllib.request.urlopen(  # noqa: S310 - https to the cluster's own endpoint
                request, timeout=self.timeout, context=self._context
            ) as response:
                body: bytes = response.read()
                return body
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
                "its authorized networks are the IPv4 ranges of [network] allowed_cidrs (any "
                "address when there are none); run from an address in them, or add yours and "
                "`make deploy`"
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
