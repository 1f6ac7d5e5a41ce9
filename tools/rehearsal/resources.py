"""What the stand-in provider does for each google-beta resource type: the REST calls the real
provider makes (same API, same resource names), sent to the loopback fakes.

Each class maps Terraform attributes to one API's request bodies and reads back the values the
real provider reports as computed. Adding a resource type (issue 16: a Cloud Scheduler job, a
service account IAM binding) means one class here and its routes in a fake; its schema is
generated from the bindings like the others (tools/rehearsal/schema.py).
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote, urlencode, urlsplit

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


def _block(state: State, name: str) -> dict[str, Any]:
    """The single element of a max-one list block, or {}."""
    value = state.get(name) or []
    return dict(value[0]) if value else {}


def _camel(values: Mapping[str, Any]) -> dict[str, Any]:
    """snake_case keys of a block -> the API's camelCase, dropping nulls and empty lists."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None or value == []:
            continue
        head, *rest = key.split("_")
        out[head + "".join(word.title() for word in rest)] = value
    return out


# --------------------------------------------------------------------------- Service Usage


class ProjectService(Resource):
    type_name = "google_project_service"
    api = "serviceusage"
    updatable = frozenset({"disable_on_destroy", "disable_dependent_services", "timeouts"})

    def _path(self, state: State) -> str:
        return f"/v1/projects/{self.project(state)}/services/{state['service']}"

    def create(self, planned: State) -> State:
        self.client.call("POST", self._path(planned) + ":enable", {})
        return {
            "id": f"{self.project(planned)}/{planned['service']}",
            "project": self.project(planned),
        }

    def read(self, state: State) -> State | None:
        found = self.client.call("GET", self._path(state)) or {}
        if found.get("state") != "ENABLED":
            return None
        return {"id": f"{self.project(state)}/{state['service']}", "project": self.project(state)}

    def update(self, prior: State, planned: State) -> State:
        return {}

    def delete(self, state: State) -> None:
        # Like the real provider: disable_on_destroy = false only forgets the service.
        if state.get("disable_on_destroy") is not False:
            self.client.call("POST", self._path(state) + ":disable", {})


# --------------------------------------------------------------------------- IAM


class ServiceAccount(Resource):
    type_name = "google_service_account"
    api = "iam"
    updatable = frozenset({"display_name", "description", "timeouts"})

    def _computed(self, account: Mapping[str, Any], project: str) -> State:
        email = account["email"]
        return {
            "id": account["name"],
            "name": account["name"],
            "email": email,
            "unique_id": account["uniqueId"],
            "member": f"serviceAccount:{email}",
            "project": project,
        }

    def create(self, planned: State) -> State:
        project = self.project(planned)
        body = {
            "accountId": planned["account_id"],
            "serviceAccount": {
                "displayName": planned.get("display_name") or "",
                "description": planned.get("description") or "",
            },
        }
        account = self.client.call("POST", f"/v1/projects/{project}/serviceAccounts", body) or {}
        return self._computed(account, project)

    def read(self, state: State) -> State | None:
        account = self.client.call("GET", f"/v1/{state['name']}", missing_ok=True)
        return self._computed(account, self.project(state)) if account else None

    def update(self, prior: State, planned: State) -> State:
        body = {
            "serviceAccount": {
                "displayName": planned.get("display_name") or "",
                "description": planned.get("description") or "",
            },
            "updateMask": "displayName,description",
        }
        account = self.client.call("PATCH", f"/v1/{prior['name']}", body) or {}
        return self._computed(account, self.project(planned))

    def delete(self, state: State) -> None:
        self.client.call("DELETE", f"/v1/{state['name']}", missing_ok=True)


# --------------------------------------------------------------------------- Secret Manager


def _secret_name(state: State, project: str) -> str:
    secret = str(state["secret_id"])
    return secret if secret.startswith("projects/") else f"projects/{project}/secrets/{secret}"


