"""GKE's container API v1: the deployment's cluster, its endpoint and CA (clusters.get), and
the bearer token its Kubernetes API takes, as the serving stack's kubernetes provider is
configured (data google_container_cluster + google_client_config). GKE's API server takes a
Google OAuth access token as a bearer token
(cloud.google.com/kubernetes-engine/docs/how-to/api-server-authentication): the session's own,
refreshed now. tpudeploy/gke/kube.py reads the Kubernetes API with it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from tpudeploy.errors import UserError
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import CONTAINER

TIMEOUT = 20.0


class KubeError(UserError):
    """The cluster cannot be found, reached or read; the message says what to do (the
    Kubernetes API's reads raise it too: tpudeploy/gke/kube.py)."""


class ClusterMissing(KubeError):
    """clusters.get answered 404: there is no cluster (not yet, or no longer)."""


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """https://<endpoint>, the cluster's CA (PEM) and a bearer token."""

    url: str
    ca_pem: str
    token: str


def cluster_access(project: str, location: str, cluster: str) -> ClusterAccess:
    """The cluster's endpoint and CA from clusters.get (container.clusters.get on the cluster:
    cloud.google.com/kubernetes-engine/docs/reference/api-permissions), and a token.

    CONTAINER_EMULATOR_HOST=host:port: a loopback fake over plain HTTP, a fixed test token."""
    session, base = gcp_session.session(CONTAINER, KubeError)
    token = gcp_session.access_token(session, KubeError)
    name = f"projects/{project}/locations/{location}/clusters/{cluster}"
    failures = gcp_session.Failures(
        KubeError,
        unreachable="cannot reach the GKE API ({error}); check the network",
        refused=(
            f"the GKE API refused to show cluster {cluster} (HTTP {{status}}): your account "
            "needs container.clusters.get (roles/container.viewer) on the project, and fresh "
            "credentials (`gcloud auth application-default login`)"
        ),
        otherwise=f"the GKE API answered HTTP {{status}} for {name}; try again",
    )
    response = gcp_session.call(
        session, "GET", f"{base}/{name}", failures, timeout=TIMEOUT, allow_404=True
    )
    if response is None:
        raise ClusterMissing(
            f"cluster {cluster} does not exist in {location} (project {project}): "
            "`make deploy` creates it (secrets, cluster, serving), then `make wait`"
        )
    body = response.json()
    endpoint = body.get("endpoint") or ""
    ca_b64 = (body.get("masterAuth") or {}).get("clusterCaCertificate") or ""
    if not endpoint or not ca_b64:
        raise KubeError(
            f"cluster {cluster} has no endpoint or CA yet (status "
            f"{body.get('status', '?')}): it is still being created; try again in a few minutes"
        )
    ca_pem = base64.b64decode(ca_b64).decode()
    return ClusterAccess(f"https://{endpoint}", ca_pem, token)
