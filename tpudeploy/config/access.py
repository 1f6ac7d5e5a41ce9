"""`[access]`: the clients (agents) that may call the endpoint, each with its own key and limits.

A client's name is stable: its key lives in its own Secret Manager secret (client_secret_id),
`make api-key CLIENT=name` adds a version, rotation adds another, and removing the name from
`clients` revokes it at the next apply (the secrets stack stops declaring its secret). Limits
left unset take the planner's defaults (tpudeploy/planner/clients.py), derived from the KV wall.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from tpudeploy.config import checks
from tpudeploy.config.base import Strict
from tpudeploy.durations import MAX_DURATION_SECONDS, DurationError, parse_duration

# The client that existed before [access]: its secret keeps the historical id "<name>-api-key",
# so a deployment made before clients existed keeps its key and its agents.
DEFAULT_CLIENT = "default"
# A client's name is part of its secret's id ("<name>-api-key-<client>", Secret Manager ids take
# [A-Za-z0-9_-], at most 255) and of nginx zone and variable names in the front door, and it
# appears in logs: lower-case letters, digits and hyphens, a letter first, at most 24.
CLIENT_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,23}")
# One hour: long enough to roll a new key out to a fleet of agents (issue 37's default).
DEFAULT_ROTATION_OVERLAP = "1h"


def overlap_seconds(value: str | int, *, name: str) -> int:
    """A rotation overlap in seconds: 0 ("0", "0s": the old key stops now) or a duration
    (tpudeploy/durations.py, which refuses 0); raises DurationError naming `name`."""
    if value in (0, "0", "0s"):
        return 0
    return parse_duration(value, name=name)


def client_secret_id(deployment: str, client: str) -> str:
    """The Secret Manager secret holding `client`'s key."""
    if client == DEFAULT_CLIENT:
        return f"{deployment}-api-key"
    return f"{deployment}-api-key-{client}"


class ClientLimits(Strict):
    """`[access.limits.CLIENT]`: one client's caps; unset keys take the planner's defaults."""

    streams: int | None = Field(default=None, ge=1, examples=[8])
    """concurrent requests (streams) this client may hold; more get 429 with Retry-After"""
    requests_per_minute: int | None = Field(default=None, ge=1, examples=[600])
    """new requests per minute this client may start; faster gets 429 with Retry-After"""


class AccessConfig(Strict):
    """Who may call the endpoint: one key per client, rotated with an overlap, limited apart."""

    clients: tuple[str, ...] = (DEFAULT_CLIENT,)
    """client names (agents); each gets its own key (make api-key CLIENT=name)"""
    rotation_overlap: str | int = DEFAULT_ROTATION_OVERLAP
    """how long a rotated-out key keeps working after make api-key CLIENT=name ROTATE=1"""
    limits: dict[str, ClientLimits] = Field(
        default_factory=dict, examples=[{"planner": {"streams": 8, "requests_per_minute": 600}}]
    )
    """[access.limits.CLIENT]: per-client streams and requests_per_minute"""

    @field_validator("clients", mode="before")
    @classmethod
    def _list_to_tuple(cls, v: object) -> object:
        return checks.as_tuple(v)

    @field_validator("clients")
    @classmethod
    def _clients(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError(
                f'no client would have a key; name at least one, e.g. ["{DEFAULT_CLIENT}"]'
            )
        for name in v:
            if not CLIENT_NAME_RE.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a client name: lower-case letters, digits and hyphens, a "
                    'letter first, at most 24 (it is part of its secret\'s id); e.g. "planner"'
                )
        dupes = sorted({n for n in v if v.count(n) > 1})
        if dupes:
            raise ValueError(f"{', '.join(dupes)} listed twice: list each client once")
        return v

    @field_validator("rotation_overlap")
    @classmethod
    def _overlap(cls, v: str | int) -> str | int:
        try:
            overlap_seconds(v, name="rotation_overlap")
        except DurationError as exc:
            if "maximum" in exc.reason:  # durations caps every duration at 7 days
                raise ValueError(
                    f"{v!r} is longer than {MAX_DURATION_SECONDS // 86400} days: an old key "
                    "would outlive the reason it was rotated; use e.g. '1h'"
                ) from None
            raise ValueError(f"{exc.reason}; {exc.fix}") from None
        return v

    @model_validator(mode="after")
    def _limits_name_clients(self) -> AccessConfig:
        unknown = sorted(set(self.limits) - set(self.clients))
        if unknown:
            raise ValueError(
                f"[access.limits] names {', '.join(unknown)}, not in access.clients "
                f"{list(self.clients)}: add the client to clients or drop its limits"
            )
        return self

    @property
    def rotation_overlap_seconds(self) -> int:
        return overlap_seconds(self.rotation_overlap, name="rotation_overlap")

    def client_secret_ids(self, deployment: str) -> dict[str, str]:
        """client -> its key's secret id, in the config's order."""
        return {c: client_secret_id(deployment, c) for c in self.clients}
