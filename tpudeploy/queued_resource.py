"""Create, wait for, delete and inspect a flex-start TPU QueuedResource through the v2alpha1 API."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TextIO, TypeVar

from tpudeploy import names
from tpudeploy.durations import MAX_DURATION_SECONDS
from tpudeploy.facts import flex_start_zones_text

_T = TypeVar("_T")

SPEC_ENV = "TPUDEPLOY_QR_SPEC"
EMULATOR_ENV = "TPU_EMULATOR_HOST"
DEFAULT_SCOPES = (names.CLOUD_PLATFORM_SCOPE,)
DEFAULT_CREATE_TIMEOUT = 3600.0
DEFAULT_DELETE_TIMEOUT = 1800.0
DEFAULT_POLL = 15.0
# How long a failed create may spend deleting what it requested (a QR in PROVISIONING cannot be
# deleted until it leaves that state, seed).
DEFAULT_CLEANUP_TIMEOUT = 900.0
# Seconds between polls, for every command (the rehearsal and tests poll faster).
POLL_ENV = "TPUDEPLOY_QR_POLL_SECONDS"
# Label on the node carrying a hash of the whole request: lets a re-create tell "same spec"
# from "changed spec" even when the API does not echo every field (metadata) back.
SPEC_LABEL = "tpudeploy-spec"

# A QR in these states is on its way (or there): create leaves it alone and waits.
WAITING_STATES = frozenset(
    {"STATE_UNSPECIFIED", "CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING"}
)
# Flex-start run duration over, or capacity lost: the QR holds quota until deleted.
DEAD_STATES = frozenset({"SUSPENDED", "SUSPENDING", "FAILED"})

_STATE_NOTES = {
    "WAITING_FOR_RESOURCES": "queued, waiting for capacity (not an error)",
    "ACCEPTED": "accepted into the queue",
    "CREATING": "request received",
    "PROVISIONING": "capacity found, creating the TPU VM (billing starts; cannot be deleted now)",
    "ACTIVE": "TPU VM is up",
    "DELETING": "being deleted",
    "SUSPENDING": "run duration over or capacity lost; VM being deleted",
    "SUSPENDED": "run duration over or capacity lost; VM deleted, quota still held",
    "FAILED": "failed",
}

_NODE_ID_RE = names.GCE_NAME_RE
_QR_ID_RE = names.QUEUED_RESOURCE_ID_RE
_LABEL_KEY_RE = names.LABEL_KEY_RE
_LABEL_VALUE_RE = names.LABEL_VALUE_RE
_PROJECT_RE = names.PROJECT_ID_RE
_ZONE_RE = names.ZONE_RE


class QueuedResourceError(Exception):
    """A failure with a message meant for the user, printed as-is by the CLI."""


class Interrupted(BaseException):
    """SIGTERM or SIGHUP (a CI job's timeout, a closed terminal): unwinds like Ctrl-C so a
    failed create can still delete what it requested."""


# --------------------------------------------------------------------------- spec


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


# --------------------------------------------------------------------------- API access


class ApiError(QueuedResourceError):
    """An HTTP error from the TPU API that retries did not cure."""

    def __init__(self, status: int, message: str, action: str) -> None:
        self.status = status
        self.api_message = message
        self.action = action
        super().__init__(f"TPU API {action} failed (HTTP {status}): {message}")


def _http_error_message(exc: Any) -> str:
    try:
        payload = json.loads(exc.content.decode("utf-8", "replace"))
        message = payload["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    reason = getattr(exc, "reason", None)
    return str(reason or exc)


def build_service(*, http_timeout: float = 60.0) -> Any:
    """Build the v2alpha1 discovery client: emulator with anonymous creds, else ADC."""
    import google.auth
    import google.auth.credentials
    import google_auth_httplib2  # type: ignore[import-untyped]
    import httplib2  # type: ignore[import-untyped]
    from google.auth.exceptions import DefaultCredentialsError
    from googleapiclient import discovery, discovery_cache

    document = discovery_cache.get_static_doc("tpu", "v2alpha1")
    if document is None:
        raise QueuedResourceError(
            "the TPU v2alpha1 discovery document is missing from google-api-python-client; "
            "reinstall the pinned requirements (make install)"
        )
    emulator = os.environ.get(EMULATOR_ENV, "").strip()
    credentials: Any
    if emulator:
        # Same convention as PUBSUB_EMULATOR_HOST: plain HTTP to host:port, no credentials.
        credentials = google.auth.credentials.AnonymousCredentials()  # type: ignore[no-untyped-call]
        endpoint = f"http://{emulator.rstrip('/')}/"
    else:
        try:
            credentials, _ = google.auth.default(scopes=[names.CLOUD_PLATFORM_SCOPE])
        except DefaultCredentialsError as exc:
            raise QueuedResourceError(
                f"no Google Cloud credentials ({exc}); run "
                "`gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS"
            ) from None
        endpoint = None
    http = google_auth_httplib2.AuthorizedHttp(
        credentials, http=httplib2.Http(timeout=http_timeout)
    )
    options = {"api_endpoint": endpoint} if endpoint else None
    return discovery.build_from_document(document, http=http, client_options=options)


class TpuApi:
    """The handful of v2alpha1 calls this module needs, with 429/5xx retries."""

    def __init__(
        self,
        service: Any = None,
        *,
        retry_attempts: int = 6,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 32.0,
        sleep: Callable[[float], None] = time.sleep,
        log: TextIO | None = None,
    ) -> None:
        self._service = service if service is not None else build_service()
        self._attempts = max(1, retry_attempts)
        self._base = retry_base_delay
        self._max = retry_max_delay
        self._sleep = sleep
        self._log = log if log is not None else sys.stderr

    def _locations(self) -> Any:
        return self._service.projects().locations()

    def _execute(self, request: Any, action: str, *, allow_404: bool = False) -> Any:
        from googleapiclient.errors import HttpError

        last = ""
        for attempt in range(self._attempts):
            try:
                return request.execute(num_retries=0)
            except HttpError as exc:
                status = int(exc.resp.status)
                message = _http_error_message(exc)
                if status == 404 and allow_404:
                    return None
                if status != 429 and status < 500:
                    raise ApiError(status, message, action) from None
                last = f"HTTP {status}: {message}"
            except OSError as exc:  # connection refused/reset, TimeoutError
                last = f"network error: {exc}"
            if attempt + 1 < self._attempts:
                delay = min(self._max, self._base * 2**attempt) * (1 + random.random() / 2)  # noqa: S311
                print(
                    f"tpudeploy: {action}: {last}; retry {attempt + 1}/{self._attempts - 1} "
                    f"in {delay:.1f} s",
                    file=self._log,
                    flush=True,
                )
                self._sleep(delay)
        status = int(last.split()[1].rstrip(":")) if last.startswith("HTTP ") else 0
        raise ApiError(status, f"{last} (gave up after {self._attempts} attempts)", action)

    def get_queued_resource(self, name: str) -> dict[str, Any] | None:
        req = self._locations().queuedResources().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get queued resource", allow_404=True)
        return result

    def create_queued_resource(
        self, parent: str, queued_resource_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        req = (
            self._locations()
            .queuedResources()
            .create(parent=parent, queuedResourceId=queued_resource_id, body=body)
        )
        result: dict[str, Any] = self._execute(req, "create queued resource")
        return result

    def delete_queued_resource(self, name: str) -> dict[str, Any] | None:
        # force=true deletes the QR's node with it (otherwise an ACTIVE QR refuses deletion).
        req = self._locations().queuedResources().delete(name=name, force=True)
        result: dict[str, Any] | None = self._execute(req, "delete queued resource", allow_404=True)
        return result

    def get_node(self, name: str) -> dict[str, Any] | None:
        req = self._locations().nodes().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get node", allow_404=True)
        return result

    def get_operation(self, name: str) -> dict[str, Any] | None:
        req = self._locations().operations().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get operation", allow_404=True)
        return result


# --------------------------------------------------------------------------- hints


def hint_for(status: int, message: str, spec: QueuedResourceSpec | None = None) -> str:
    """Return what the user should do about an API error."""
    lower = message.lower()
    project = spec.project if spec else "PROJECT"
    if "quota" in lower:
        return (
            "quota: check TPU v5 lite pod quota in this zone "
            "(IAM & Admin > Quotas), request more, or delete SUSPENDED/FAILED queued resources "
            "that still hold it"
        )
    if status == 403:
        return (
            f"permissions or API disabled: run `gcloud services enable tpu.googleapis.com "
            f"--project={project}` and grant the caller roles/tpu.admin (plus "
            "roles/iam.serviceAccountUser on the node's service account)"
        )
    if status == 401:
        return "credentials rejected: run `gcloud auth application-default login`"
    if status == 400 and any(
        word in lower for word in ("flex_start", "flex-start", "provisioning model", "accelerator")
    ):
        zone = spec.zone if spec else "this zone"
        accelerator = spec.accelerator_type if spec else "v5litepod-1"
        known = flex_start_zones_text(accelerator) or "none recorded"
        return (
            f"zone rule: {zone} refused flex-start {accelerator} (europe-west4-a/-b refuse "
            f"v5litepod-1 whatever the quota). Known to accept it: {known}. Set zone to one "
            "of those, or pick spot/on-demand"
        )
    if status == 409:
        return (
            "already exists or an operation is in progress: wait and run `status`, "
            "or run destroy first"
        )
    if status == 404:
        return "not found: check project and zone, and that tpu.googleapis.com is enabled"
    if status == 429 or status >= 500:
        return "the TPU API kept failing; try again in a few minutes"
    return "check the spec values named in the message"


def _with_hint(exc: ApiError, spec: QueuedResourceSpec | None) -> QueuedResourceError:
    return QueuedResourceError(f"{exc}. What to do: {hint_for(exc.status, exc.api_message, spec)}")


# --------------------------------------------------------------------------- helpers


def _state(qr: Mapping[str, Any]) -> str:
    state = qr.get("state") or {}
    value = state.get("state") if isinstance(state, Mapping) else None
    return str(value or "STATE_UNSPECIFIED")


def _failure_reason(qr: Mapping[str, Any]) -> str:
    state = qr.get("state") or {}
    if not isinstance(state, Mapping):
        return ""
    parts = []
    error = (state.get("failedData") or {}).get("error") or {}
    if error.get("message"):
        parts.append(str(error["message"]))
    if state.get("stateInitiator"):
        parts.append(f"initiated by {state['stateInitiator']}")
    return "; ".join(parts)


def _elapsed(seconds: float) -> str:
    total = int(seconds)
    return f"{total // 3600}:{total // 60 % 60:02d}:{total % 60:02d}"


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


# --------------------------------------------------------------------------- operations


class QueuedResourceClient:
    """create / delete / status for one spec, printing progress to `out`."""

    def __init__(
        self,
        spec: QueuedResourceSpec,
        *,
        api: TpuApi | None = None,
        poll: float = DEFAULT_POLL,
        heartbeat: float = 60.0,
        out: TextIO | None = None,
    ) -> None:
        self.spec = spec
        self.out = out if out is not None else sys.stderr
        self.api = api if api is not None else TpuApi(log=self.out)
        self.poll = poll
        self.heartbeat = heartbeat
        self._owned = False

    def _say(self, text: str) -> None:
        print(
            f"tpudeploy: queued resource {self.spec.queued_resource_id}: {text}",
            file=self.out,
            flush=True,
        )

    def _call(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except ApiError as exc:
            raise _with_hint(exc, self.spec) from None

    # ---- create

    def create(
        self,
        *,
        timeout: float = DEFAULT_CREATE_TIMEOUT,
        clean_up: bool = True,
        clean_up_timeout: float = DEFAULT_CLEANUP_TIMEOUT,
    ) -> dict[str, Any]:
        """Make sure the QR exists with this spec and is ACTIVE; return it.

        When it fails after a queued resource was requested (or adopted) for this spec, the QR
        is deleted before the error propagates: Terraform taints a resource whose create
        provisioner failed and never runs the destroy provisioner of a tainted resource, so
        nothing else would ever delete it, and a QR that later turns ACTIVE bills for its whole
        run duration. A process that is killed outright cannot clean up; `make destroy` then
        deletes the deployment's QR whatever Terraform's state says.
        """
        self._owned = False
        try:
            return self._create(timeout)
        except BaseException as exc:
            if clean_up and self._owned:
                self._clean_up_after(exc, clean_up_timeout)
            raise

    def _clean_up_after(self, exc: BaseException, timeout: float) -> None:
        why = "interrupted" if isinstance(exc, (KeyboardInterrupt, Interrupted)) else "failed"
        self._say(f"create {why}; deleting the queued resource it requested so nothing bills")
        try:
            self.delete(timeout=timeout)
        except BaseException as again:  # a second Ctrl-C, a timeout, an API error
            detail = str(again) or type(again).__name__
            self._say(
                f"could NOT delete it ({detail}); it may bill once it turns ACTIVE. Run `make "
                "destroy` (it deletes this deployment's queued resource whatever Terraform's "
                "state says) and check with `make status`"
            )
        else:
            self._say("nothing of this create is left queued; fix the cause and deploy again")

    def _create(self, timeout: float) -> dict[str, Any]:
        spec = self.spec
        start = time.monotonic()
        existing = self._call(partial(self.api.get_queued_resource, spec.name))
        operation: str | None = None
        if existing is not None and _state(existing) not in DEAD_STATES:
            self._require_same_spec(existing)
        if existing is not None:
            state = _state(existing)
            if state in DEAD_STATES:
                reason = _failure_reason(existing)
                self._say(
                    f"exists in {state}{f' ({reason})' if reason else ''}; it holds quota, "
                    "deleting it and creating it again"
                )
                self.delete(timeout=max(1.0, timeout - (time.monotonic() - start)))
                existing = None
            elif state == "DELETING":
                self._say("exists and is being deleted; waiting until it is gone")
                self._wait_gone(start, timeout)
                existing = None
            else:
                self._say(f"already exists in {state} with this spec; not creating, waiting")
                # Adopted: from here on this create answers for it (see create()).
                self._owned = True
        if existing is None:
            self._say(
                f"creating in {spec.zone}: {spec.accelerator_type}, FLEX_START, "
                f"max run {spec.max_run_duration_seconds} s"
            )
            # Owned from the moment the request may have landed: an error after the POST (or a
            # kill during it) can still leave a queued resource behind.
            self._owned = True
            try:
                op = self.api.create_queued_resource(
                    spec.parent, spec.queued_resource_id, spec.to_body()
                )
            except ApiError as exc:
                # A create retried after a 5xx may have landed the first time.
                if exc.status != 409:
                    raise _with_hint(exc, spec) from None
                again = self._call(partial(self.api.get_queued_resource, spec.name))
                if again is None:
                    raise _with_hint(exc, spec) from None
                self._require_same_spec(again)
                self._say("create answered 409 but it exists with this spec; waiting")
            else:
                operation = op.get("name") if isinstance(op, dict) else None
                self._raise_if_operation_failed(op, "create")
        return self._wait_active(start, timeout, operation)

    def _require_same_spec(self, existing: Mapping[str, Any]) -> None:
        diffs = spec_differences(self.spec, existing)
        if diffs:
            raise QueuedResourceError(
                f"queued resource {self.spec.name} already exists with a DIFFERENT spec ("
                + "; ".join(diffs)
                + "). Run destroy first (make destroy), then deploy again."
            )

    def _raise_if_operation_failed(self, op: Mapping[str, Any] | None, verb: str) -> None:
        if op and op.get("done") and op.get("error"):
            error = op["error"]
            code = int(error.get("code") or 0)
            message = str(error.get("message") or error)
            # google.rpc codes: 7 PERMISSION_DENIED, 3 INVALID_ARGUMENT, 6 ALREADY_EXISTS, 8 quota.
            status = {3: 400, 7: 403, 6: 409, 8: 429, 9: 400}.get(code, 400)
            raise QueuedResourceError(
                f"TPU API {verb} operation failed: {message}. What to do: "
                + hint_for(status, message, self.spec)
            )

    def _wait_active(self, start: float, timeout: float, operation: str | None) -> dict[str, Any]:
        spec = self.spec
        last_state = ""
        last_line = 0.0
        while True:
            now = time.monotonic()
            qr = self._call(partial(self.api.get_queued_resource, spec.name))
            if qr is None:
                op = self._call(partial(self.api.get_operation, operation)) if operation else None
                self._raise_if_operation_failed(op, "create")
                if op is None or op.get("done"):
                    raise QueuedResourceError(
                        f"queued resource {spec.name} disappeared while waiting for ACTIVE "
                        "(deleted by someone else?); run deploy again"
                    )
                state = "CREATING"
            else:
                state = _state(qr)
            if state != last_state or now - last_line >= self.heartbeat:
                note = f" - {_STATE_NOTES[state]}" if state in _STATE_NOTES else ""
                self._say(f"{state}{note} (elapsed {_elapsed(now - start)})")
                last_state, last_line = state, now
            if qr is not None and state == "ACTIVE":
                termination = (qr.get("runDuration") or {}).get("terminationTime")
                if termination:
                    self._say(f"flex-start run duration ends (billing stops) at {termination}")
                self._report_node()
                return qr
            if qr is not None and state in DEAD_STATES:
                reason = _failure_reason(qr) or "no reason given by the API"
                raise QueuedResourceError(
                    f"queued resource {spec.name} went {state} while waiting: {reason}"
                )
            if state == "DELETING":
                raise QueuedResourceError(
                    f"queued resource {spec.name} is being deleted while waiting for ACTIVE; "
                    "run deploy again once it is gone"
                )
            if now - start + self.poll > timeout:
                raise QueuedResourceError(
                    f"timed out after {_elapsed(now - start)} (timeout {timeout:g} s) waiting for "
                    f"{spec.name} to become ACTIVE; last state {state}. No capacity came in "
                    "time: raise flex_start_timeout or try another time"
                )
            time.sleep(self.poll)

    def _report_node(self) -> None:
        try:
            node = self.api.get_node(self.spec.node_name)
        except ApiError:
            return
        if node:
            internal, external = _node_ips(node)
            self._say(
                f"node {self.spec.node_id} {node.get('state', '?')}, "
                f"external IP {external or '-'}, internal IP {internal or '-'}"
            )

    # ---- delete

    def delete(self, *, timeout: float = DEFAULT_DELETE_TIMEOUT) -> None:
        """Delete the QR (and its node, force=true) and wait until GET answers 404."""
        spec = self.spec
        start = time.monotonic()
        operation: str | None = None
        need_delete = True
        last_line_state = ""
        while True:
            now = time.monotonic()
            qr = self._call(partial(self.api.get_queued_resource, spec.name))
            if qr is None:
                self._say(f"deleted (elapsed {_elapsed(now - start)})")
                return
            state = _state(qr)
            if operation is not None:
                op = self._call(partial(self.api.get_operation, operation))
                if op is None or op.get("done"):
                    if op and op.get("error") and state != "DELETING":
                        self._say(
                            f"delete operation failed: {op['error'].get('message')}; retrying"
                        )
                    operation = None
                    need_delete = state != "DELETING"
            if need_delete and state != "DELETING":
                try:
                    op = self.api.delete_queued_resource(spec.name)
                except ApiError as exc:
                    if not _delete_can_wait(exc, state):
                        raise _with_hint(exc, spec) from None
                    self._say(
                        f"cannot delete yet in {state} ({exc.api_message}); the seed: a QR in "
                        f"PROVISIONING cannot be deleted. Retrying (elapsed "
                        f"{_elapsed(now - start)})"
                    )
                    last_line_state = f"refused-{state}"
                else:
                    if op is None:
                        self._say(f"deleted (elapsed {_elapsed(now - start)})")
                        return
                    self._say(f"delete requested (force=true) in state {state}")
                    operation = op.get("name")
                    need_delete = False
                    continue  # look once right away: a fast delete needs no poll interval
            elif state != last_line_state:
                self._say(f"{state} (elapsed {_elapsed(now - start)})")
                last_line_state = state
            if now - start + self.poll > timeout:
                raise QueuedResourceError(
                    f"timed out after {_elapsed(now - start)} (timeout {timeout:g} s) waiting for "
                    f"{spec.name} to be deleted; last state {state}. It may still bill: run "
                    "destroy again, or `gcloud alpha compute tpus queued-resources delete "
                    f"{spec.queued_resource_id} --zone={spec.zone} --force`"
                )
            time.sleep(self.poll)

    def _wait_gone(self, start: float, timeout: float) -> None:
        while self._call(partial(self.api.get_queued_resource, self.spec.name)) is not None:
            if time.monotonic() - start + self.poll > timeout:
                raise QueuedResourceError(
                    f"timed out waiting for {self.spec.name} to finish deleting; try again later"
                )
            time.sleep(self.poll)

    # ---- status

    def status(self) -> dict[str, Any]:
        """Return QR state, node state and IPs, and when billing stops."""
        spec = self.spec
        qr = self._call(partial(self.api.get_queued_resource, spec.name))
        node = self._call(partial(self.api.get_node, spec.node_name))
        internal, external = _node_ips(node) if node else (None, None)
        run = (qr or {}).get("runDuration") or {}
        termination = run.get("terminationTime") or (
            ((node or {}).get("schedulingConfig") or {}).get("terminationTimestamp")
        )
        return {
            "queued_resource": spec.name,
            "queued_resource_state": _state(qr) if qr is not None else "NOT_FOUND",
            "failure_reason": _failure_reason(qr) if qr is not None else "",
            "provisioning_model": (qr or {}).get("provisioningModel"),
            "max_run_duration": run.get("maxRunDuration"),
            "termination_time": termination,
            "node": spec.node_name,
            "node_state": node.get("state", "UNKNOWN") if node is not None else "NOT_FOUND",
            "node_health": (node or {}).get("health"),
            "internal_ip": internal,
            "external_ip": external,
        }


def _node_ips(node: Mapping[str, Any]) -> tuple[str | None, str | None]:
    endpoints = node.get("networkEndpoints") or []
    if not endpoints:
        return None, None
    first = endpoints[0]
    return first.get("ipAddress"), (first.get("accessConfig") or {}).get("externalIp")


def _delete_can_wait(exc: ApiError, state: str) -> bool:
    """True when the API refused the delete only because of a transient state (PROVISIONING)."""
    if exc.status not in (400, 409, 412):
        return False
    lower = exc.api_message.lower()
    return state in ("PROVISIONING", "CREATING", "ACCEPTED") or any(
        word in lower for word in ("provisioning", "in progress", "cannot be deleted", "state")
    )


def format_status(info: Mapping[str, Any]) -> str:
    """Render a status() dict as one screen of text."""
    billing = (
        f"billing stops at {info['termination_time']} (flex-start run duration)"
        if info.get("termination_time")
        else "no termination time reported yet (set when the QR becomes ACTIVE)"
    )
    if info.get("queued_resource_state") == "NOT_FOUND":
        billing = "nothing is billing for this queued resource (it does not exist)"
    lines = [
        f"queued resource  {info['queued_resource']}",
        f"  state          {info['queued_resource_state']}"
        + (f" ({info['failure_reason']})" if info.get("failure_reason") else ""),
        f"  model          {info.get('provisioning_model') or '-'}, "
        f"max run {info.get('max_run_duration') or '-'}",
        f"node             {info['node']}",
        f"  state          {info['node_state']}"
        + (f", health {info['node_health']}" if info.get("node_health") else ""),
        f"  external IP    {info.get('external_ip') or '-'}",
        f"  internal IP    {info.get('internal_ip') or '-'}",
        f"billing          {billing}",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- module API


def create(
    spec: QueuedResourceSpec,
    *,
    timeout: float = DEFAULT_CREATE_TIMEOUT,
    poll: float = DEFAULT_POLL,
    api: TpuApi | None = None,
    out: TextIO | None = None,
) -> dict[str, Any]:
    """Create (idempotently) the flex-start QR and wait until ACTIVE; return the QR."""
    return QueuedResourceClient(spec, api=api, poll=poll, out=out).create(timeout=timeout)


def delete(
    spec: QueuedResourceSpec,
    *,
    timeout: float = DEFAULT_DELETE_TIMEOUT,
    poll: float = DEFAULT_POLL,
    api: TpuApi | None = None,
    out: TextIO | None = None,
) -> None:
    """Delete the QR with force=true and wait until it is gone; a missing QR is success."""
    QueuedResourceClient(spec, api=api, poll=poll, out=out).delete(timeout=timeout)


def status(
    spec: QueuedResourceSpec, *, api: TpuApi | None = None, out: TextIO | None = None
) -> dict[str, Any]:
    """Return the QR/node status dict (see QueuedResourceClient.status)."""
    return QueuedResourceClient(spec, api=api, out=out).status()


# --------------------------------------------------------------------------- CLI


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _load_spec(spec_file: str | None) -> QueuedResourceSpec:
    if spec_file:
        try:
            with open(spec_file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise QueuedResourceError(f"cannot read --spec-file {spec_file}: {exc}") from None
    else:
        text = os.environ.get(SPEC_ENV, "")
        if not text.strip():
            raise QueuedResourceError(
                f"no spec: set {SPEC_ENV} to the spec JSON (the Terraform provisioner does) "
                "or pass --spec-file PATH"
            )
    return QueuedResourceSpec.from_json(text)


def _raise_on_termination() -> None:
    def handler(signum: int, frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tpudeploy.queued_resource",
        description=f"Flex-start TPU queued resource; spec JSON from ${SPEC_ENV} or --spec-file.",
    )
    parser.add_argument("command", choices=("create", "delete", "status"))
    parser.add_argument("--spec-file", help="read the spec JSON from this file")
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        help=f"seconds to wait (create {DEFAULT_CREATE_TIMEOUT:g}, delete "
        f"{DEFAULT_DELETE_TIMEOUT:g})",
    )
    parser.add_argument(
        "--poll",
        type=_positive_float,
        default=_positive_float(os.environ.get(POLL_ENV) or str(DEFAULT_POLL)),
        help=f"seconds between polls (default {DEFAULT_POLL:g}, or ${POLL_ENV})",
    )
    args = parser.parse_args(argv)
    _raise_on_termination()
    try:
        spec = _load_spec(args.spec_file)
        client = QueuedResourceClient(spec, poll=args.poll)
        if args.command == "create":
            client.create(timeout=args.timeout or DEFAULT_CREATE_TIMEOUT)
        elif args.command == "delete":
            client.delete(timeout=args.timeout or DEFAULT_DELETE_TIMEOUT)
        else:
            print(format_status(client.status()))
    except (QueuedResourceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted):
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # last resort: the CLI promises no tracebacks
        print(f"error: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
