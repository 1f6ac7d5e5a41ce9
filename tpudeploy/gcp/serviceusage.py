"""Service Usage v1 services.get: whether an API is enabled in the project (`make preflight`
checks the ones no stack enables; tpudeploy.platform names them)."""

from __future__ import annotations

from tpudeploy.errors import UserError
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import SERVICE_USAGE


class ServiceUsageError(UserError):
    """The state could not be read (network, refused): preflight notes it, never refuses."""


def service_state(project: str, service: str, *, timeout: float = 5.0) -> str:
    """The service's state (ENABLED, DISABLED); ServiceUsageError saying why when it cannot
    tell. services.get needs serviceusage.services.get
    (https://cloud.google.com/service-usage/docs/reference/rest/v1/services/get)."""
    session, base = gcp_session.session(SERVICE_USAGE, ServiceUsageError)
    # The note says why in a word: the failure's type, or the HTTP status.
    failures = gcp_session.Failures(
        ServiceUsageError, unreachable="{error}", otherwise="HTTP {status}"
    )
    url = f"{base}/projects/{project}/services/{service}"
    response = gcp_session.call(session, "GET", url, failures, timeout=timeout)
    assert response is not None  # a 404 is `otherwise`
    return str(response.json().get("state") or "STATE_UNSPECIFIED")
