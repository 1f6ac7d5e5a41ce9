"""Loopback fake of Secret Manager: secrets, their versions and IAM policies.

Access to a version is checked like the real service does it: the owner (no credentials, the
person deploying) may do anything; an identity from the metadata server (the node) may read a
version only with a role that grants secretmanager.versions.access on that secret.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.api import ApiFake
from tools.rehearsal.fakes.base import Answer, api_error

SERVICE = "secretmanager.googleapis.com"
_COLLECTION = r"/v1/projects/(?P<project>[^/]+)/secrets"
_SECRET = _COLLECTION + r"/(?P<secret>[^/:]+)"
_SECRET_ID = re.compile(r"^[A-Za-z0-9_-]{1,255}$")

# The version rules `make api-key ROTATE=1` relies on, as data with their sources.
VERSION_RULES: dict[str, str] = {
    # "projects/*/secrets/*/versions/latest is an alias to the most recently created
    # SecretVersion" (reference/rest/v1/projects.secrets.versions/access): the newest version,
    # whatever its state, so a disabled newest version makes `latest` unreadable.
    "latest": "the most recently created version",
    # "DISABLED: The SecretVersion may not be accessed, but the secret data is still available
    # and can be placed back into the ENABLED state" (reference/rest/v1/projects.secrets.versions,
    # State). Access answers FAILED_PRECONDITION (400); the status is the reading (the
    # stored pages do not quote the error).
    "access_disabled": "400 FAILED_PRECONDITION",
    # "Authorization requires the following IAM permission on the specified resource parent:
    # secretmanager.versions.list" (reference/rest/v1/projects.secrets.versions/list); "This call
    # does not return secret data".
    "list_permission": "secretmanager.versions.list",
    # versions.disable: "Sets the state of the SecretVersion to DISABLED"; the page names the
    # permission "secretmanager.secrets.disable", the how-to page (secret-manager/docs/
    # disable-secret-version) the role roles/secretmanager.secretVersionManager, whose
    # permission is secretmanager.versions.disable (the versions.* family of that role).
    "disable_permission": "secretmanager.versions.disable",
}


class FakeSecretManager(ApiFake):
    api = "secretmanager"

    def routes(self) -> None:
        sm = "secretmanager.secrets."
        self.route("POST", _COLLECTION, self._create, (sm + "create",))
        self.route("GET", _SECRET, self._get, (sm + "get",))
        self.route("PATCH", _SECRET, self._patch, (sm + "update",))
        self.route("DELETE", _SECRET, self._delete, (sm + "delete",))
        self.route("POST", _SECRET + r":addVersion", self._add_version)
        self.route("GET", _SECRET + r"/versions", self._list_versions)
        self.route("POST", _SECRET + r"/versions/(?P<version>[^/:]+):disable", self._disable)
        self.route("GET", _SECRET + r"/versions/(?P<version>[^/:]+):access", self._access)
        # versions.get: a version's metadata (its state), never its value; `make preflight`
        # reads the latest one's before a deploy.
        self.route("GET", _SECRET + r"/versions/(?P<version>[^/:]+)", self._get_version)
        self.route("POST", _SECRET + r":getIamPolicy", self._get_policy, (sm + "getIamPolicy",))
        self.route("GET", _SECRET + r":getIamPolicy", self._get_policy, (sm + "getIamPolicy",))
        self.route("POST", _SECRET + r":setIamPolicy", self._set_policy, (sm + "setIamPolicy",))

    def resources(self, m: re.Match[str], query: dict[str, str], body: Any) -> list[Any]:
        """The project (the parent a create is checked on) and the secret."""
        project = m["project"]
        secret_id = m.groupdict().get("secret") or query.get("secretId", "")
        return [iamrules.project(project), iamrules.secret(project, secret_id)]

    @staticmethod
    def _name(m: re.Match[str]) -> str:
        return f"projects/{m['project']}/secrets/{m['secret']}"

    def _secret(self, m: re.Match[str]) -> tuple[str, dict[str, Any] | None, Answer | None]:
        name = self._name(m)
        disabled = self.inventory.require_service(m["project"], SERVICE)
        if disabled:
            return name, None, disabled
        secret = self.inventory.get(self.api, name)
        if secret is None:
            return name, None, api_error(404, f"Secret [{name}] not found or has no versions.")
        return name, secret, None

    def _create(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        project = m["project"]
        disabled = self.inventory.require_service(project, SERVICE)
        if disabled:
            return disabled
        secret_id = query.get("secretId", "")
        if not _SECRET_ID.match(secret_id):
            return api_error(400, f"secretId {secret_id!r} must match {_SECRET_ID.pattern}")
        name = f"projects/{project}/secrets/{secret_id}"
        if self.inventory.get(self.api, name) is not None:
            return api_error(409, f"Secret [{name}] already exists.")
        replication = (body or {}).get("replication")
        if not replication:
            return api_error(400, "Secret.replication is required")
        secret = {
            "name": name,
            "replication": replication,
            "labels": (body or {}).get("labels", {}),
            "createTime": "2026-08-09T16:00:00.000000Z",
            "etag": '"1"',
            "versions": [],
        }
        self.inventory.put(self.api, name, secret)
        return 200, _public(secret)

    def _get(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        _, secret, error = self._secret(m)
        return error if error else (200, _public(secret or {}))

    def _patch(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        _, secret, error = self._secret(m)
        if error or secret is None:
            return error or api_error(404, "no secret")
        for key in query.get("updateMask", "").split(","):
            if key in ("labels", "annotations"):
                secret[key] = (body or {}).get(key, {})
        return 200, _public(secret)

    def _delete(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, _, error = self._secret(m)
        if error:
            return error
        # Deleting a secret deletes its versions with it.
        self.inventory.delete(self.api, name)
        return 200, {}

    def _add_version(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, secret, error = self._secret(m)
        if error or secret is None:
            return error or api_error(404, "no secret")
        if not self.inventory.allowed(who, self.api, name, "secretmanager.versions.add"):
            return api_error(403, f"Permission 'secretmanager.versions.add' denied for {name}")
        try:
            data = base64.b64decode(body["payload"]["data"], validate=True)
        except (KeyError, TypeError, ValueError):
            return api_error(400, "payload.data must be base64")
        secret["versions"].append(data)
        secret.setdefault("states", []).extend(
            ["ENABLED"] * (len(secret["versions"]) - len(secret.get("states", [])))
        )
        return 200, {
            "name": f"{name}/versions/{len(secret['versions'])}",
            "state": "ENABLED",
            "createTime": "2026-08-09T16:00:00.000000Z",
        }

    def _get_version(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, secret, error = self._secret(m)
        if error or secret is None:
            return error or api_error(404, "no secret")
        if not self.inventory.allowed(who, self.api, name, "secretmanager.versions.get"):
            return api_error(403, f"Permission 'secretmanager.versions.get' denied for {name}")
        count = len(secret["versions"])
        wanted = m["version"]
        index = count if wanted == "latest" else int(wanted) if wanted.isdigit() else 0
        if not 1 <= index <= count:
            return api_error(404, f"Secret Version [{name}/versions/{wanted}] not found.")
        return 200, {
            "name": f"{name}/versions/{index}",
            "state": _state(secret, index),
            "createTime": "2026-08-09T16:00:00.000000Z",
        }

    def _list_versions(
        self, m: re.Match[str], query: dict[str, str], body: Any, who: str
    ) -> Answer:
        name, secret, error = self._secret(m)
        if error or secret is None:
            return error or api_error(404, "no secret")
        permission = VERSION_RULES["list_permission"]
        if not self.inventory.allowed(who, self.api, name, permission):
            return api_error(403, f"Permission '{permission}' denied for {name}")
        count = len(secret["versions"])
        # Newest first, metadata only: never a payload.
        versions = [
            {"name": f"{name}/versions/{i}", "state": _state(secret, i)}
            for i in range(count, 0, -1)
        ]
        return 200, {"versions": versions, "totalSize": count} if versions else {}

    def _disable(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, secret, error = self._secret(m)
        if error or secret is None:
            return error or api_error(404, "no secret")
        permission = VERSION_RULES["disable_permission"]
        if not self.inventory.allowed(who, self.api, name, permission):
            return api_error(403, f"Permission '{permission}' denied for {name}")
        count = len(secret["versions"])
        wanted = m["version"]
        index = count if wanted == "latest" else int(wanted) if wanted.isdigit() else 0
        if not 1 <= index <= count:
            return api_error(404, f"Secret Version [{name}/versions/{wanted}] not found.")
        states = secret.setdefault("states", ["ENABLED"] * count)
        states.extend(["ENABLED"] * (count - len(states)))
        states[index - 1] = "DISABLED"
        return 200, {"name": f"{name}/versions/{index}", "state": "DISABLED"}

    def _access(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, secret, error = self._secret(m)
        if error or secret is None:
            return error or api_error(404, "no secret")
        if not self.inventory.allowed(who, self.api, name, "secretmanager.versions.access"):
            return api_error(
                403,
                f"Permission 'secretmanager.versions.access' denied for resource "
                f"'{name}/versions/{m['version']}' (or it may not exist).",
            )
        versions: list[bytes] = secret["versions"]
        wanted = m["version"]
        index = len(versions) if wanted == "latest" else int(wanted) if wanted.isdigit() else 0
        if not 1 <= index <= len(versions):
            return api_error(404, f"Secret Version [{name}/versions/{wanted}] not found.")
        if _state(secret or {}, index) != "ENABLED":
            code, status = VERSION_RULES["access_disabled"].split()
            return api_error(
                int(code),
                f"{status}: Secret Version [{name}/versions/{index}] is in DISABLED state.",
            )
        return 200, {
            "name": f"{name}/versions/{index}",
            "payload": {"data": base64.b64encode(versions[index - 1]).decode()},
        }

    def _get_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, _, error = self._secret(m)
        if error:
            return error
        return 200, _policy(self.inventory.policy(self.api, name))

    def _set_policy(self, m: re.Match[str], query: dict[str, str], body: Any, who: str) -> Answer:
        name, _, error = self._secret(m)
        if error:
            return error
        bindings = list(((body or {}).get("policy") or {}).get("bindings") or [])
        refused = self.inventory.check_members(bindings)
        if refused:
            return refused
        policy = self.inventory.policy(self.api, name)
        policy[:] = bindings
        return 200, _policy(policy)

    # ---- for the rehearsal's checks

    def states(self, project: str, secret_id: str) -> list[str]:
        """Each version's state, oldest first."""
        with self.inventory.locked() as inv:
            secret = inv.get(self.api, f"projects/{project}/secrets/{secret_id}") or {}
            return [_state(secret, i) for i in range(1, len(secret.get("versions", [])) + 1)]

    def values(self, project: str, secret_id: str) -> list[bytes]:
        """The versions of one secret (what `make secret` stored), oldest first."""
        with self.inventory.locked() as inv:
            secret = inv.get(self.api, f"projects/{project}/secrets/{secret_id}")
            return list(secret["versions"]) if secret else []


def _public(secret: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in secret.items() if k not in ("versions", "states")}


def _state(secret: dict[str, Any], index: int) -> str:
    """Version `index`'s state (1-based): ENABLED unless disabled."""
    states = secret.get("states") or []
    return str(states[index - 1]) if index <= len(states) else "ENABLED"


def _policy(bindings: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": 1, "etag": f"BwY{len(bindings):04d}=", "bindings": bindings}
