"""The one session factory: a Google API's loopback emulator, or Google itself with Application
Default Credentials.

- <API>_EMULATOR_HOST=host:port (tpudeploy/gcp/apis.py): plain HTTP to that address and no
  credentials. The loopback fakes take a call without a token as the project owner's, as
  Google's own emulators do.
- Otherwise Application Default Credentials (`gcloud auth application-default login`,
  GOOGLE_APPLICATION_CREDENTIALS, or a Google machine's own account) with one scope,
  cloud-platform: IAM decides what each call may do. No credentials, or credentials Google
  refuses, are the client's own error with the fix (tpudeploy.errors' one message for each).
- One HTTP library: requests, through google.auth's AuthorizedSession (it refreshes the token
  when it must). `call` is the one way a failed call becomes the client's error: each client
  names its error class and its words for each failure (`Failures`).

The discovery clients (TPU API, Cloud Scheduler, the warm path's listing) keep googleapiclient's
httplib2 transport and take their credentials and emulator from here
(tpudeploy/gcp/discovery.py says why).

Standard library only at import: google.auth and requests load inside the functions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from tpudeploy import errors
from tpudeploy.errors import UserError
from tpudeploy.gcp.apis import Api
from tpudeploy.names import CLOUD_PLATFORM_SCOPE

if TYPE_CHECKING:
    import requests

# The one scope every client asks for.
SCOPES: Final = (CLOUD_PLATFORM_SCOPE,)
# An emulator's session has no credentials; what it hands out as a bearer token for an API
# outside the session (GKE's API server, whose loopback fake wants one).
EMULATOR_TOKEN: Final = "emulator-token"  # noqa: S105 - what the loopback fakes expect

ErrorClass = type[UserError]


def emulator(api: Api) -> str:
    """http://host:port when the API's emulator variable is set, else "". A value that already
    names its scheme (http://host:port) is kept as it is."""
    value = os.environ.get(api.emulator_env, "").strip().rstrip("/")
    if not value or "://" in value:
        return value
    return f"http://{value}"


class Found(NamedTuple):
    """Whether credentials were found, and the line that says where (or what to do)."""

    ok: bool
    line: str


def find_credentials() -> Found:
    """Application Default Credentials present and readable, without asking Google for a token
    (and without probing the metadata server off a Google machine): `make preflight`'s check,
    and the one credentials(from_disk_first=True) makes first."""
    import google.auth
    from google.auth import _cloud_sdk
    from google.auth.compute_engine import _metadata
    from google.auth.exceptions import DefaultCredentialsError

    explicit = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS", "").strip()
    candidates = []
    if explicit:
        candidates.append((explicit, "GOOGLE_APPLICATION_CREDENTIALS"))
    else:
        default = _cloud_sdk.get_application_default_credentials_path()  # type: ignore[no-untyped-call]
        if os.path.isfile(default):
            candidates.append((default, "gcloud auth application-default login"))
    for path, origin in candidates:
        if not os.path.isfile(path):
            return Found(
                False,
                f"GOOGLE_APPLICATION_CREDENTIALS={path} is not a file: fix the path, or unset it "
                "and run `gcloud auth application-default login`",
            )
        try:
            google.auth.load_credentials_from_file(path)  # type: ignore[no-untyped-call]
        except DefaultCredentialsError as exc:
            return Found(
                False, f"{path} ({origin}) is not a usable credentials file: {errors.one_line(exc)}"
            )
        return Found(True, f"credentials from {origin}")
    # google-auth's own switch turns off this local DMI check too, read as google-auth reads it
    # (compute_engine/_metadata.py: exactly "true"; "True" still probes the metadata server).
    skip = os.environ.get("NO_GCE_CHECK") == "true"
    on_gce = not skip and _metadata.detect_gce_residency_linux()  # type: ignore[no-untyped-call]
    if on_gce:
        return Found(True, "credentials from this Google Cloud machine's service account")
    return Found(False, errors.no_credentials())


def credentials(error: ErrorClass, *, from_disk_first: bool = False) -> Any:
    """Application Default Credentials with the cloud-platform scope, else `error` naming the
    fix. `from_disk_first`: find_credentials() first, so that a machine without any fails at
    once (google.auth would probe the metadata server first), in its words."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    if from_disk_first:
        found = find_credentials()
        if not found.ok:
            raise error(found.line)
    try:
        adc, _ = google.auth.default(scopes=list(SCOPES))
    except DefaultCredentialsError as exc:
        raise error(errors.no_credentials(exc)) from None
    return adc


def session(api: Api, error: ErrorClass, *, from_disk_first: bool = False) -> tuple[Any, str]:
    """(session, base URL) for `api`: a plain requests.Session and http://host:port<version
    path> for its emulator, else an AuthorizedSession with credentials() and the real URL."""
    root = emulator(api)
    if root:
        import requests

        return requests.Session(), f"{root}{api.path}"
    from google.auth.transport.requests import AuthorizedSession

    adc = credentials(error, from_disk_first=from_disk_first)
    return AuthorizedSession(adc), api.base_url  # type: ignore[no-untyped-call]


def _auth_failure(exc: BaseException, error: ErrorClass) -> UserError | None:
    """google.auth's refusal of the credentials, or its unreachable token service, as `error`."""
    from google.auth import exceptions

    if isinstance(exc, exceptions.RefreshError):
        return error(errors.refused_credentials(exc))
    if isinstance(exc, exceptions.TransportError):
        return error(errors.token_service_unreachable(exc))
    return None


def access_token(session: Any, error: ErrorClass) -> str:
    """A fresh access token of the session's credentials, for an API that takes it as a bearer
    token outside the session (GKE's API server); EMULATOR_TOKEN for an emulator's session."""
    adc = getattr(session, "credentials", None)
    if adc is None:
        return EMULATOR_TOKEN
    from google.auth.transport.requests import Request

    try:
        adc.refresh(Request())
    except Exception as exc:
        converted = _auth_failure(exc, error)
        if converted is None:
            raise
        raise converted from None
    return str(adc.token)


@dataclass(frozen=True, slots=True)
class Failures:
    """What a client says when a call fails, as its own error class. In each message "{status}"
    becomes the HTTP status and "{error}" the network error's type name (nothing else in it is
    read, so names with braces are safe)."""

    error: ErrorClass
    # The API could not be reached (connection refused, timeout, TLS).
    unreachable: str
    # Any answer the three below do not cover.
    otherwise: str
    # 401 and 403; "" says `otherwise`.
    refused: str = ""
    # 404 when the call does not allow it; "" says `otherwise`.
    missing: str = ""

    def message(self, status: int) -> str:
        if status in (401, 403) and self.refused:
            return _fill(self.refused, status=status)
        if status == 404 and self.missing:
            return _fill(self.missing, status=status)
        return _fill(self.otherwise, status=status)


def _fill(template: str, *, status: int | None = None, error: str | None = None) -> str:
    if status is not None:
        template = template.replace("{status}", str(status))
    if error is not None:
        template = template.replace("{error}", error)
    return template


def call(
    session: Any,
    method: str,
    url: str,
    failures: Failures,
    *,
    timeout: float,
    ok: tuple[int, ...] = (200,),
    allow_404: bool = False,
    **kwargs: Any,
) -> requests.Response | None:
    """One request through a session from session(): the response when its status is in `ok`,
    None for a 404 the caller allows, else failures.error with the fix. Credentials Google
    refuses on the way are tpudeploy.errors.refused_credentials' line, in the same class."""
    import requests

    try:
        response: requests.Response = session.request(method, url, timeout=timeout, **kwargs)
    except requests.RequestException as exc:
        raise failures.error(_fill(failures.unreachable, error=type(exc).__name__)) from None
    except Exception as exc:
        converted = _auth_failure(exc, failures.error)
        if converted is None:
            raise
        raise converted from None
    if response.status_code in ok:
        return response
    if response.status_code == 404 and allow_404:
        return None
    raise failures.error(failures.message(response.status_code))
