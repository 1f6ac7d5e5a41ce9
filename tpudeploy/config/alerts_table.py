"""`[alerts]`: where the deployment's alert policies send their notifications."""

from __future__ import annotations

import re

from pydantic import field_validator

from tpudeploy.config import checks
from tpudeploy.config.base import Strict

# One address, the shape Cloud Monitoring's email channel takes in its `email_address` label
# (cloud.google.com/monitoring/support/notification-options#email): a local part, an @, and a
# domain with a dot; no spaces, no display name ("Ann <ann@x>"), no list in one string.
EMAIL_RE = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")


class AlertsConfig(Strict):
    """Who the alert policies notify. None by default: the policies exist (the console shows
    them firing) and notify nobody; `make check` says so."""

    emails: tuple[str, ...] = ()
    """addresses the alert policies email (one Cloud Monitoring email channel each)"""

    @field_validator("emails", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return checks.as_tuple(v)

    @field_validator("emails")
    @classmethod
    def _emails(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for address in v:
            if not EMAIL_RE.fullmatch(address):
                raise ValueError(
                    f"{address!r} is not an email address (one address per string, no name or "
                    'spaces); write e.g. ["oncall@example.com"], or leave emails out to alert '
                    "nobody"
                )
        dupes = sorted({a for a in v if v.count(a) > 1})
        if dupes:
            raise ValueError(f"{', '.join(dupes)} listed twice: list each address once")
        return v
