"""The rehearsal's per-client keys (issue 37): `make api-key` for every [access] client, then the
"keys" stage on the running TPU VM.

The stage starts a slow streamed chat completion through the node's front door (TLS, pinned to
the stored certificate, the first client's key) and, while it runs, rotates the first client's
key with the configured overlap (`make api-key CLIENT=default ROTATE=1`) and the second's with
none (`make api-key CLIENT=ci ROTATE=1 OVERLAP=0`, a leaked key). The node's key poller (a real
process here, every KEY_POLL_SECONDS) must bring each change to the running nginx within
PROPAGATION_BOUND_SECONDS: both of default's keys served, ci's new key served and its old one
refused (401), and the stream, started before both reloads, must end with 200 and
`data: [DONE]` (nginx reloads on HUP: the old worker finishes its requests).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

from tools.rehearsal.fake_vllm import STREAM_SECONDS_PER_TOKEN
from tools.rehearsal.sandbox import KEY_POLL_SECONDS, BootSandbox
from tools.rehearsal.scenarios import StageFailure, StageHost
from tools.rehearsal.scratch import REHEARSAL_PROJECT
from tpudeploy.endpoint import Endpoint, FrontDoorError, connect
from tpudeploy.node.keymap import KeyMapError, parse_payload

# A rotation reaches the front door within one poll period, the poller's fetch of every
# client's secret (curl, the metadata token) and nginx's reload; on a shared two-core machine
# that is well under this. On the node the period is 30 s (tpudeploy/render.py), so the same
# path is about 31 s there: inside issue 37's minute.
PROPAGATION_BOUND_SECONDS = 10.0
# The stream's length: long enough to outlive two `make api-key` runs (a few seconds each) and
# two propagations; fake_vllm.py sends one token every STREAM_SECONDS_PER_TOKEN.
STREAM_TOKENS = 75
REQUEST_TIMEOUT = 30.0


def current_keys(payloads: list[bytes]) -> list[str]:
    """The keys the latest version of a client's secret serves, current key first (what
    `make api-key` wrote: one line, or two after a rotation with an overlap)."""
    if not payloads:
        return []
    try:
        return [key for key, _ in parse_payload("rehearsal", payloads[-1].decode())]
    except (KeyMapError, UnicodeDecodeError) as exc:
        raise StageFailure(
            f"the latest key version is not what make api-key writes: {exc}"
        ) from None


@dataclass
class Stream:
    """One streamed chat completion through the front door, read in a thread of its own."""

    endpoint: Endpoint
    key: str
    model: str
    status: int = 0
    events: list[float] = field(default_factory=list)  # when each `data:` line arrived
    done: bool = False  # `data: [DONE]` arrived
    error: str = ""
    _thread: threading.Thread | None = None

    def start(self) -> Stream:
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Describe a lighthouse at night."}],
            "max_tokens": STREAM_TOKENS,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"}
        try:
            conn = connect(self.endpoint, timeout=REQUEST_TIMEOUT)
            try:
                conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
                response = conn.getresponse()
                self.status = response.status
                while line := response.readline():
                    if line.startswith(b"data: "):
                        self.events.append(time.monotonic())
                        self.done = line.strip() == b"data: [DONE]"
            finally:
                conn.close()
        except (OSError, FrontDoorError) as exc:
            self.error = str(exc)

    def wait(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class KeysStages(StageHost):
    """The api-key and keys stages the Rehearsal (tools/rehearsal/lifecycle.py) runs."""

    _api_keys: list[bytes]
    _sandbox: BootSandbox | None
    _tls_sha256: str

    def _client_payloads(self, client: str) -> list[bytes]:
        secret_id = self.cfg.client_key_secret_ids[client]
        payloads: list[bytes] = self.cloud.secretmanager.values(REHEARSAL_PROJECT, secret_id)
        return payloads

    def _remember_keys(self, client: str) -> list[str]:
        """The client's served keys now; each joins the values no file, log or state may hold."""
        keys = current_keys(self._client_payloads(client))
        self._api_keys += [k.encode() for k in keys if k.encode() not in self._api_keys]
        return keys

    def _api_key(self) -> str:
        """`make api-key` (the first client), then `make api-key CLIENT=name` for every other
        [access] client: the node's boot refuses a client whose secret has no key."""
        first, *others = self.cfg.access.clients
        shown = [self._make("api-key")]
        shown += [self._make("api-key", args=(f"CLIENT={c}",)) for c in others]
        for client in (first, *others):
            if not self._remember_keys(client):
                raise StageFailure(f"`{'`, `'.join(shown)}` stored no key for client {client}")
        return ", ".join(shown)

    def _status_with(self, endpoint: Endpoint, key: str) -> int:
        """The front door's status for a short chat completion with this key."""
        body = {
            "model": self.cfg.vllm.served_model_name,
            "messages": [{"role": "user", "content": "Say hi."}],
            "max_tokens": 8,
        }
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        try:
            conn = connect(endpoint, timeout=REQUEST_TIMEOUT)
        except FrontDoorError as exc:
            raise StageFailure(str(exc)) from None
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(body), headers)
            response = conn.getresponse()
            response.read()
            return response.status
        except OSError as exc:
            raise StageFailure(f"the front door dropped a request: {exc}") from None
        finally:
            conn.close()

    def _until_served(self, endpoint: Endpoint, key: str, since: float, what: str) -> float:
        """Seconds from `since` until the front door serves `key` (200), or StageFailure after
        PROPAGATION_BOUND_SECONDS. Only the new key is polled: until it is in the map its
        requests are 401 and count against no client's rate limit (the map changes at once)."""
        while True:
            status = self._status_with(endpoint, key)
            took = time.monotonic() - since
            if status == 200:
                return took
            if took > PROPAGATION_BOUND_SECONDS:
                raise StageFailure(
                    f"{what}: after {took:.1f} s (bound {PROPAGATION_BOUND_SECONDS:.0f} s, poll "
                    f"every {KEY_POLL_SECONDS} s) the front door still answers {status}; the key "
                    f"poller's log: {self._poller_log()}"
                )
            time.sleep(0.2)

    def _until_status(
        self, endpoint: Endpoint, key: str, wanted: int, since: float, what: str
    ) -> None:
        """`key` answered `wanted` within PROPAGATION_BOUND_SECONDS of `since`, else
        StageFailure naming the last status."""
        while True:
            status = self._status_with(endpoint, key)
            if status == wanted:
                return
            took = time.monotonic() - since
            if took > PROPAGATION_BOUND_SECONDS:
                raise StageFailure(
                    f"{what}: after {took:.1f} s (bound {PROPAGATION_BOUND_SECONDS:.0f} s) the "
                    f"front door still answers {status}, not {wanted}"
                )
            time.sleep(0.2)

    def _expect(self, endpoint: Endpoint, key: str, wanted: int, what: str) -> None:
        status = self._status_with(endpoint, key)
        if status != wanted:
            raise StageFailure(f"{what}: the front door answered {status}, not {wanted}")

    def _poller_log(self) -> str:
        if self._sandbox is None:
            return "no node"
        logs = sorted(self._sandbox.stub_dir.glob("unit-*.log"))
        return ", ".join(str(p) for p in logs) or "none: the poller never started"

    def _keys(self) -> str:
        clients = self.cfg.access.clients
        if len(clients) < 2 or self._sandbox is None:
            raise StageFailure(f"the keys stage needs a running node and two clients: {clients}")
        rotated, revoked = clients[0], clients[1]
        unit = f"unit:tpudeploy-keypoll-{self.cfg.name}"
        if unit not in self._sandbox.pids():
            raise StageFailure(
                f"the node's key poller ({unit}) is not running: {self._poller_log()}"
            )
        endpoint = Endpoint(f"https://127.0.0.1:{self.cfg.proxy.port}", self._tls_sha256)
        (old_rotated,) = self._remember_keys(rotated)
        (old_revoked,) = self._remember_keys(revoked)
        # Served before: its 401 later is the revocation, not a key the node never had.
        self._expect(endpoint, old_revoked, 200, f"{revoked}'s key before its rotation")

        stream = Stream(endpoint, old_rotated, self.cfg.vllm.served_model_name).start()
        start = time.monotonic()
        while not stream.events and stream.running and time.monotonic() - start < 30:
            time.sleep(0.05)
        if not stream.events:
            stream.wait(1)
            raise StageFailure(
                f"the stream sent nothing (status {stream.status}) {stream.error}".strip()
            )

        self._make("api-key", args=(f"CLIENT={rotated}", "ROTATE=1"))
        rotated_at = time.monotonic()
        new_rotated, previous = self._remember_keys(rotated)
        if previous != old_rotated:
            raise StageFailure(f"ROTATE=1 did not keep {rotated}'s old key for the overlap")
        rotated_took = self._until_served(endpoint, new_rotated, rotated_at, f"{rotated}'s new key")
        self._expect(endpoint, old_rotated, 200, f"{rotated}'s old key inside its overlap")

        self._make("api-key", args=(f"CLIENT={revoked}", "ROTATE=1", "OVERLAP=0"))
        revoked_at = time.monotonic()
        (new_revoked,) = self._remember_keys(revoked)
        revoked_took = self._until_served(endpoint, new_revoked, revoked_at, f"{revoked}'s new key")
        reloaded_at = time.monotonic()
        # nginx's reload is graceful: a worker of the old map may still take a new connection
        # for a moment after one of the new map served the new key, so the old key's 401 is
        # awaited within the same bound, never assumed at once (a loaded CI runner saw a 200).
        self._until_status(
            endpoint, old_revoked, 401, reloaded_at, f"{revoked}'s old key, revoked (OVERLAP=0)"
        )
        # After the second reload too: default's old key still inside its overlap.
        self._expect(endpoint, old_rotated, 200, f"{rotated}'s old key after {revoked}'s change")

        stream_was_running = stream.running
        stream.wait(STREAM_TOKENS * STREAM_SECONDS_PER_TOKEN + REQUEST_TIMEOUT)
        if stream.running or stream.status != 200 or not stream.done:
            raise StageFailure(
                f"the stream started before the rotations did not finish: status "
                f"{stream.status}, {len(stream.events)} events, [DONE] "
                f"{'seen' if stream.done else 'missing'} {stream.error}".strip()
            )
        if not stream_was_running or stream.events[-1] < reloaded_at:
            raise StageFailure(
                "the stream ended before both reloads: it proves nothing about them (make it "
                "longer: STREAM_TOKENS)"
            )
        return (
            f"propagation (rotation done -> first 200 with the new key): {rotated} "
            f"{rotated_took:.1f} s (old key still served, overlap), {revoked} {revoked_took:.1f} s "
            f"(old key 401 by then), poll every {KEY_POLL_SECONDS} s, bound "
            f"{PROPAGATION_BOUND_SECONDS:.0f} s; a stream started before both rotations ended "
            f"200 with [DONE] ({len(stream.events)} events over "
            f"{stream.events[-1] - stream.events[0]:.1f} s)"
        )
