"""Resource Manager v1, read with your own credentials: projects.testIamPermissions (`make
preflight`: which of the permissions a deploy needs your account holds; the lists are
tpudeploy/permissions.py's) and the project's number and IAM policy (`make bootstrap-check`:
what the Compute Engine default account holds; tpudeploy/defaultaccount.py judges it). Nothing
here changes anything, and neither caller refuses on its failures: they become notes."""

from __future__ import annotations

import json
from typing import Any

from tpudeploy.errors import UserError
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import RESOURCE_MANAGER


class PermissionCheckError(UserError):
    """The test could not be made (network, API refused): a note, never a refusal."""


class LookupFailed(UserError):
    """The policy could not be read; the message says why (never a refusal)."""


def held_permissions(project: str, permissions: list[str], *, timeout: float = 10.0) -> set[str]:
    """The subset of `permissions` the caller holds on the project, by its own credentials.

    projects.testIamPermissions: body {"permissions": [...]}, wildcards not allowed; the answer
    lists the subset the caller holds, and making the call needs no permission itself
    (https://cloud.google.com/resource-manager/reference/rest/v1/projects/testIamPermissions)."""
    session, base = gcp_session.session(RESOURCE_MANAGER, PermissionCheckError)
    # The note says why in a word: the failure's type, or the HTTP status.
    failures = gcp_session.Failures(
        PermissionCheckError, unreachable="{error}", otherwise="HTTP {status}"
    )
    response = gcp_session.call(
        session,
        "POST",
        f"{base}/projects/{project}:testIamPermissions",
        failures,
        timeout=timeout,
        data=json.dumps({"permissions": permissions}),
    )
    assert response is not None  # a 404 is `otherwise`
    return set(response.json().get("permissions") or [])


def number_and_policy(project: str) -> tuple[str, dict[str, Any]]:
    """The project's number (projects.get) and its IAM policy (projects.getIamPolicy).

    Credentials are looked for on disk first: `make bootstrap-check` runs anywhere, and off a
    Google machine without any google.auth would probe the metadata server first."""
    session, base = gcp_session.session(RESOURCE_MANAGER, LookupFailed, from_disk_first=True)
    project_url = f"{base}/projects/{project}"
    number = str(_read(session, "GET", project_url, "the project").get("projectNumber", ""))
    if not number:
        raise LookupFailed(f"Resource Manager gave no project number for {project}")
    policy = _read(session, "POST", f"{project_url}:getIamPolicy", "its IAM policy")
    return number, policy


def _read(session: Any, method: str, url: str, what: str) -> dict[str, Any]:
    failures = gcp_session.Failures(
        LookupFailed,
        unreachable="cannot reach Resource Manager ({error})",
        otherwise=(
            f"Resource Manager answered {{status}} for {what} (reading it needs "
            "resourcemanager.projects.get and getIamPolicy, e.g. roles/iam.securityReviewer)"
        ),
    )
    body: dict[str, Any] | None = {} if method == "POST" else None
    response = gcp_session.call(session, method, url, failures, timeout=30, json=body)
    assert response is not None  # a 404 is `otherwise`
    data: dict[str, Any] = response.json()
    return data