class SecretManagerSecret(Resource):
    type_name = "google_secret_manager_secret"
    api = "secretmanager"
    updatable = frozenset({"labels", "annotations", "timeouts"})

    def _computed(self, secret: Mapping[str, Any], state: State) -> State:
        labels = self.labels(state)
        return {
            "id": secret["name"],
            "name": secret["name"],
            "project": self.project(state),
            "create_time": secret.get("createTime"),
            "effective_labels": labels,
            "terraform_labels": labels,
            "effective_annotations": dict(state.get("annotations") or {}),
        }

    def _replication(self, planned: State) -> dict[str, Any]:
        replication = _block(planned, "replication")
        if replication.get("auto"):
            return {"automatic": {}}
        managed = (replication.get("user_managed") or [{}])[0]
        return {
            "userManaged": {
                "replicas": [{"location": r["location"]} for r in managed.get("replicas", [])]
            }
        }

    def create(self, planned: State) -> State:
        project = self.project(planned)
        body = {"replication": self._replication(planned), "labels": self.labels(planned)}
        secret = self.client.call(
            "POST",
            f"/v1/projects/{project}/secrets",
            body,
            query={"secretId": planned["secret_id"]},
        )
        return self._computed(secret or {}, planned)

    def read(self, state: State) -> State | None:
        secret = self.client.call("GET", f"/v1/{state['name']}", missing_ok=True)
        return self._computed(secret, state) if secret else None

    def update(self, prior: State, planned: State) -> State:
        body = {"labels": self.labels(planned), "annotations": planned.get("annotations") or {}}
        secret = self.client.call(
            "PATCH", f"/v1/{prior['name']}", body, query={"updateMask": "labels,annotations"}
        )
        return self._computed(secret or {}, planned)

    def delete(self, state: State) -> None:
        self.client.call("DELETE", f"/v1/{state['name']}", missing_ok=True)


