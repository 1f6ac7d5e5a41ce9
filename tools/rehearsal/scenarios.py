"""The rehearsal's scenarios beyond the lifecycle, for a spot or on-demand node (issue 16):

- preemption: the node is PREEMPTED in the fake TPU API; `make status` says so, `make recover`
  replaces that one resource, the node is READY again with the same spec and its deadline, the
  new node boots warm from its predecessor's compile cache, and a deploy then plans nothing;
- ladder: a capacity ladder of two zones; the fake TPU API has no v5litepod-1 of this model in
  the first (its documented stockout, fakes/tpu_rules.py): `make deploy` says so, leaves nothing
  of the first rung, deploys the second, whose deadline job deletes the second rung's node; `make
  status` names the rung; `make destroy` leaves nothing and forgets the rung;
- deadline: the Cloud Scheduler job exists for this node and this identity, `make extend` moves
  it, then the fake scheduler fires it: the TPU API deletes the node on the stop account's token
  (its one permission), nothing bills, `make recover` leaves the ended run alone, `make status`
  says billing stopped, and a deliberate `make deploy` starts a new run with a new deadline;
  then the rehearsal's clock jumps a year past that deadline and the job fires again (its cron
  line has no year, fakes/cloudscheduler.py): the stop account's grant ended an hour after the
  deadline, so the TPU API refuses the DELETE and the node of that name stays (issue 36 item 10).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.fakes.cloudscheduler import next_run
from tools.rehearsal.fakes.logging_rules import parse_filter
from tools.rehearsal.sandbox import BootSandbox
from tools.rehearsal.scratch import REHEARSAL_PROJECT
from tpudeploy import facts, stopsoon
from tpudeploy.config import DeployConfig, load_config
from tpudeploy.deadline import WARN_BEFORE_SECONDS
from tpudeploy.endpoint import colon_fingerprint
from tpudeploy.names import service_account_email
from tpudeploy.render import vllm_serve_args

# What a replacement must keep: the node's spec as the TPU API holds it (not its state, health,
# addresses or name).
_VOLATILE = ("state", "health", "networkEndpoints", "name", "createTime")
EXTEND_BY = timedelta(hours=1)
# The "stops soon" warning job runs this long before the deadline (tpudeploy/deadline.py).
WARN_BEFORE = timedelta(seconds=WARN_BEFORE_SECONDS)
# SCENARIO=ladder: two rungs of the rehearsed model; the first zone is out of stock, the second,
# in another region than the compile-cache bucket (the first rung's), has capacity.
LADDER_ZONES = (facts.ZONE, next(iter(facts.TPU_ZONES["v5e"])))  # us-west4-a, us-central1-a


class StageFailure(Exception):
    """A stage did not do what it must; the message says what was expected."""


@dataclass
class Stage:
    name: str
    run: Callable[[], str]


def _time(value: object) -> datetime:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


class StageHost:
    """What every stage mixin asks of the Rehearsal (tools/rehearsal/lifecycle.py), which
    provides it: the fake cloud, the deployment's config and a make target's run."""

    @property
    def cloud(self) -> FakeCloud:
        raise NotImplementedError

    @property
    def cfg(self) -> DeployConfig:
        raise NotImplementedError

    def _make(
        self,
        target: str,
        *,
        stdin: str | None = None,
        approve: bool = False,
        args: tuple[str, ...] = (),
    ) -> str:
        raise NotImplementedError


class VmStageHost(StageHost):
    """What the TPU VM's scenario mixins (preemption, deadline, idle) also ask of the
    Rehearsal: its node, its boot and its deploy and destroy steps, declared once."""

    def _node_name(self) -> str:
        raise NotImplementedError

    def _boot(self, disk: str = "node") -> str:
        raise NotImplementedError

    def _deploy_again(self) -> str:
        raise NotImplementedError

    def _destroy(self) -> str:
        raise NotImplementedError

    def _destroy_all(self) -> str:
        raise NotImplementedError

    def _no_secret_left(self) -> str:
        raise NotImplementedError


class ScenarioStages(VmStageHost):
    """Stages the Rehearsal runs for SCENARIO=preemption and SCENARIO=deadline."""

    workdir: Path
    logs: Path
    _step: int
    _sandbox: BootSandbox | None
    _before_spec: dict[str, Any]
    _before_deadline: object
    _config_path: Path
    _cfg: DeployConfig | None

    # Provided by the Rehearsal (tools/rehearsal/lifecycle.py), besides VmStageHost's.
    def _served_sha256(self) -> str:
        raise NotImplementedError

    # ---- shared

    def _log(self, target: str) -> str:
        return (self.logs / f"{self._step:02d}-{target}.log").read_text()

    def _job_name(self) -> str:
        region = self.cfg.deadline_region
        return f"projects/{REHEARSAL_PROJECT}/locations/{region}/jobs/{self.cfg.deadline_job_name}"

    def _job(self) -> dict[str, Any]:
        job = self.cloud.cloudscheduler.job(self._job_name())
        if job is None:
            raise StageFailure(f"the fake Cloud Scheduler has no job {self._job_name()}")
        return job

    def _spec(self) -> dict[str, Any]:
        node = self.cloud.tpu.node(self._node_name())
        if node is None:
            raise StageFailure(f"the fake TPU API has no node {self._node_name()}")
        return {k: v for k, v in node.items() if k not in _VOLATILE}

    def _off_schedule(self, job: dict[str, Any]) -> str | None:
        """Why the job's next run is not max_run_duration from now (None when it is)."""
        seconds = self.cfg.deadline_seconds or 0
        due = _time(job.get("scheduleTime")) - datetime.now(UTC)
        if timedelta(seconds=seconds - 300) <= due <= timedelta(seconds=seconds + 60):
            return None
        return f"it runs in {due}, not max_run_duration ({seconds} s) from now"

    def _cache_uploads(self) -> list[str]:
        return [r["path"] for r in self.cloud.storage.requests if r["method"] == "PUT"]

    # ---- preemption

    def preemption_stages(self) -> list[Stage]:
        return [
            Stage("boot", self._boot),
            Stage("wait", lambda: self._make("wait")),
            Stage("preempt", self._preempt),
            Stage("recover", self._recover),
            Stage("boot-again", self._boot_again),
            Stage("wait-again", lambda: self._make("wait")),
            Stage("deploy-again", self._deploy_again),
            Stage("destroy", self._destroy),
            Stage("destroy-all", self._destroy_all),
            Stage("no-secret-left", self._no_secret_left),
        ]

    def _preempt(self) -> str:
        self._before_spec = self._spec()
        self._before_deadline = self._job().get("scheduleTime")
        if not self.cloud.tpu.preempt(self._node_name()):
            raise StageFailure(f"could not preempt {self._node_name()}")
        if self._sandbox is not None:
            self._sandbox.stop()  # a preempted VM runs nothing
        shown = self._make("status")
        text = self._log("status")
        if "PREEMPTED" not in text or "make recover" not in text:
            raise StageFailure(f"`{shown}` did not say the node is PREEMPTED and what to run")
        return f"node PREEMPTED in the fake TPU API; `{shown}` says so"

    def _recover(self) -> str:
        before = self.cloud.call_count()
        shown = self._make("recover")
        node = self.cloud.tpu.node(self._node_name()) or {}
        if node.get("state") != "READY":
            raise StageFailure(f"after `{shown}` the node is {node.get('state') or 'missing'}")
        if self._spec() != self._before_spec:
            raise StageFailure(f"`{shown}` created the node with another spec")
        changed = self.cloud.mutations(before)
        path = self._node_name()
        expected = {f"tpu DELETE /v2/{path}", f"tpu POST /v2/{path.rsplit('/', 1)[0]}"}
        if not expected <= set(changed) or [c for c in changed if not c.startswith("tpu ")]:
            raise StageFailure(f"`{shown}` should replace the node and nothing else: {changed}")
        if self._job().get("scheduleTime") != self._before_deadline:
            raise StageFailure(f"`{shown}` moved the deadline: a recovery keeps the run's end")
        return f"{shown}: node deleted and created again, same spec, same deadline"

    def _boot_again(self) -> str:
        uploads = self._cache_uploads()
        if not any("/xla/" in path for path in uploads):
            raise StageFailure("the first boot saved no compile cache to restore")
        self._boot("node-2")
        cache = [r for r in self.cloud.storage.requests if "/xla/" in r["path"]]
        restored = [r for r in cache if r["method"] == "GET"]
        if not restored or self._cache_uploads() != uploads:
            raise StageFailure(
                "the recreated node did not boot warm: it should download its predecessor's "
                f"archive and upload nothing (compile-cache requests: {cache})"
            )
        return "the recreated node restored its predecessor's compile cache (a warm boot)"

    # ---- deadline

    def deadline_stages(self) -> list[Stage]:
        return [
            Stage("deadline-job", self._deadline_job),
            Stage("extend", self._extend),
            Stage("stops-soon", self._stops_soon),
            Stage("fire", self._fire),
            Stage("after-deadline", self._after_deadline),
            Stage("deploy-after", self._deploy_after),
            Stage("a-year-later", self._a_year_later),
            Stage("destroy", self._destroy),
            Stage("destroy-all", self._destroy_all),
            Stage("no-secret-left", self._no_secret_left),
        ]

    def _deadline_job(self) -> str:
        job, cfg = self._job(), self.cfg
        target = job.get("httpTarget") or {}
        stop = service_account_email(cfg.stop_account_id, REHEARSAL_PROJECT)
        problems = []
        if target.get("httpMethod") != "DELETE" or not str(target.get("uri")).endswith(
            f"/v2/{self._node_name()}"
        ):
            problems.append(f"it calls {target.get('httpMethod')} {target.get('uri')}")
        if (target.get("oauthToken") or {}).get("serviceAccountEmail") != stop:
            problems.append(f"it does not act as {stop}")
        late = self._off_schedule(job)
        if late:
            problems.append(late)
        if problems:
            raise StageFailure("the deadline job is wrong: " + "; ".join(problems))
        shown = self._make("status")
        if "billing stops: deadline" not in self._log("status"):
            raise StageFailure(f"`{shown}` did not show the deadline")
        return (
            f"job {cfg.deadline_job_name}: DELETE of this node as {stop} at {job['scheduleTime']}"
        )

    def _warning_at(self) -> datetime:
        """When the "stops soon" job (tpudeploy/stopsoon.py) runs next."""
        name = self._job_name().rsplit("/", 1)[0] + "/" + stopsoon.warn_job_name(self.cfg)
        warn = self.cloud.cloudscheduler.job(name)
        if warn is None:
            raise StageFailure(f"the fake Cloud Scheduler has no warning job {name}")
        return _time(warn.get("scheduleTime"))

    def _extend(self) -> str:
        before = _time(self._job().get("scheduleTime"))
        if self._warning_at() != before - WARN_BEFORE:
            raise StageFailure(f"the warning runs at {self._warning_at()}, not 30 min before")
        shown = self._make("extend", args=(f"BY={int(EXTEND_BY.total_seconds() // 60)}m",))
        after = _time(self._job().get("scheduleTime"))
        if after != before + EXTEND_BY:
            raise StageFailure(f"`{shown}` moved the deadline from {before} to {after}")
        if self._warning_at() != after - WARN_BEFORE:
            raise StageFailure(f"`{shown}` left the warning at {self._warning_at()}")
        return f"{shown}: deadline {before:%H:%M} -> {after:%H:%M} UTC, its warning with it"

    def _stops_soon(self) -> str:
        """The warning job runs 30 min before the deadline (the fake logs its attempt as Cloud
        Scheduler does); the deployment's declared alert policy's filter matches that entry."""
        warn_name = self._job_name().rsplit("/", 1)[0] + "/" + stopsoon.warn_job_name(self.cfg)
        self.cloud.cloudscheduler.fire(warn_name, at=self._warning_at())
        with self.cloud.inventory.locked() as inv:
            policies = [inv.get("monitoring", n) for n in inv.names("monitoring")]
        title = f"{self.cfg.name}: {stopsoon.DEADLINE_SOON[1]}"
        found = [p for p in policies if p and p.get("displayName") == title]
        if len(found) != 1:
            raise StageFailure(f"the fake Monitoring API holds {len(found)} policies {title!r}")
        log_filter = found[0]["conditions"][0]["conditionMatchedLog"]["filter"]
        matched = [e for e in self.cloud.logging.entries if parse_filter(log_filter)(e)]
        if len(matched) != 1:
            raise StageFailure(f"{log_filter!r} matched {len(matched)} entries, not the warning")
        return f"warning job ran at {matched[0]['timestamp']}; {title!r} matches its entry"

    def _fire(self) -> str:
        stop = (
            f"serviceAccount:{service_account_email(self.cfg.stop_account_id, REHEARSAL_PROJECT)}"
        )
        status = self.cloud.cloudscheduler.fire(self._job_name())
        if status != 200:
            raise StageFailure(f"the deadline job's DELETE was answered {status}")
        with self.cloud.inventory.locked() as inv:
            deletes = [c for c in inv.calls if c.api == "tpu" and c.method == "DELETE"]
        if not deletes or deletes[-1].principal != stop:
            raise StageFailure(f"the node was not deleted as {stop}: {deletes[-1:]}")
        left = self.cloud.billing()
        if left:
            raise StageFailure(f"after the deadline these still bill: {left}")
        return f"the job ran: node deleted with {stop}'s token; nothing bills"

    def _after_deadline(self) -> str:
        shown = self._make("status")
        if "billing stopped" not in self._log("status"):
            raise StageFailure(f"`{shown}` did not say the billing stopped")
        before = self.cloud.call_count()
        again = self._make("recover")
        if self.cloud.mutations(before) or self.cloud.billing():
            raise StageFailure(f"`{again}` restarted a run that ended at its deadline")
        return f"`{shown}`: billing stopped; `{again}` left the ended run alone"

    def _deploy_after(self) -> str:
        shown = self._make("deploy", approve=True)
        if self.cloud.tpu.node(self._node_name()) is None:
            raise StageFailure(f"`{shown}` after the deadline did not create the node")
        job = self._job()
        late = self._off_schedule(job)
        if late:
            raise StageFailure(f"`{shown}` did not set a new deadline: {late}")
        return f"{shown}: node created again, new deadline {job['scheduleTime']}"

    def _a_year_later(self) -> str:
        """Cloud Scheduler runs the job again at the same minute next year; whatever has the
        node's name then (here: the node `make deploy` just created) must not be deleted."""
        job = self._job()
        due = _time(job.get("scheduleTime"))
        again = next_run(str(job["schedule"]), due)
        if again is None or not timedelta(days=360) < again - due < timedelta(days=370):
            raise StageFailure(f"the fake scheduler does not run {job['schedule']!r} a year on")
        with self.cloud.inventory.locked() as inv:
            before = len(inv.calls)
        status = self.cloud.cloudscheduler.fire(self._job_name(), at=again)
        with self.cloud.inventory.locked() as inv:
            deletes = [c for c in inv.calls[before:] if c.api == "tpu" and c.method == "DELETE"]
        if self.cloud.tpu.node(self._node_name()) is None or status < 400:
            raise StageFailure(
                f"a year after its deadline the job fired again and its DELETE was answered "
                f"{status}: it deleted the node of that name (the stop account's grant must end "
                "with the deadline)"
            )
        if not deletes:
            raise StageFailure("the job fired a year later but no DELETE reached the TPU API")
        return (
            f"fired again {again:%Y-%m-%d %H:%M} UTC (a year on): DELETE refused ({status}), the "
            "node of that name stays"
        )

    # ---- a changed config on a running node

    def _serving_line(self) -> list[str]:
        """The `vllm serve ...` argv of the engine the node runs now (its process's cmdline)."""
        if self._sandbox is None:
            raise StageFailure("no node has booted")
        state = json.loads((self._sandbox.stub_dir / "state.json").read_text())
        pid = state.get("pids", {}).get(self.cfg.vllm.container_name)
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        except (OSError, TypeError):
            raise StageFailure(f"the node runs no vLLM container (pid {pid})") from None
        return argv[argv.index("vllm") :] if "vllm" in argv else argv

    def _change_config(self) -> str:
        """Change a [vllm] setting, `make diff`, `make deploy`: the node that serves afterwards
        must run the new `vllm serve` line. The TPU fake patches metadata without a boot, as the
        API does, so only a replaced node (a new VM, which boots) can pass."""
        text = self._config_path.read_text()
        self._config_path.write_text(
            text.replace("\n[vllm]\n", "\n[vllm]\nenable_prefix_caching = false\n", 1)
        )
        self._cfg = load_config(self._config_path)
        wanted = vllm_serve_args(self.cfg.vllm)
        if self._serving_line() == wanted:
            raise StageFailure("the rehearsal's config change did not change the serve line")
        pinned = self._served_sha256()
        shown = self._make("diff")
        if "replace_triggered_by" not in self._log("diff"):
            raise StageFailure(f"`{shown}` did not say the node will be replaced")
        boots = self.cloud.tpu.boots(self._node_name())
        deployed = self._make("deploy", approve=True)
        if self.cloud.tpu.boots(self._node_name()) > boots:
            self._boot("node-changed")  # a new VM: the guest agent runs its startup script
        serving = self._serving_line()
        if serving != wanted:
            raise StageFailure(
                f"after `{deployed}` the node still serves {' '.join(serving)}; wanted "
                f"{' '.join(wanted)} (a metadata patch does not re-run the startup script)"
            )
        # Issue 37: an agent pinned the replaced node's certificate; the new node must serve the
        # same one, and `make endpoint` print the same pin.
        served = self._served_sha256()
        if served != pinned:
            raise StageFailure(
                f"the re-created node serves certificate {served[:16]}..., the replaced one "
                f"served {pinned[:16]}...: every agent's pinned fingerprint breaks"
            )
        endpoint = self._make("endpoint")
        if colon_fingerprint(pinned) not in self._log("endpoint"):
            raise StageFailure(f"`{endpoint}` did not print the pinned fingerprint {pinned}")
        return (
            f"`{shown}` says replace; after `{deployed}` a new node serves the new line and the "
            f"same certificate (SHA-256 {pinned[:16]}..., as `{endpoint}` prints)"
        )

    # ---- capacity ladder

    def ladder_stages(self) -> list[Stage]:
        return [
            Stage("ladder-deploy", self._ladder_deploy),
            Stage("ladder-status", self._ladder_status),
            Stage("destroy", self._ladder_destroy),
            Stage("destroy-all", self._destroy_all),
            Stage("no-secret-left", self._no_secret_left),
        ]

    def _ladder_deploy(self) -> str:
        first, second = LADDER_ZONES
        model = self.cfg.provisioning
        self.cloud.tpu.stockouts.add((first, self.cfg.accelerator_type, model))
        shown = self._make("deploy", approve=True)
        log = self._log("deploy")
        said = [
            f"rung 1 ({model} in {first}) failed with a stockout error",
            f'There is no more capacity in the zone "{first}"',
            f"rung 2 of 2 runs ({model} in {second}); skipped rung 1: stockout",
        ]
        missing = [line for line in said if line not in log]
        if missing:
            raise StageFailure(f"`{shown}` did not say {missing}")
        self._cfg = load_config(self._config_path)  # the rung the walk recorded
        if self.cfg.zone != second:
            raise StageFailure(f"after `{shown}` the config reads rung zone {self.cfg.zone}")
        node = self.cloud.tpu.node(self._node_name())
        if node is None:
            raise StageFailure(f"`{shown}` passed but there is no node in {second}")
        if (node.get("labels") or {}).get("tpudeploy-rung") != "2":
            raise StageFailure(f"the node's labels do not say rung 2: {node.get('labels')}")
        left = self.cloud.billing()
        if len(left) != 1:
            raise StageFailure(f"one node must bill, not {left}: the first rung left something")
        uri = str((self._job().get("httpTarget") or {}).get("uri"))
        if not uri.endswith(f"/v2/{self._node_name()}"):
            raise StageFailure(f"the deadline job deletes {uri}, not the second rung's node")
        return f"{shown}: {first} out of stock, node and deadline job in {second}"

    def _ladder_status(self) -> str:
        shown = self._make("status")
        wanted = f"capacity: rung 2 of 2 ({self.cfg.provisioning} in {LADDER_ZONES[1]})"
        if wanted not in self._log("status") or "skipped rung 1 (stockout)" not in self._log(
            "status"
        ):
            raise StageFailure(f"`{shown}` did not say {wanted!r} and the skipped rung")
        return f"`{shown}`: {wanted}"

    def _ladder_destroy(self) -> str:
        shown = self._destroy()
        record = self._config_path.parent / f"tpudeploy.{self.cfg.name}.rung.json"
        if record.exists():
            raise StageFailure("`make destroy` passed but the rung record is still there")
        return f"{shown}; the rung record is gone (the next deploy walks from rung 1)"
