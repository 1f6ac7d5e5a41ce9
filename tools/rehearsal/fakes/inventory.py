"""What exists in the fake cloud: one inventory that every loopback API fake reads and writes.

Shared because the real APIs are not independent either: a secret cannot be created before
Secret Manager is enabled in the project, a grant cannot name a service account that does not
exist, and the node reads its secrets with the identity the TPU API gave it. Each object is kept
under `<api>/<resource name>` with the JSON the API answers for it.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tools.rehearsal.fakes.base import Answer, api_error
from tools.rehearsal.fakes.iamrules import (
    CHECKED_ON,
    PREDEFINED_ROLES,
    Checked,
    binding_grants,
)

# Whoever calls without a bearer token is the person running the deploy: like every Google
# emulator, the fakes take "no credentials" to mean the project owner.
OWNER = "user:owner"

# Service -> the API title the real "has not been used ... or it is disabled" error names.
API_TITLES = {
    "compute.googleapis.com": "Compute Engine API",
    "iam.googleapis.com": "Identity and Access Management (IAM) API",
    "secretmanager.googleapis.com": "Secret Manager API",
    "storage.googleapis.com": "Cloud Storage JSON API",
    "tpu.googleapis.com": "Cloud TPU API",
    "cloudscheduler.googleapis.com": "Cloud Scheduler API",
    "monitoring.googleapis.com": "Cloud Monitoring API",
}

# Roles that carry a permission the fakes check, as the predefined roles grant them.
ROLE_PERMISSIONS = {
    "roles/owner": {"*"},
    "roles/secretmanager.admin": {"secretmanager.*"},
    "roles/secretmanager.secretAccessor": {"secretmanager.versions.access"},
    "roles/secretmanager.secretVersionAdder": {"secretmanager.versions.add"},
    # What `make api-key ROTATE=1` needs beyond reading the old key (secretAccessor): the list
    # and versions:disable (secret-manager/docs/disable-secret-version names this role).
    "roles/secretmanager.secretVersionManager": {
        "secretmanager.versions.add",
        "secretmanager.versions.disable",
        "secretmanager.versions.enable",
        "secretmanager.versions.destroy",
        "secretmanager.versions.get",
        "secretmanager.versions.list",
    },
    "roles/storage.admin": {"storage.*"},
    "roles/storage.objectAdmin": {
        "storage.objects.get",
        "storage.objects.create",
        "storage.objects.delete",
        "storage.objects.list",
    },
    "roles/storage.objectViewer": {"storage.objects.get", "storage.objects.list"},
    "roles/storage.objectCreator": {"storage.objects.create"},
    "roles/storage.objectUser": {
        "storage.objects.get",
        "storage.objects.create",
        "storage.objects.delete",
        "storage.objects.list",
    },
}


@dataclass
class Call:
    """One request as an API fake saw it: enough to tell reads from changes afterwards."""

    api: str
    method: str
    path: str
    principal: str
    status: int

    @property
    def mutating(self) -> bool:
        """A request that changes something (reads, IAM-policy reads and make preflight's
        permission test do not)."""
        if self.status >= 400 or self.method in ("GET", "HEAD"):
            return False
        path = self.path.split("?")[0]
        return not path.endswith(("getIamPolicy", ":access", ":testIamPermissions"))


@dataclass
class Inventory:
    """Objects, IAM policies, enabled services and access tokens of one fake cloud."""

    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    enabled: dict[str, set[str]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    # The time a request made with a token is made at, when not the machine's clock (the
    # rehearsal's clock: a deadline job fired "a year later", fakes/cloudscheduler.py).
    token_times: dict[str, datetime] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @contextmanager
    def locked(self) -> Iterator[Inventory]:
        with self.lock:
            yield self

    def next_id(self) -> int:
        return next(self._ids)

    # ---- objects

    def get(self, api: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(f"{api}/{name}")

    def put(self, api: str, name: str, obj: dict[str, Any]) -> None:
        self.objects[f"{api}/{name}"] = obj

    def delete(self, api: str, name: str) -> dict[str, Any] | None:
        self.policies.pop(f"{api}/{name}", None)
        return self.objects.pop(f"{api}/{name}", None)

    def names(self, api: str, prefix: str = "") -> list[str]:
        start = f"{api}/{prefix}"
        return sorted(k.removeprefix(f"{api}/") for k in self.objects if k.startswith(start))

    # ---- services

    def enable(self, project: str, service: str) -> None:
        self.enabled.setdefault(project, set()).add(service)

    def require_service(self, project: str, service: str) -> Answer | None:
        """None when `service` is enabled in `project`, else the API's SERVICE_DISABLED error."""
        if service in self.enabled.get(project, set()):
            return None
        title = API_TITLES.get(service, service)
        return api_error(
            403,
            f"{title} has not been used in project {project} before or it is disabled. Enable it "
            f"by visiting https://console.developers.google.com/apis/api/{service}/overview?"
            f"project={project} then retry. (SERVICE_DISABLED)",
        )

    # ---- identities

    def mint_token(self, principal: str, *, at: datetime | None = None) -> str:
        """An opaque OAuth access token for `principal` (the metadata server hands these out);
        `at`: IAM conditions see requests made with it as made then (request.time)."""
        token = "ya29.rehearsal-" + secrets.token_urlsafe(24)
        self.tokens[token] = principal
        if at is not None:
            self.token_times[token] = at
        return token

    def request_time(self, headers: dict[str, str]) -> datetime | None:
        """The request's time for IAM conditions: its token's, or None (the machine's clock)."""
        _, _, token = headers.get("authorization", "").partition(" ")
        return self.token_times.get(token.strip())

    def principal(self, headers: dict[str, str]) -> str | None:
        """The caller: OWNER without credentials, the token's identity, or None (bad token)."""
        auth = headers.get("authorization", "")
        if not auth:
            return OWNER
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.tokens.get(token.strip())

    def service_account_exists(self, email: str) -> bool:
        return any(
            obj.get("email") == email
            for key, obj in self.objects.items()
            if key.startswith("iam/") and "/serviceAccounts/" in key
        )

    def check_members(self, bindings: list[dict[str, Any]]) -> Answer | None:
        """The real setIamPolicy refuses a service account that does not exist."""
        for binding in bindings:
            for member in binding.get("members", []):
                kind, _, email = str(member).partition(":")
                if kind == "serviceAccount" and not self.service_account_exists(email):
                    return api_error(400, f"Service account {email} does not exist.")
        return None

    # ---- IAM

    def policy(self, api: str, name: str) -> list[dict[str, Any]]:
        return self.policies.setdefault(f"{api}/{name}", [])

    def allowed(self, principal: str, api: str, name: str, permission: str) -> bool:
        """Owner always; otherwise a role on the resource itself granting `permission`."""
        if principal == OWNER:
            return True
        service = permission.split(".", 1)[0]
        for binding in self.policies.get(f"{api}/{name}", []):
            if principal not in binding.get("members", []):
                continue
            granted = ROLE_PERMISSIONS.get(str(binding.get("role")), set())
            if permission in granted or "*" in granted or f"{service}.*" in granted:
                return True
        return False

    def role_permissions(self, role: str) -> frozenset[str]:
        """A predefined role's permissions, or a custom role's (projects/P/roles/R)."""
        custom = self.get("iam", role) if role.startswith("projects/") else None
        granted = set((custom or {}).get("includedPermissions") or [])
        granted |= ROLE_PERMISSIONS.get(role, set()) | PREDEFINED_ROLES.get(role, set())
        return frozenset(granted)

    def check(
        self, principal: str, permission: str, resource: Checked, at: datetime | None = None
    ) -> bool:
        """IAM's verdict (tools/rehearsal/fakes/iamrules.py): the owner always; otherwise a
        binding on any policy that reaches `resource`, its condition evaluated over the
        attributes that resource provides and the request's time `at` (None: now)."""
        if principal == OWNER:
            return True
        if CHECKED_ON.get(permission) != resource.type:
            raise AssertionError(
                f"{permission} is checked on a {CHECKED_ON.get(permission)}, not a "
                f"{resource.type} (tools/rehearsal/fakes/iamrules.py)"
            )
        return any(
            binding_grants(
                b, principal, permission, resource, self.role_permissions(str(b.get("role"))), at
            )
            for key in resource.policies
            for b in self.policies.get(key, [])
        )

    def project_allows(self, principal: str, project: str, permission: str) -> bool:
        """Owner always; otherwise a project-level binding of a predefined role, or of one of
        the project's custom roles (IAM's projects/P/roles/R), that holds `permission`."""
        if principal == OWNER:
            return True
        for binding in self.policies.get(f"cloudresourcemanager/projects/{project}", []):
            if principal not in binding.get("members", []) or binding.get("condition"):
                continue
            role = str(binding.get("role"))
            custom = self.get("iam", role) if role.startswith("projects/") else None
            granted = set((custom or {}).get("includedPermissions") or [])
            granted |= ROLE_PERMISSIONS.get(role, set())
            if permission in granted or "*" in granted:
                return True
        return False

    # ---- the request log

    def record(self, api: str, method: str, path: str, principal: str, status: int) -> None:
        self.calls.append(Call(api, method, path, principal, status))