class _IamMember(Resource):
    """`*_iam_member`: read-modify-write of the parent's policy, one member of one role."""

    updatable = frozenset({"timeouts"})

    def parent(self, state: State) -> str:
        raise NotImplementedError

    def get_policy(self, parent: str) -> dict[str, Any]:
        raise NotImplementedError

    def set_policy(self, parent: str, policy: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _id(self, state: State) -> str:
        return f"{self.parent(state)}/{state['role']}/{state['member']}"

    def create(self, planned: State) -> State:
        parent = self.parent(planned)
        policy = self.get_policy(parent)
        bindings = policy.setdefault("bindings", [])
        for binding in bindings:
            if binding.get("role") == planned["role"] and not binding.get("condition"):
                if planned["member"] not in binding.setdefault("members", []):
                    binding["members"].append(planned["member"])
                break
        else:
            bindings.append({"role": planned["role"], "members": [planned["member"]]})
        saved = self.set_policy(parent, policy)
        return {"id": self._id(planned), "etag": saved.get("etag")}

    def read(self, state: State) -> State | None:
        policy = self.get_policy(self.parent(state))
        for binding in policy.get("bindings", []):
            if binding.get("role") == state["role"] and state["member"] in binding.get(
                "members", []
            ):
                return {"id": self._id(state), "etag": policy.get("etag")}
        return None

    def delete(self, state: State) -> None:
        parent = self.parent(state)
        policy = self.get_policy(parent)
        for binding in policy.get("bindings", []):
            if binding.get("role") == state["role"] and state["member"] in binding.get(
                "members", []
            ):
                binding["members"].remove(state["member"])
        policy["bindings"] = [b for b in policy.get("bindings", []) if b.get("members")]
        self.set_policy(parent, policy)


class SecretManagerSecretIamMember(_IamMember):
    type_name = "google_secret_manager_secret_iam_member"
    api = "secretmanager"

    def parent(self, state: State) -> str:
        return _secret_name(state, self.project(state))

    def get_policy(self, parent: str) -> dict[str, Any]:
        return self.client.call("POST", f"/v1/{parent}:getIamPolicy", {}) or {}

    def set_policy(self, parent: str, policy: dict[str, Any]) -> dict[str, Any]:
        return self.client.call("POST", f"/v1/{parent}:setIamPolicy", {"policy": policy}) or {}

    def create(self, planned: State) -> State:
        return {**super().create(planned), "project": self.project(planned)}

    def read(self, state: State) -> State | None:
        found = super().read(state)
        return {**found, "project": self.project(state)} if found else None


# --------------------------------------------------------------------------- Cloud Storage


class StorageBucket(Resource):
    type_name = "google_storage_bucket"
    api = "storage"
    updatable = frozenset({"labels", "lifecycle_rule", "versioning", "force_destroy", "timeouts"})

    def _body(self, planned: State) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": planned["name"],
            "location": str(planned["location"]).upper(),
            "labels": self.labels(planned),
            "versioning": {"enabled": bool(_block(planned, "versioning").get("enabled"))},
            "iamConfiguration": {
                "uniformBucketLevelAccess": {
                    "enabled": bool(planned.get("uniform_bucket_level_access"))
                },
                "publicAccessPrevention": planned.get("public_access_prevention") or "inherited",
            },
        }
        rules = []
        for rule in planned.get("lifecycle_rule") or []:
            action = _camel((rule.get("action") or [{}])[0])
            condition = _camel((rule.get("condition") or [{}])[0])
            rules.append({"action": action, "condition": condition})
        if rules:
            body["lifecycle"] = {"rule": rules}
        if planned.get("storage_class"):
            body["storageClass"] = planned["storage_class"]
        return body

    def _computed(self, bucket: Mapping[str, Any], state: State) -> State:
        labels = self.labels(state)
        iam = bucket.get("iamConfiguration") or {}
        return {
            "id": bucket["name"],
            "self_link": bucket.get("selfLink"),
            "url": f"gs://{bucket['name']}",
            "project": self.project(state),
            "project_number": int(bucket.get("projectNumber", 0)),
            "storage_class": bucket.get("storageClass"),
            "effective_labels": labels,
            "terraform_labels": labels,
            "time_created": bucket.get("timeCreated"),
            "updated": bucket.get("updated"),
            "uniform_bucket_level_access": bool(
                (iam.get("uniformBucketLevelAccess") or {}).get("enabled")
            ),
            "public_access_prevention": iam.get("publicAccessPrevention"),
            "rpo": None,
        }

    def create(self, planned: State) -> State:
        bucket = self.client.call(
            "POST", "/storage/v1/b", self._body(planned), query={"project": self.project(planned)}
        )
        return self._computed(bucket or {}, planned)

    def read(self, state: State) -> State | None:
        bucket = self.client.call("GET", f"/storage/v1/b/{quote(state['name'])}", missing_ok=True)
        return self._computed(bucket, state) if bucket else None

    def update(self, prior: State, planned: State) -> State:
        bucket = self.client.call(
            "PATCH", f"/storage/v1/b/{quote(prior['name'])}", self._body(planned)
        )
        return self._computed(bucket or {}, planned)

    def delete(self, state: State) -> None:
        name = quote(state["name"])
        listing = self.client.call("GET", f"/storage/v1/b/{name}/o", query={"versions": "true"})
        items = (listing or {}).get("items") or []
        if items and not state.get("force_destroy"):
            # The real provider's words: a bucket with objects (any generation) is kept.
            raise ApiError(
                f"Error trying to delete bucket {state['name']} containing objects without "
                "`force_destroy` set to true"
            )
        for item in items:
            self.client.call(
                "DELETE",
                f"/storage/v1/b/{name}/o/{quote(item['name'], safe='')}",
                query={"generation": item["generation"]},
            )
        self.client.call("DELETE", f"/storage/v1/b/{name}", missing_ok=True)


