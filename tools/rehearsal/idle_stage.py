"""SCENARIO=idle (issue 39): the idle stop, rehearsed on a spot, on-demand or flex-start node
(flex-start: the node deletes its queued resource with force=true, and so itself).

The node boots from its metadata with [idle] stop_after, its watcher (tpudeploy/node/idlewatch.py,
a transient unit the stand-in systemd-run really starts) reading the fake engine's /metrics on
loopback every IDLE_INTERVAL_S instead of every minute, and stopping after IDLE_STOP_AFTER_S
instead of the configured minutes (the startup script's TPUDEPLOY_IDLE_* variables):

- traffic: requests keep arriving for three times stop_after: the node stays;
- idle-stop: the requests stop; within stop_after plus a few readings the TPU API receives the
  node's DELETE, made with the node's own account's token (its grant: the stop role under the
  deadline's condition, evaluated by the IAM fake), and nothing bills;
- after-idle: `make status` says nothing bills and the deadline still stands; `make recover`
  (the recover workflow) does not bring the node back;
- deploy-after: `make deploy` creates the node again, with the same deadline, and says it boots
  warm (the first boot saved the compile cache); a second deploy plans nothing; the new node
  boots, and its own watcher deletes it once idle;
- then destroy leaves nothing.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from tools.rehearsal.scenarios import Stage, StageFailure, VmStageHost
from tools.rehearsal.scratch import REHEARSAL_PROJECT
from tpudeploy.names import service_account_email

IDLE_STOP_AFTER_S = 4
IDLE_INTERVAL_S = 1
# How long the idle node may take to delete itself: stop_after plus a few readings and the
# DELETE (a loaded machine runs the watcher late).
GRACE_S = 30


class IdleStages(VmStageHost):
    """Stages the Rehearsal runs for SCENARIO=idle."""

    # Provided by the Rehearsal (ScenarioStages), besides VmStageHost's.
    def _log(self, target: str) -> str:
        raise NotImplementedError

    def _job(self) -> dict[str, object]:
        raise NotImplementedError

    def idle_env(self) -> dict[str, str]:
        """What the rehearsal's node boot is given: the fake TPU API, and seconds for minutes."""
        return {
            "TPUDEPLOY_TPU_URL": f"http://{self.cloud.tpu.host}/v2",
            "TPUDEPLOY_IDLE_STOP_AFTER": str(IDLE_STOP_AFTER_S),
            "TPUDEPLOY_IDLE_INTERVAL_SECONDS": str(IDLE_INTERVAL_S),
        }

    def idle_stages(self) -> list[Stage]:
        return [
            Stage("boot", self._boot),
            Stage("traffic", self._traffic),
            Stage("idle-stop", self._idle_stop),
            Stage("after-idle", self._after_idle),
            Stage("deploy-after", self._deploy_after_idle),
            # Before the new node boots: once booted, its own watcher deletes it after 4 s idle.
            Stage("deploy-again", self._deploy_again),
            Stage("boot-again", lambda: self._boot("node-2")),
            Stage("idle-again", self._idle_stop),
            Stage("destroy", self._destroy),
            Stage("destroy-all", self._destroy_all),
            Stage("no-secret-left", self._no_secret_left),
        ]

    def _ask(self) -> None:
        """One chat request to the engine on loopback, as the front door forwards it."""
        body = json.dumps(
            {"model": self.cfg.vllm.model, "messages": [{"role": "user", "content": "hi"}]}
        ).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.cfg.vllm.port}/v1/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 (loopback)
                answer.read()
        except urllib.error.URLError as exc:
            raise StageFailure(f"the engine on loopback did not answer a request: {exc}") from None

    def _attribute(self) -> dict[str, object]:
        text = self.cloud.tpu.guest_attribute(self._node_name(), "tpudeploy/idle")
        return dict(json.loads(text)) if text else {}

    def _traffic(self) -> str:
        until = time.monotonic() + 3 * IDLE_STOP_AFTER_S
        sent = 0
        while time.monotonic() < until:
            self._ask()
            sent += 1
            if self.cloud.tpu.node(self._node_name()) is None:
                raise StageFailure(
                    f"the node deleted itself while requests arrived ({sent} sent, one every "
                    "0.5 s): the watcher took a busy node for an idle one"
                )
            time.sleep(0.5)
        seen = self._attribute()
        if seen.get("state") not in ("busy", "idle") or int(str(seen.get("idle_s", 0))) >= (
            IDLE_STOP_AFTER_S
        ):
            raise StageFailure(f"the watcher's tpudeploy/idle attribute says {seen}")
        return (
            f"{sent} requests over {3 * IDLE_STOP_AFTER_S} s (stop_after {IDLE_STOP_AFTER_S} s): "
            f"the node stays; tpudeploy/idle says {seen.get('state')}"
        )

    def _idle_stop(self) -> str:
        start = time.monotonic()
        while self.cloud.tpu.node(self._node_name()) is not None:
            if time.monotonic() - start > IDLE_STOP_AFTER_S + GRACE_S:
                raise StageFailure(
                    f"no request for {IDLE_STOP_AFTER_S + GRACE_S} s and the node is still "
                    f"there; the watcher last said {self._attribute()}"
                )
            time.sleep(0.5)
        took = time.monotonic() - start
        node_account = (
            "serviceAccount:"
            f"{service_account_email(self.cfg.service_account_id, REHEARSAL_PROJECT)}"
        )
        with self.cloud.inventory.locked() as inv:
            deletes = [c for c in inv.calls if c.api == "tpu" and c.method == "DELETE"]
        if not deletes or deletes[-1].principal != node_account:
            raise StageFailure(f"the node was not deleted as {node_account}: {deletes[-1:]}")
        if self.cfg.flex_start_node:
            self._queued_resource_gone(deletes[-1].path)
        left = self.cloud.billing()
        if left:
            raise StageFailure(f"after the idle stop these still bill: {left}")
        # Flex-start's node goes with its queued resource (force=true deletes the node first).
        gone = "deleted its queued resource" if self.cfg.flex_start_node else "deleted itself"
        return (
            f"{gone} {took:.0f} s into this stage (no request since), with its own "
            f"account's token ({node_account}); nothing bills"
        )

    def _queued_resource_gone(self, deleted: str) -> None:
        """Flex-start: the DELETE named this deployment's queued resource, which the TPU API
        then answers DELETING, then 404 (read as `make status` reads it)."""
        qr = f"projects/{REHEARSAL_PROJECT}/locations/{self.cfg.zone}/queuedResources/"
        qr += self.cfg.queued_resource_id
        if not deleted.endswith(qr):
            raise StageFailure(f"the idle node deleted {deleted}, not its queued resource {qr}")
        start = time.monotonic()
        while time.monotonic() - start < GRACE_S:
            try:
                url = f"http://{self.cloud.tpu.host}/v2alpha1/{qr}"
                with urllib.request.urlopen(url, timeout=10):
                    pass
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return
            time.sleep(0.5)
        raise StageFailure(f"{qr} was still there {GRACE_S} s after its delete")

    def _after_idle(self) -> str:
        shown = self._make("status")
        said = self._log("status")
        if "nothing is billing" not in said:
            raise StageFailure(f"`{shown}` did not say nothing bills:\n{said[-600:]}")
        before = self.cloud.call_count()
        again = self._make("recover")
        if self.cloud.mutations(before) or self.cloud.billing():
            raise StageFailure(f"`{again}` brought back a node that stopped itself when idle")
        return f"`{shown}`: nothing is billing; `{again}` left the idle-stopped node alone"

    def _deploy_after_idle(self) -> str:
        flex = self.cfg.flex_start_node  # no deadline job: the run ends at max_run_duration
        before = None if flex else self._job().get("scheduleTime")
        shown = self._make("deploy", approve=True)
        if self.cloud.tpu.node(self._node_name()) is None:
            raise StageFailure(f"`{shown}` after the idle stop did not create the node")
        said = self._log("deploy")
        if "warm boot" not in said:
            raise StageFailure(f"`{shown}` did not say the node boots warm:\n{said[-800:]}")
        if flex:
            return f"{shown}: a new flex-start run created, warm boot announced"
        after = self._job().get("scheduleTime")
        if after != before:
            raise StageFailure(f"`{shown}` moved the deadline from {before} to {after}")
        return f"{shown}: node created again, warm boot announced, deadline still {after}"
