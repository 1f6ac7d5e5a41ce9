"""googleapiclient's discovery clients, with the project's credentials, retries and errors.

The TPU API (tpudeploy/gcp/tpu.py), Cloud Scheduler (scheduler.py) and the warm path's object
listing (tpudeploy/tpuvm/warmpath.py) are built on DiscoveryApi: their discovery documents ship
in google-api-python-client, and googleapiclient retries 429 and 5xx itself. That client needs
httplib2; the other APIs' clients use session.py's requests session.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tpudeploy.errors import refused_credentials
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.api_errors import ApiError, QueuedResourceError
from tpudeploy.gcp.apis import TPU, Api


def _http_error_message(exc: Any) -> str:
    try:
        payload = json.loads(exc.content.decode("utf-8", "replace"))
        message = payload["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    reason = getattr(exc, "reason", None)
    return str(reason or exc)


# The one client family that keeps googleapiclient and its httplib2 transport
# (google_auth_httplib2) instead of tpudeploy/gcp/session.py's requests sessions: the TPU API
# needs the v2alpha1 discovery document (TpuApi below says why), and DiscoveryApi relies on
# googleapiclient's own retries of 429/5xx and dropped connections, with the notices wait,
# status and recover show. Cloud Scheduler and the warm path's object listing
# (tpudeploy/gcp/scheduler.py, warmpath.py) ride on DiscoveryApi for the same retries and its
# ApiError. Credentials and the emulator come from the session factory all the same.
def build_service(*, http_timeout: float = 60.0, api: Api = TPU, version: str = "v2alpha1") -> Any:
    """Build a discovery client from the document shipped in google-api-python-client (TPU
    v2alpha1 by default): the API's emulator with anonymous credentials, else Application
    Default Credentials (tpudeploy/gcp/session.py)."""
    import google.auth.credentials
    import google_auth_httplib2  # type: ignore[import-untyped]
    import httplib2  # type: ignore[import-untyped]
    from googleapiclient import discovery, discovery_cache

    document = discovery_cache.get_static_doc(api.name, version)
    if document is None:
        raise QueuedResourceError(
            f"the {api.name} {version} discovery document is missing from "
            "google-api-python-client; reinstall the pinned requirements (make install)"
        )
    root = gcp_session.emulator(api)
    credentials: Any
    if root:
        # Plain HTTP to host:port, no credentials (tpudeploy/gcp/apis.py).
        credentials = google.auth.credentials.AnonymousCredentials()  # type: ignore[no-untyped-call]
        # The endpoint replaces the document's root URL and service path alike (storage's
        # path is storage/v1/; the TPU API's and Cloud Scheduler's are empty).
        service_path = json.loads(document).get("servicePath", "")
        endpoint = f"{root}/{service_path}"
    else:
        credentials = gcp_session.credentials(QueuedResourceError)
        endpoint = None
    http = google_auth_httplib2.AuthorizedHttp(
        credentials, http=httplib2.Http(timeout=http_timeout)
    )
    options = {"api_endpoint": endpoint} if endpoint else None
    return discovery.build_from_document(document, http=http, client_options=options)


# googleapiclient's own retry (HttpRequest.execute(num_retries=N), googleapiclient/http.py):
# 429, 5xx and rate-limit 403s, plus connection refused/reset and timeouts, each retried after
# random() * 2**n seconds. Five retries wait at most 2+4+8+16+32 s, about a minute.
DEFAULT_RETRIES = 5


class _RetryNotices(logging.Handler):
    """Shows googleapiclient's "Sleeping N seconds before retry i of n ..." warnings to the user:
    a retry is progress the terminal should see, not silence (the library logs it, no more)."""

    def __init__(self, out: TextIO, action: str) -> None:
        super().__init__(logging.WARNING)
        self._out = out
        self._action = action

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Sleeping "):
            print(f"tpudeploy: {self._action}: {record.getMessage()}", file=self._out, flush=True)


@contextmanager
def _retry_notices(out: TextIO, action: str) -> Iterator[None]:
    logger = logging.getLogger("googleapiclient.http")
    handler = _RetryNotices(out, action)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


class DiscoveryApi:
    """A discovery client's calls with googleapiclient's retries and one error type."""

    API_NAME = "TPU API"

    def __init__(
        self,
        service: Any = None,
        *,
        num_retries: int = DEFAULT_RETRIES,
        sleep: Callable[[float], None] | None = None,
        log: TextIO | None = None,
    ) -> None:
        """`sleep` replaces the library's wait between retries (tests); `log` gets the notices."""
        self._own_service = service is None
        self._service = service if service is not None else self._build()
        self._retries = max(0, num_retries)
        self._sleep = sleep
        self._log = log if log is not None else sys.stderr

    def _build(self) -> Any:
        return build_service()

    def fresh_connection(self) -> None:
        """A new HTTP connection for what follows an interrupted call: httplib2 keeps its
        connection open between requests, and a signal that arrives mid-response leaves it
        holding part of that answer (the cleanup's DELETE then failed on it now and then)."""
        if self._own_service:
            self._service = self._build()

    def _execute(self, request: Any, action: str, *, allow_404: bool = False) -> Any:
        import httplib2
        from google.auth.exceptions import GoogleAuthError
        from googleapiclient.errors import HttpError

        if self._sleep is not None:
            # HttpRequest's own stub for tests (googleapiclient/http.py sets it to time.sleep).
            request._sleep = self._sleep
        try:
            with _retry_notices(self._log, action):
                return request.execute(num_retries=self._retries)
        except HttpError as exc:
            status = int(exc.resp.status)
            message = _http_error_message(exc)
            if status == 404 and allow_404:
                return None
            if status == 429 or status >= 500:
                # The library returns a retryable answer only once every retry is spent.
                message = f"{message} (gave up after {self._retries + 1} attempts)"
            raise ApiError(status, message, action, api=self.API_NAME) from None
        except (OSError, httplib2.HttpLib2Error) as exc:
            # Refused, reset and timed-out connections were retried; others fail at once.
            raise ApiError(0, f"network error: {exc}", action, api=self.API_NAME) from None
        except GoogleAuthError as exc:
            # Expired or revoked credentials (or a 401 they cannot be refreshed after): the one
            # credentials message (tpudeploy.errors), never a traceback from the transport.
            raise QueuedResourceError(
                f"{self.API_NAME} {action}: {refused_credentials(exc)}"
            ) from None