class StorageBucketIamMember(_IamMember):
    type_name = "google_storage_bucket_iam_member"
    api = "storage"

    def parent(self, state: State) -> str:
        bucket = str(state["bucket"]).removeprefix("b/")
        return f"b/{bucket}"

    def get_policy(self, parent: str) -> dict[str, Any]:
        return self.client.call("GET", f"/storage/v1/{parent}/iam") or {}

    def set_policy(self, parent: str, policy: dict[str, Any]) -> dict[str, Any]:
        return self.client.call("PUT", f"/storage/v1/{parent}/iam", policy) or {}


# --------------------------------------------------------------------------- Compute


class ComputeFirewall(Resource):
    type_name = "google_compute_firewall"
    api = "compute"
    updatable = frozenset(
        {
            "allow",
            "deny",
            "description",
            "source_ranges",
            "source_tags",
            "target_tags",
            "priority",
            "disabled",
            "log_config",
            "timeouts",
        }
    )

    def _path(self, state: State) -> str:
        return f"/compute/v1/projects/{self.project(state)}/global/firewalls"

    def _body(self, planned: State) -> dict[str, Any]:
        def rules(name: str) -> list[dict[str, Any]]:
            return [
                {"IPProtocol": r["protocol"], **({"ports": r["ports"]} if r.get("ports") else {})}
                for r in planned.get(name) or []
            ]

        body: dict[str, Any] = {
            "name": planned["name"],
            "network": planned["network"],
            "direction": planned.get("direction") or "INGRESS",
            "allowed": rules("allow"),
            "denied": rules("deny"),
            "sourceRanges": planned.get("source_ranges") or [],
            "sourceTags": planned.get("source_tags") or [],
            "targetTags": planned.get("target_tags") or [],
            "disabled": bool(planned.get("disabled")),
        }
        if planned.get("priority") is not None:
            body["priority"] = planned["priority"]
        if planned.get("description"):
            body["description"] = planned["description"]
        return {k: v for k, v in body.items() if v != []}

    def _computed(self, rule: Mapping[str, Any], state: State) -> State:
        project = self.project(state)
        return {
            "id": f"projects/{project}/global/firewalls/{rule['name']}",
            "self_link": rule.get("selfLink"),
            "creation_timestamp": rule.get("creationTimestamp"),
            "project": project,
            "direction": rule.get("direction"),
            "destination_ranges": rule.get("destinationRanges", []),
            "source_ranges": rule.get("sourceRanges", []),
            "enable_logging": False,
        }

    def _wait(self, op: Mapping[str, Any] | None) -> None:
        if op and op.get("status") != "DONE":
            raise ApiError(f"operation {op.get('name')} did not finish")
        if op and op.get("error"):
            raise ApiError(f"operation {op.get('name')} failed: {op['error']}")

    def create(self, planned: State) -> State:
        self._wait(self.client.call("POST", self._path(planned), self._body(planned)))
        rule = self.client.call("GET", f"{self._path(planned)}/{planned['name']}") or {}
        return self._computed(rule, planned)

    def read(self, state: State) -> State | None:
        rule = self.client.call("GET", f"{self._path(state)}/{state['name']}", missing_ok=True)
        return self._computed(rule, state) if rule else None

    def update(self, prior: State, planned: State) -> State:
        self._wait(
            self.client.call("PATCH", f"{self._path(prior)}/{prior['name']}", self._body(planned))
        )
        rule = self.client.call("GET", f"{self._path(planned)}/{planned['name']}") or {}
        return self._computed(rule, planned)

    def delete(self, state: State) -> None:
        self._wait(
            self.client.call("DELETE", f"{self._path(state)}/{state['name']}", missing_ok=True)
        )


# --------------------------------------------------------------------------- TPU


