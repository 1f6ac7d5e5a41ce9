"""Cloud Logging API v2 reads: entries:list over every page (`make logs`).

POST https://logging.googleapis.com/v2/entries:list with resourceNames, filter, orderBy,
pageSize and pageToken (cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list).
It "requires ... logging.logEntries.list" on the project, which roles/logging.viewer holds
(LOGGING_EMULATOR_HOST: a loopback fake, tpudeploy/gcp/apis.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from tpudeploy.errors import UserError
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.apis import LOGGING

TIMEOUT = 30.0
# "Default is 50": one page of 500 keeps a busy hour to a few calls. Only a negative value is
# refused (the discovery document's ListLogEntriesRequest.pageSize, revision 20260911).
PAGE_SIZE: Final = 500
# Oldest first: the lines read like the log they came from.
ORDER_BY: Final = "timestamp asc"


class LoggingError(UserError):
    """The Logging API could not be read; the message says what to do."""


def failures(project: str) -> gcp_session.Failures:
    return gcp_session.Failures(
        LoggingError,
        unreachable="cannot reach the Cloud Logging API ({error}); check the network",
        refused=(
            f"the Cloud Logging API refused to list the logs of project {project} (HTTP "
            "{status}): your account needs logging.logEntries.list on the project, which "
            "roles/logging.viewer holds (gcloud projects add-iam-policy-binding "
            f"{project} --member=user:YOU --role=roles/logging.viewer), and fresh "
            "credentials (`gcloud auth application-default login`)"
        ),
        otherwise=(
            f"the Cloud Logging API answered HTTP {{status}} to entries:list in project "
            f"{project}; try again"
        ),
    )


def list_entries(project: str, log_filter: str) -> Iterator[dict[str, Any]]:
    """Every entry of `project` that matches `log_filter`, oldest first, page after page."""
    session, base = gcp_session.session(LOGGING, LoggingError)
    body: dict[str, Any] = {
        "resourceNames": [f"projects/{project}"],
        "filter": log_filter,
        "orderBy": ORDER_BY,
        "pageSize": PAGE_SIZE,
    }
    while True:
        response = gcp_session.call(
            session,
            "POST",
            f"{base}/entries:list",
            failures(project),
            timeout=TIMEOUT,
            ok=(200, 400),
            json=body,
        )
        assert response is not None  # no 404 is allowed: call raises
        page = response.json()
        if response.status_code == 400:
            # The filter is the project's own (tpudeploy/logsources.py): a refusal is a bug to
            # report with the API's words, not something the user can fix by trying again.
            message = (page.get("error") or {}).get("message", "")
            raise LoggingError(
                f"the Cloud Logging API refused the query (HTTP 400: {message}); the filter was "
                f"{log_filter!r}: please report it"
            )
        yield from page.get("entries") or []
        token = page.get("nextPageToken")
        if not token:
            return
        # "The values of other method parameters should be identical to those in the previous
        # call" (ListLogEntriesRequest.pageToken).
        body = {**body, "pageToken": token}
