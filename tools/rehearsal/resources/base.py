"""What every resource type shares: the loopback-only HTTP client, the provider's values, the
Resource contract and two block helpers."""

from __future__ import annotations

import ipaddress
import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlencode, urlsplit

from tools.rehearsal.fakes import EMULATOR_ENV

State = dict[str, Any]


class ApiError(Exception):
    """An API refused a call; the message reads like the real provider's googleapi errors."""


def _loopback(host: str) -> bool:
    name = urlsplit(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Client:
    """JSON over HTTP to one API fake, found through its *_EMULATOR_HOST variable.

    The stand-in never talks to Google: without the variable, or with an address that is not
    loopback, every call fails with a message saying so.
    """

    def __init__(self, api: str) -> None:
        self.api = api
        variable = EMULATOR_ENV[api]
        host = os.environ.get(variable, "").strip()
        if not host:
            raise ApiError(
                f"the stand-in google-beta provider needs {variable} (the fake {api} API's "
                "host:port); `make rehearse` sets it. It never calls Google."
            )
        if not _loopback(host):
            raise ApiError(f"{variable}={host} is not a loopback address; refusing to call it")
        self.base = f"http://{host}"

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        url = self.base + path + (f"?{urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        # The real provider's access_token setting from the environment: the pipeline rehearsal
        # runs Terraform as a deploy identity this way (no variable: the fakes' owner).
        token = os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN", "").strip()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        # Loopback only (checked above); the fakes speak plain HTTP like every emulator.
        request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and missing_ok:
                return None
            raise ApiError(f"googleapi: Error {exc.code}: {_message(exc.read())}") from None
        except OSError as exc:
            raise ApiError(f"cannot reach the fake {self.api} API at {self.base}: {exc}") from None
        if not raw:
            return {}
        answer: dict[str, Any] = json.loads(raw)
        return answer


def _message(raw: bytes) -> str:
    try:
        return str(json.loads(raw)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return raw.decode(errors="replace")[:300]


class ProviderConfig:
    """The provider block's values the resources fall back on."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.project = str(config.get("project") or "")
        self.region = str(config.get("region") or "")
        self.zone = str(config.get("zone") or "")
        self.default_labels: dict[str, str] = dict(config.get("default_labels") or {})
        # Everything else the provider block says (the Kubernetes provider's host, token, CA).
        self.raw: dict[str, Any] = dict(config)


class Resource:
    """One Terraform resource type over one API. `create`, `read` and `update` return the values
    of computed attributes (the servicer fills the planned unknowns with them)."""

    type_name: ClassVar[str]
    api: ClassVar[str]
    # Attributes (or blocks) the API changes in place; any other change replaces the resource.
    updatable: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, provider: ProviderConfig) -> None:
        self.provider = provider
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.api)
        return self._client

    def project(self, state: State) -> str:
        project = state.get("project") or self.provider.project
        if not isinstance(project, str) or not project:
            raise ApiError(f"{self.type_name}: no project: set the provider's project")
        return project

    def labels(self, state: State) -> dict[str, str]:
        """What the real provider sends: the provider's default_labels under the resource's."""
        return {**self.provider.default_labels, **(state.get("labels") or {})}

    def create(self, planned: State) -> State:
        raise NotImplementedError

    def read(self, state: State) -> State | None:
        raise NotImplementedError

    def update(self, prior: State, planned: State) -> State:
        raise ApiError(f"{self.type_name}: the stand-in updates nothing in place")

    def delete(self, state: State) -> None:
        raise NotImplementedError


class DataSource:
    """One data source over one API: `read(config)` returns the values of its computed
    attributes (what the real provider reads back for the arguments given)."""

    type_name: ClassVar[str]
    api: ClassVar[str]

    def __init__(self, provider: ProviderConfig) -> None:
        self.provider = provider

    @property
    def client(self) -> Client:
        return Client(self.api)

    def read(self, config: State) -> State:
        raise NotImplementedError


def single_block(state: State, name: str) -> dict[str, Any]:
    """The single element of a max-one list block, or {}."""
    value = state.get(name) or []
    return dict(value[0]) if value else {}


def camel(values: Mapping[str, Any]) -> dict[str, Any]:
    """snake_case keys of a block -> the API's camelCase, dropping nulls and empty lists."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None or value == []:
            continue
        head, *rest = key.split("_")
        out[head + "".join(word.title() for word in rest)] = value
    return out


# The real provider serializes every read-modify-write of one IAM policy with a lock keyed by the
# policy's resource (iamPolicyReadModifyWrite in the provider's tpgiamresource/iam.go locks
# transport_tpg.MutexStore by the policy's mutex key): two members of one bucket created or
# deleted in parallel would otherwise overwrite each other's change.
_POLICY_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def _policy_lock(parent: str) -> threading.Lock:
    with _LOCKS_LOCK:
        return _POLICY_LOCKS.setdefault(parent, threading.Lock())


class IamMember(Resource):
    """`*_iam_member`: read-modify-write of the parent's policy, one member of one role."""

    updatable = frozenset({"timeouts"})

    def create(self, planned: State) -> State:
        with _policy_lock(self.parent(planned)):
            return self._create(planned)

    def delete(self, state: State) -> None:
        with _policy_lock(self.parent(state)):
            self._delete(state)

    def parent(self, state: State) -> str:
        raise NotImplementedError

    def get_policy(self, parent: str) -> dict[str, Any]:
        raise NotImplementedError

    def set_policy(self, parent: str, policy: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _id(self, state: State) -> str:
        return f"{self.parent(state)}/{state['role']}/{state['member']}"

    @staticmethod
    def _condition(state: State) -> dict[str, Any] | None:
        block = state.get("condition") or []
        found = {k: v for k, v in dict(block[0]).items() if v} if block else {}
        return found or None

    def _ours(self, binding: Mapping[str, Any], state: State) -> bool:
        """A member with a `condition` block is a binding of its own (role + condition), as
        IAM keeps it in a version 3 policy (https://cloud.google.com/iam/docs/policies,
        "Policy versions"); the fakes then grant it only where the condition holds."""
        return binding.get("role") == state["role"] and (
            binding.get("condition") or None
        ) == self._condition(state)

    # _create and _delete: create and delete run them under the policy's lock, as google-beta
    # serializes every read-modify-write of one policy (a reader and a writer deleted at once
    # would otherwise each PUT back the other's member).
    def _create(self, planned: State) -> State:
        condition = self._condition(planned)
        parent = self.parent(planned)
        policy = self.get_policy(parent)
        bindings = policy.setdefault("bindings", [])
        for binding in bindings:
            if self._ours(binding, planned):
                if planned["member"] not in binding.setdefault("members", []):
                    binding["members"].append(planned["member"])
                break
        else:
            added = {"role": planned["role"], "members": [planned["member"]]}
            bindings.append({**added, "condition": condition} if condition else added)
        if condition is not None:
            policy["version"] = 3
        saved = self.set_policy(parent, policy)
        return {"id": self._id(planned), "etag": saved.get("etag")}

    def read(self, state: State) -> State | None:
        policy = self.get_policy(self.parent(state))
        for binding in policy.get("bindings", []):
            if self._ours(binding, state) and state["member"] in binding.get("members", []):
                return {"id": self._id(state), "etag": policy.get("etag")}
        return None

    def _delete(self, state: State) -> None:
        parent = self.parent(state)
        policy = self.get_policy(parent)
        for binding in policy.get("bindings", []):
            if self._ours(binding, state) and state["member"] in binding.get("members", []):
                binding["members"].remove(state["member"])
        policy["bindings"] = [b for b in policy.get("bindings", []) if b.get("members")]
        self.set_policy(parent, policy)