class TpuV2Vm(Resource):
    type_name = "google_tpu_v2_vm"
    api = "tpu"
    # The real provider patches labels, metadata and tags; the stand-in replaces the node for
    # any change, which a rehearsal (create, no-change deploy, destroy) never asks for.

    def _zone(self, state: State) -> str:
        zone = state.get("zone") or self.provider.zone
        if not zone:
            raise ApiError("google_tpu_v2_vm: no zone: set zone or the provider's zone")
        return str(zone)

    def _parent(self, state: State) -> str:
        return f"projects/{self.project(state)}/locations/{self._zone(state)}"

    def _body(self, planned: State) -> dict[str, Any]:
        body: dict[str, Any] = {
            "acceleratorType": planned.get("accelerator_type") or "v2-8",
            "runtimeVersion": planned["runtime_version"],
            "labels": self.labels(planned),
            "metadata": planned.get("metadata") or {},
            "tags": planned.get("tags") or [],
        }
        if planned.get("description"):
            body["description"] = planned["description"]
        for block, key in (
            ("network_config", "networkConfig"),
            ("scheduling_config", "schedulingConfig"),
            ("shielded_instance_config", "shieldedInstanceConfig"),
            ("accelerator_config", "acceleratorConfig"),
        ):
            value = _block(planned, block)
            if value:
                body[key] = _camel(value)
        account = _block(planned, "service_account")
        if account:
            body["serviceAccount"] = {"email": account.get("email"), "scope": account.get("scope")}
        return body

    def _computed(self, node: Mapping[str, Any], state: State) -> State:
        labels = self.labels(state)
        endpoints = [
            {
                "ip_address": e.get("ipAddress"),
                "port": e.get("port"),
                "access_config": (
                    [{"external_ip": e["accessConfig"]["externalIp"]}]
                    if e.get("accessConfig")
                    else []
                ),
            }
            for e in node.get("networkEndpoints") or []
        ]
        return {
            "id": node["name"],
            "project": self.project(state),
            "zone": self._zone(state),
            "accelerator_type": node.get("acceleratorType"),
            "api_version": node.get("apiVersion"),
            "cidr_block": node.get("cidrBlock"),
            "state": node.get("state"),
            "health": node.get("health"),
            "health_description": node.get("healthDescription"),
            "network_endpoints": endpoints,
            "effective_labels": labels,
            "terraform_labels": labels,
            "multislice_node": bool(node.get("multisliceNode")),
            "queued_resource": node.get("queuedResource"),
            "symptoms": [],
        }

    def create(self, planned: State) -> State:
        parent = self._parent(planned)
        self.client.call(
            "POST", f"/v2/{parent}/nodes", self._body(planned), query={"nodeId": planned["name"]}
        )
        node = self._wait_ready(f"{parent}/nodes/{planned['name']}")
        return self._computed(node, planned)

    def _wait_ready(self, name: str) -> dict[str, Any]:
        for _ in range(60):
            node = self.client.call("GET", f"/v2/{name}") or {}
            if node.get("state") == "READY":
                return node
            time.sleep(0.5)
        raise ApiError(f"node {name} did not become READY")

    def read(self, state: State) -> State | None:
        node = self.client.call(
            "GET", f"/v2/{self._parent(state)}/nodes/{state['name']}", missing_ok=True
        )
        return self._computed(node, state) if node else None

    def delete(self, state: State) -> None:
        name = f"{self._parent(state)}/nodes/{state['name']}"
        self.client.call("DELETE", f"/v2/{name}", missing_ok=True)
        for _ in range(60):
            if self.client.call("GET", f"/v2/{name}", missing_ok=True) is None:
                return
            time.sleep(0.5)
        raise ApiError(f"node {name} was not deleted")


RESOURCES: dict[str, type[Resource]] = {
    cls.type_name: cls
    for cls in (
        ProjectService,
        ServiceAccount,
        SecretManagerSecret,
        SecretManagerSecretIamMember,
        StorageBucket,
        StorageBucketIamMember,
        ComputeFirewall,
        TpuV2Vm,
    )
}
