"""The handful of TPU v2alpha1 calls the client makes, through the discovery client."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tpudeploy import names
from tpudeploy.queued_resource.errors import ApiError, QueuedResourceError

EMULATOR_ENV = "TPU_EMULATOR_HOST"


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


def build_service(*, http_timeout: float = 60.0) -> Any:
    """Build the v2alpha1 discovery client: emulator with anonymous creds, else ADC."""
    import google.auth
    import google.auth.credentials
    import google_auth_httplib2  # type: ignore[import-untyped]
    import httplib2  # type: ignore[import-untyped]
    from google.auth.exceptions import DefaultCredentialsError
    from googleapiclient import discovery, discovery_cache

    document = discovery_cache.get_static_doc("tpu", "v2alpha1")
    if document is None:
        raise QueuedResourceError(
            "the TPU v2alpha1 discovery document is missing from google-api-python-client; "
            "reinstall the pinned requirements (make install)"
        )
    emulator = os.environ.get(EMULATOR_ENV, "").strip()
    credentials: Any
    if emulator:
        # Same convention as PUBSUB_EMULATOR_HOST: plain HTTP to host:port, no credentials.
        credentials = google.auth.credentials.AnonymousCredentials()  # type: ignore[no-untyped-call]
        endpoint = f"http://{emulator.rstrip('/')}/"
    else:
        try:
            credentials, _ = google.auth.default(scopes=[names.CLOUD_PLATFORM_SCOPE])
        except DefaultCredentialsError as exc:
            raise QueuedResourceError(
                f"no Google Cloud credentials ({exc}); run "
                "`gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS"
            ) from None
        endpoint = None
    http = google_auth_httplib2.AuthorizedHttp(
        credentials, http=httplib2.Http(timeout=http_timeout)
    )
    options = {"api_endpoint": endpoint} if endpoint else None
    return discovery.build_from_document(document, http=http, client_options=options)


class TpuApi:
    """The handful of v2alpha1 calls this module needs, with 429/5xx retries."""

    def __init__(
        self,
        service: Any = None,
        *,
        retry_attempts: int = 6,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 32.0,
        sleep: Callable[[float], None] = time.sleep,
        log: TextIO | None = None,
    ) -> None:
        self._service = service if service is not None else build_service()
        self._attempts = max(1, retry_attempts)
        self._base = retry_base_delay
        self._max = retry_max_delay
        self._sleep = sleep
        self._log = log if log is not None else sys.stderr

    def _locations(self) -> Any:
        return self._service.projects().locations()

    def _execute(self, request: Any, action: str, *, allow_404: bool = False) -> Any:
        from googleapiclient.errors import HttpError

        last = ""
        for attempt in range(self._attempts):
            try:
                return request.execute(num_retries=0)
            except HttpError as exc:
                status = int(exc.resp.status)
                message = _http_error_message(exc)
                if status == 404 and allow_404:
                    return None
                if status != 429 and status < 500:
                    raise ApiError(status, message, action) from None
                last = f"HTTP {status}: {message}"
            except OSError as exc:  # connection refused/reset, TimeoutError
                last = f"network error: {exc}"
            if attempt + 1 < self._attempts:
                delay = min(self._max, self._base * 2**attempt) * (1 + random.random() / 2)  # noqa: S311
                print(
                    f"tpudeploy: {action}: {last}; retry {attempt + 1}/{self._attempts - 1} "
                    f"in {delay:.1f} s",
                    file=self._log,
                    flush=True,
                )
                self._sleep(delay)
        status = int(last.split()[1].rstrip(":")) if last.startswith("HTTP ") else 0
        raise ApiError(status, f"{last} (gave up after {self._attempts} attempts)", action)

    def get_queued_resource(self, name: str) -> dict[str, Any] | None:
        req = self._locations().queuedResources().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get queued resource", allow_404=True)
        return result

    def create_queued_resource(
        self, parent: str, queued_resource_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        req = (
            self._locations()
            .queuedResources()
            .create(parent=parent, queuedResourceId=queued_resource_id, body=body)
        )
        result: dict[str, Any] = self._execute(req, "create queued resource")
        return result

    def delete_queued_resource(self, name: str) -> dict[str, Any] | None:
        # force=true deletes the QR's node with it (otherwise an ACTIVE QR refuses deletion).
        req = self._locations().queuedResources().delete(name=name, force=True)
        result: dict[str, Any] | None = self._execute(req, "delete queued resource", allow_404=True)
        return result

    def get_node(self, name: str) -> dict[str, Any] | None:
        req = self._locations().nodes().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get node", allow_404=True)
        return result

    def get_operation(self, name: str) -> dict[str, Any] | None:
        req = self._locations().operations().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get operation", allow_404=True)
        return result
