"""The queued-resource client's errors: each message is meant for the user as-is."""

from __future__ import annotations

from tpudeploy.errors import UserError


class QueuedResourceError(UserError):
    """A failure with a message meant for the user, printed as-is by the CLI."""


class Interrupted(BaseException):
    """SIGTERM or SIGHUP (a CI job's timeout, a closed terminal): unwinds like Ctrl-C so a
    failed create can still delete what it requested."""


class ApiError(QueuedResourceError):
    """An HTTP error from the TPU API that retries did not cure."""

    def __init__(self, status: int, message: str, action: str, *, api: str = "TPU API") -> None:
        self.status = status
        self.api_message = message
        self.action = action
        super().__init__(f"{api} {action} failed (HTTP {status}): {message}")
