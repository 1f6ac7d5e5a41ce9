"""create / delete / status of one queued resource: waits, idempotency and clean-up."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TextIO, TypeVar

from tpudeploy.gcp.api_errors import ApiError, Interrupted, QueuedResourceError
from tpudeploy.gcp.tpu import TpuApi
from tpudeploy.timefmt import format_seconds
from tpudeploy.tpuvm.queued_resource.hints import force_delete_argv, hint_for, with_hint
from tpudeploy.tpuvm.queued_resource.spec import QueuedResourceSpec, spec_differences
from tpudeploy.tpuvm.queued_resource.states import (
    DEAD_STATES,
    STATE_NOTES,
    failure_reason,
    node_ips,
    state_of,
)

_T = TypeVar("_T")

DEFAULT_CREATE_TIMEOUT = 3600.0
DEFAULT_DELETE_TIMEOUT = 1800.0
DEFAULT_POLL = 15.0
# How long a failed create may spend deleting what it requested (a QR in PROVISIONING cannot be
# deleted until it leaves that state, seed).
DEFAULT_CLEANUP_TIMEOUT = 900.0


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
            raise with_hint(exc, self.spec) from None

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
            fresh = getattr(self.api, "fresh_connection", None)
            if fresh is not None:
                fresh()
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
        if existing is not None and state_of(existing) not in DEAD_STATES:
            self._require_same_spec(existing)
        if existing is not None:
            state = state_of(existing)
            if state in DEAD_STATES:
                reason = failure_reason(existing)
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
                    raise with_hint(exc, spec) from None
                again = self._call(partial(self.api.get_queued_resource, spec.name))
                if again is None:
                    raise with_hint(exc, spec) from None
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
                state = state_of(qr)
            if state != last_state or now - last_line >= self.heartbeat:
                note = f" - {STATE_NOTES[state]}" if state in STATE_NOTES else ""
                self._say(f"{state}{note} (elapsed {format_seconds(now - start)})")
                last_state, last_line = state, now
            if qr is not None and state == "ACTIVE":
                termination = (qr.get("runDuration") or {}).get("terminationTime")
                if termination:
                    self._say(f"flex-start run duration ends (billing stops) at {termination}")
                self._report_node()
                return qr
            if qr is not None and state in DEAD_STATES:
                reason = failure_reason(qr) or "no reason given by the API"
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
                    f"timed out after {format_seconds(now - start)} (timeout {timeout:g} s) "
                    f"waiting for {spec.name} to become ACTIVE; last state {state}. No capacity "
                    "came in time: raise flex_start_timeout or try another time"
                )
            time.sleep(self.poll)

    def _report_node(self) -> None:
        try:
            node = self.api.get_node(self.spec.node_name)
        except ApiError:
            return
        if node:
            internal, external = node_ips(node)
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
                self._say(f"deleted (elapsed {format_seconds(now - start)})")
                return
            state = state_of(qr)
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
                        raise with_hint(exc, spec) from None
                    self._say(
                        f"cannot delete yet in {state} ({exc.api_message}); the build log: a "
                        f"queued resource in PROVISIONING cannot be deleted. Retrying (elapsed "
                        f"{format_seconds(now - start)})"
                    )
                    last_line_state = f"refused-{state}"
                else:
                    if op is None:
                        self._say(f"deleted (elapsed {format_seconds(now - start)})")
                        return
                    self._say(f"delete requested (force=true) in state {state}")
                    operation = op.get("name")
                    need_delete = False
                    continue  # look once right away: a fast delete needs no poll interval
            elif state != last_line_state:
                self._say(f"{state} (elapsed {format_seconds(now - start)})")
                last_line_state = state
            if now - start + self.poll > timeout:
                raise QueuedResourceError(
                    f"timed out after {format_seconds(now - start)} (timeout {timeout:g} s) "
                    f"waiting for {spec.name} to be deleted; last state {state}. It may still "
                    f"bill: run destroy again, or `{shlex.join(force_delete_argv(spec))}`"
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
        internal, external = node_ips(node) if node else (None, None)
        run = (qr or {}).get("runDuration") or {}
        termination = run.get("terminationTime") or (
            ((node or {}).get("schedulingConfig") or {}).get("terminationTimestamp")
        )
        return {
            "queued_resource": spec.name,
            "queued_resource_state": state_of(qr) if qr is not None else "NOT_FOUND",
            "failure_reason": failure_reason(qr) if qr is not None else "",
            "provisioning_model": (qr or {}).get("provisioningModel"),
            "max_run_duration": run.get("maxRunDuration"),
            "termination_time": termination,
            "node": spec.node_name,
            "node_state": node.get("state", "UNKNOWN") if node is not None else "NOT_FOUND",
            "node_health": (node or {}).get("health"),
            "internal_ip": internal,
            "external_ip": external,
            "node_labels": dict((node or {}).get("labels") or {}),
        }


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
        else "no termination time reported yet (set when the queued resource becomes ACTIVE)"
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
