"""One error path for every command: a failure a user can cause is one line with the fix.

Each command's own errors already carry their message (ConfigError, SecretStoreError, ...). What
reaches here otherwise comes from the libraries under them: Google's auth (no credentials, or
credentials the token endpoint refuses), the network, an interrupted run. Those get the same line
`make status` prints, whichever command met them. An unexpected exception is a bug: it gets one
line too, and TPUDEPLOY_DEBUG=1 shows its traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TextIO

DEBUG_ENV = "TPUDEPLOY_DEBUG"

# What to do about missing or refused credentials, wherever they were needed.
CREDENTIALS_FIX = (
    "run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "credentials file), then try again"
)


class UserError(Exception):
    """A failure whose message is meant for the user as-is (printed after "error: ").

    Every command's own error type derives from it, so this module knows none of them: it
    imports nothing of tpudeploy, and the modules that raise their errors import it (issue 25:
    it used to import their classes back, a circle through every command)."""

    exit_code = 1

    def line(self) -> str:
        """What `run` prints for it."""
        return f"error: {one_line(self, 2000)}"


class NotOnThisPlatform(UserError):
    """A command that exists for the other platform only; the message says what to use (each
    Platform's `commands` holds why and what instead, Platform.require raises it)."""

    def __init__(self, command: str, platform: str, instead: str) -> None:
        super().__init__(f'make {command} does not apply to platform = "{platform}": {instead}')


def one_line(text: object, limit: int = 300) -> str:
    """`text` on one line, long library messages shortened."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def auth_detail(detail: object) -> str:
    """google.auth's own words, whole: its errors carry (message, cause) or (message, response
    dict) as args, whose str() is a Python tuple; the message and the cause's text are kept,
    the dict dropped. Its no-credentials sentence runs ~180 characters: never cut it."""
    args = detail.args if isinstance(detail, BaseException) else (detail,)
    parts = [str(a) for a in args if isinstance(a, str | BaseException) and str(a).strip()]
    return one_line("; ".join(parts), 600)


NO_CREDENTIALS = "no Google Cloud credentials"


def no_credentials(detail: object = "") -> str:
    """The one message for absent credentials."""
    if str(detail).startswith(NO_CREDENTIALS):
        return str(detail)  # already said (a client's own error built from this function)
    text = auth_detail(detail)
    why = f" ({text})" if text else ""
    return f"{NO_CREDENTIALS}{why}; {CREDENTIALS_FIX}"


def is_no_credentials(exc: BaseException) -> bool:
    """google.auth found no credentials, raised as is or in a client's error built from
    no_credentials()."""
    if type(exc).__name__ == "DefaultCredentialsError":
        return True
    return str(exc).startswith(NO_CREDENTIALS)


def refused_credentials(detail: object) -> str:
    """The one message for credentials Google refused (expired, revoked, wrong key)."""
    return (
        "Google refused your credentials (they may have expired or been revoked: "
        f"{auth_detail(detail)}); {CREDENTIALS_FIX}"
    )


def token_service_unreachable(detail: object) -> str:
    """The one message for a token request that never got an answer (google.auth's
    TransportError)."""
    return f"cannot reach Google's token service ({one_line(detail, 160)}); check the network"


def explain(exc: BaseException) -> tuple[str, int]:
    """The line to print for `exc` and the exit code."""
    if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "Interrupted":
        return "interrupted", 130
    if isinstance(exc, UserError):
        return exc.line(), exc.exit_code
    module = type(exc).__module__
    name = type(exc).__name__
    if module.startswith("google.auth") or module.startswith("google.oauth2"):
        if name == "DefaultCredentialsError":
            return f"error: {no_credentials(exc)}", 1
        if name == "RefreshError":
            return f"error: {refused_credentials(exc)}", 1
        if name == "TransportError":
            return f"error: {token_service_unreachable(exc)}", 1
    if module.startswith("googleapiclient") and name == "HttpError":
        status = getattr(getattr(exc, "resp", None), "status", "?")
        return f"error: a Google API answered HTTP {status}: {one_line(exc, 200)}", 1
    if module.startswith(("requests", "httplib2", "urllib3")) or isinstance(
        exc, ConnectionError | TimeoutError
    ):
        return f"error: cannot reach Google's APIs ({name}); check the network and try again", 1
    return (
        f"error: unexpected {name}: {one_line(exc, 200)}. This is a bug in tpudeploy; rerun "
        f"with {DEBUG_ENV}=1 for the traceback and report it",
        1,
    )


def run(command: Callable[[], int], *, err: TextIO | None = None) -> int:
    """Run a command's main; print any failure as one line (with its fix) and return the code."""
    try:
        return command()
    except SystemExit:
        raise
    except BaseException as exc:
        if os.environ.get(DEBUG_ENV) and not isinstance(exc, KeyboardInterrupt):
            raise
        if isinstance(exc, BrokenPipeError):
            return 1  # the reader went away (`make status | head`): nothing to tell it
        message, code = explain(exc)
        print(message, file=err or sys.stderr, flush=True)
        return code
