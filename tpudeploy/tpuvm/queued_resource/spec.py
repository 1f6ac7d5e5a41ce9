"""The flex-start QueuedResource request: its validated spec, exact JSON body and drift check."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tpudeploy import names
from tpudeploy.durations import MAX_DURATION_SECONDS

DEFAULT_SCOPES = (names.CLOUD_PLATFORM_SCOPE,)
# Label on the node carrying a hash of the whole request: lets a re-create tell "same spec"
# from "changed spec" even when the API does not echo every field (metadata) back.
SPEC_LABEL = "tpudeploy-spec"

_NODE_ID_RE = names.GCE_NAME_RE
_QR_ID_RE = names.QUEUED_RESOURCE_ID_RE
_LABEL_KEY_RE = names.LABEL_KEY_RE
_LABEL_VALUE_RE = names.LABEL_VALUE_RE
_PROJECT_RE = names.PROJECT_ID_RE
_ZONE_RE = names.ZONE_RE


def _fail(key: str, value: object, fix: str) -> ValueError:
    return ValueError(f"queued resource spec: {key}={value!r}: {fix}")


@dataclass(frozen=True)
class QueuedResourceSpec:
    """Everything the flex-start QueuedResource request carries."""

    project: str
    zone: str
    queued_resource_id: str
    node_id: str
    accelerator_type: str
    runtime_version: str
    startup_script: str
    service_account_email: str
    network: str
    max_run_duration_seconds: int
    metadata: Mapping[str, str] = field(default_factory=dict)
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    subnetwork: str | None = None
    enable_external_ips: bool = True
    tags: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    enable_secure_boot: bool = True

    def __post_init__(self) -> None:
        # Normalise containers so the frozen object is hashable-ish and immutable in practice.
        object.__setattr__(self, "metadata", dict(self.metadata))
        object.__setattr__(self, "labels", dict(self.labels))
        object.__setattr__(self, "scopes", tuple(self.scopes))
        object.__setattr__(self, "tags", tuple(self.tags))
        self._validate()

    def _validate(self) -> None:
        for key in (
            "project",
            "zone",
            "queued_resource_id",
            "node_id",
            "accelerator_type",
            "runtime_version",
            "startup_script",
            "service_account_email",
            "network",
        ):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise _fail(key, value, "must be a non-empty string")
        if not _PROJECT_RE.fullmatch(self.project):
            raise _fail("project", self.project, "must be a Google Cloud project id")
        if not _ZONE_RE.fullmatch(self.zone):
            raise _fail("zone", self.zone, "must be a zone such as 'us-west4-a'")
        if not _QR_ID_RE.fullmatch(self.queued_resource_id):
            raise _fail("queued_resource_id", self.queued_resource_id, "use [A-Za-z0-9_.~+%-]")
        if not _NODE_ID_RE.fullmatch(self.node_id):
            raise _fail(
                "node_id",
                self.node_id,
                "use lowercase letters, digits and '-', start with a letter",
            )
        if "@" not in self.service_account_email:
            raise _fail("service_account_email", self.service_account_email, "must be an email")
        mrd = self.max_run_duration_seconds
        if isinstance(mrd, bool) or not isinstance(mrd, int):
            raise _fail("max_run_duration_seconds", mrd, "must be an integer number of seconds")
        if not 0 < mrd <= MAX_DURATION_SECONDS:
            raise _fail(
                "max_run_duration_seconds",
                mrd,
                f"must be between 1 and {MAX_DURATION_SECONDS} (7 days, flex-start's maximum)",
            )
        if self.subnetwork is not None and (
            not isinstance(self.subnetwork, str) or not self.subnetwork.strip()
        ):
            raise _fail("subnetwork", self.subnetwork, "must be a non-empty string or null")
        for key in ("enable_external_ips", "enable_secure_boot"):
            if not isinstance(getattr(self, key), bool):
                raise _fail(key, getattr(self, key), "must be true or false")
        if not isinstance(self.description, str):
            raise _fail("description", self.description, "must be a string")
        for key in ("metadata", "labels"):
            mapping = getattr(self, key)
            for k, v in mapping.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise _fail(f"{key}[{k!r}]", v, "keys and values must be strings")
        if "startup-script" in self.metadata:
            raise _fail(
                "metadata['startup-script']", "...", "set it through startup_script, not metadata"
            )
        for k, v in self.labels.items():
            if not _LABEL_KEY_RE.fullmatch(k) or k == SPEC_LABEL:
                raise _fail(
                    f"labels[{k!r}]", k, f"key must be lowercase [a-z0-9_-], not '{SPEC_LABEL}'"
                )
            if not _LABEL_VALUE_RE.fullmatch(v):
                raise _fail(f"labels[{k!r}]", v, "value must be at most 63 of [a-z0-9_-]")
        for key in ("scopes", "tags"):
            for item in getattr(self, key):
                if not isinstance(item, str) or not item:
                    raise _fail(key, item, "items must be non-empty strings")
        if not self.scopes:
            raise _fail("scopes", [], f"give at least one scope, e.g. {DEFAULT_SCOPES[0]}")

    # ---- names

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.zone}"

    @property
    def name(self) -> str:
        return f"{self.parent}/queuedResources/{self.queued_resource_id}"

    @property
    def node_name(self) -> str:
        return f"{self.parent}/nodes/{self.node_id}"

    # ---- request body

    def _node(self) -> dict[str, Any]:
        network_config: dict[str, Any] = {"network": self.network}
        if self.subnetwork is not None:
            network_config["subnetwork"] = self.subnetwork
        network_config["enableExternalIps"] = self.enable_external_ips
        node: dict[str, Any] = {
            "acceleratorType": self.accelerator_type,
            "runtimeVersion": self.runtime_version,
            "metadata": {**self.metadata, "startup-script": self.startup_script},
            "serviceAccount": {"email": self.service_account_email, "scope": list(self.scopes)},
            "networkConfig": network_config,
        }
        if self.description:
            node["description"] = self.description
        node["shieldedInstanceConfig"] = {"enableSecureBoot": self.enable_secure_boot}
        if self.tags:
            node["tags"] = list(self.tags)
        if self.labels:
            node["labels"] = dict(self.labels)
        return node

    def _body_without_fingerprint(self) -> dict[str, Any]:
        # provisioningModel and runDuration are top-level QueuedResource fields in v2alpha1
        # (rev 20261001). No spot/guaranteed/bestEffort tier and no node schedulingConfig:
        # FLEX_START is the whole provisioning story.
        return {
            "provisioningModel": "FLEX_START",
            "runDuration": {"maxRunDuration": f"{self.max_run_duration_seconds}s"},
            "tpu": {
                "nodeSpec": [{"parent": self.parent, "nodeId": self.node_id, "node": self._node()}]
            },
        }

    def fingerprint(self) -> str:
        canonical = json.dumps(self._body_without_fingerprint(), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def to_body(self) -> dict[str, Any]:
        """Return the exact QueuedResource JSON sent to queuedResources.create."""
        body = self._body_without_fingerprint()
        node = body["tpu"]["nodeSpec"][0]["node"]
        node["labels"] = {**node.get("labels", {}), SPEC_LABEL: self.fingerprint()}
        return body

    # ---- JSON

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["scopes"] = list(self.scopes)
        data["tags"] = list(self.tags)
        data["metadata"] = dict(self.metadata)
        data["labels"] = dict(self.labels)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: object) -> QueuedResourceSpec:
        if not isinstance(data, dict):
            raise ValueError(f"queued resource spec: expected a JSON object, got {data!r:.60}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"queued resource spec: unknown key(s) {unknown}; allowed: {sorted(known)}"
            )
        required = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        missing = sorted(required - set(data))
        if missing:
            raise ValueError(f"queued resource spec: missing required key(s) {missing}")
        kwargs = dict(data)
        for key in ("metadata", "labels"):
            if key in kwargs and not isinstance(kwargs[key], dict):
                raise _fail(key, kwargs[key], "must be a JSON object of strings")
        for key in ("scopes", "tags"):
            if key in kwargs:
                if not isinstance(kwargs[key], list):
                    raise _fail(key, kwargs[key], "must be a JSON list of strings")
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)

    @classmethod
    def from_json(cls, text: str) -> QueuedResourceSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"queued resource spec: not valid JSON ({exc})") from None
        return cls.from_dict(data)


def _duration_seconds(value: object) -> float | None:
    if not isinstance(value, str) or not value.endswith("s"):
        return None
    try:
        return float(value[:-1])
    except ValueError:
        return None


def spec_differences(spec: QueuedResourceSpec, existing: Mapping[str, Any]) -> list[str]:
    """Fields of `existing` that contradict `spec` (fields the API omits count as unknown)."""
    want = spec.to_body()
    diffs: list[str] = []

    def check(path: str, have: object, wanted: object) -> None:
        if have is None or have == wanted:
            return
        if isinstance(have, dict) and isinstance(wanted, dict):
            # Name the keys only: values (the startup script) are long and belong in review.
            keys = sorted(k for k in set(have) | set(wanted) if have.get(k) != wanted.get(k))
            diffs.append(f"{path}: keys {keys} differ")
        else:
            diffs.append(f"{path}: existing {have!r:.80}, wanted {wanted!r:.80}")

    check("provisioningModel", existing.get("provisioningModel"), want["provisioningModel"])
    have_mrd = (existing.get("runDuration") or {}).get("maxRunDuration")
    if have_mrd is not None and _duration_seconds(have_mrd) != spec.max_run_duration_seconds:
        diffs.append(
            f"runDuration.maxRunDuration: existing {have_mrd!r}, "
            f"wanted {want['runDuration']['maxRunDuration']!r}"
        )
    node_specs = (existing.get("tpu") or {}).get("nodeSpec") or []
    if not node_specs:
        return diffs
    have_spec = node_specs[0]
    want_spec = want["tpu"]["nodeSpec"][0]
    check("nodeId", have_spec.get("nodeId"), want_spec["nodeId"])
    have_node = have_spec.get("node") or {}
    want_node = want_spec["node"]
    for key in ("acceleratorType", "runtimeVersion", "metadata", "tags"):
        check(f"node.{key}", have_node.get(key), want_node.get(key))
    have_sa = (have_node.get("serviceAccount") or {}).get("email")
    check("node.serviceAccount.email", have_sa, spec.service_account_email)
    have_labels = have_node.get("labels")
    if have_labels is not None:
        check(f"node.labels[{SPEC_LABEL}]", have_labels.get(SPEC_LABEL), spec.fingerprint())
    return diffs
