"""The flex-start lifecycle's upstream watch (issue 40, "Offline proof"): the runner of
tpudeploy/upstream/watchrun.py, end to end against the fakes, after the watched deployment's own
node is destroyed and before its `make destroy-all`.

- watch-setup: the watch deployment's one-time setup, as docs/tuning.md says it: `python -m
  tpudeploy.upstream config --out watch.toml`, then with that config `make deploy-secrets`,
  `make secret`, `make api-key` (every [access] client) and `make tls-cert`; its stacks get the
  rehearsal's lock file. Its accounts, secrets and bucket are its own, beside the watched
  deployment's, which stay.
- watch-killed: the loopback Docker Hub (fakes/dockerhub.py) moves the followed tag to a better
  build; a run is killed right after its candidate's `make deploy` (the node booted, billing):
  no `finally` runs in a killed process, so the node is left and the run marker says "running".
- watch: the next run destroys what the killed one left before anything else, judges the
  candidate (its acceptance rows through the watch node's front door, then the tune harness's
  sweep: the pinned build and the candidate, 3 rounds, each a fresh node booted in a
  BootSandbox) and writes a pull-request body; nothing of the watch bills after.
- watch-worse: the tag moves to a worse build: the same run files the verdict, no PR body.
- watch-destroy-all: `make destroy-all` of `<name>-watch`; the fakes hold nothing of it.

Every step is the real make target in the scratch copy (cdktf, Terraform, the stand-in provider,
the node's boot script), except one: `make bench` runs `vllm bench serve` over IAP SSH on the
node, which the fakes cannot reach; the rehearsal writes that sweep's result files itself,
synthetic with a known effect per image digest (tools/tune_example.py), so the verdict the watch
reaches is known in advance and checked.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from tools import tune_example
from tools.rehearsal.fakes.dockerhub import FakeDockerHub
from tools.rehearsal.keys_stage import current_keys
from tools.rehearsal.sandbox import BootSandbox
from tools.rehearsal.scenarios import Stage, StageFailure, VmStageHost
from tools.rehearsal.scratch import MAKE, REHEARSAL_PROJECT, _tail
from tools.tune_example import Effect
from tpudeploy import accept, terraform
from tpudeploy.config import DeployConfig, load_config
from tpudeploy.names import service_account_email
from tpudeploy.platform import platform_for
from tpudeploy.tlscert import fingerprints
from tpudeploy.tune import tomlwrite
from tpudeploy.tune.plan import sweep_settings
from tpudeploy.tune.runner import Step, StepResult
from tpudeploy.upstream import registry
from tpudeploy.upstream.pinfile import PIN_JSON
from tpudeploy.upstream.registry import ImageRef
from tpudeploy.upstream.watchrun import PR_BODY, RUN_FILE, VERDICT_JSON, Outcome, Watch
from tpudeploy.watchbudget import watch_name

REPOSITORY, TAG = "vllm/vllm-tpu", "nightly"
# Three builds of the followed tag, each a known effect on throughput (1% cv: the verdict's
# interval is narrow enough for a label): the pinned one, a better and a worse new release.
PINNED, BETTER, WORSE = (hashlib.sha256(label.encode()).hexdigest() for label in "pbw")
EFFECTS = {PINNED: Effect(1.0, 0.01), BETTER: Effect(1.10, 0.01), WORSE: Effect(0.90, 0.01)}
# What the watched deployment adds for the watch: tests/upstream's budget and time limit (the
# worst case of a 3 h limit at us-west4's flex-start rate fits $20).
WATCH_TABLE = {"enabled": True, "budget_usd": 20.0, "time_limit": "3h"}
WATCHED_CONFIG, WATCH_CONFIG = "deploy-watched.toml", "watch.toml"


# (make target, the image digest of its config, what of the watch billed after it)
Record = list[tuple[str, str, list[str]]]


class Killed(BaseException):
    """The runner's process is gone (the job cancelled): nothing after runs, no `finally`."""


class WatchStages(VmStageHost):
    """Stages the Rehearsal (tools/rehearsal/lifecycle.py) runs for a flex-start lifecycle."""

    workdir: Path
    scratch: Path
    logs: Path
    _step: int
    _env: dict[str, str]
    _token: str
    _api_keys: list[bytes]
    _tls_keys: list[bytes]
    _sandbox: BootSandbox | None
    _config_path: Path

    # Provided by the Rehearsal (tools/rehearsal/lifecycle.py), besides VmStageHost's.
    def _served_sha256(self) -> str:
        raise NotImplementedError

    def _boot_node(
        self, node_name: str, disk: str, *, extra_env: dict[str, str] | None = None
    ) -> BootSandbox:
        raise NotImplementedError

    def watch_stages(self) -> list[Stage]:
        return [
            Stage("watch-setup", self._watch_setup),
            Stage("watch-killed", self._watch_killed),
            Stage("watch", self._watch_resumed),
            Stage("watch-worse", self._watch_worse),
            Stage("watch-destroy-all", self._watch_destroy_all),
        ]

    # ---- the watch deployment

    @property
    def wcfg(self) -> DeployConfig:
        return load_config(self.scratch / WATCH_CONFIG)

    def _watch_node(self) -> str:
        cfg = self.wcfg
        return f"projects/{REHEARSAL_PROJECT}/locations/{cfg.zone}/nodes/{cfg.node_id}"

    def _run(self, argv: Sequence[str], env: Mapping[str, str], log: Path, stdin: str = "") -> int:
        with open(log, "w") as handle:
            proc = subprocess.run(
                list(argv),
                cwd=self.scratch,
                env={**self._env, **env},
                input=stdin or None,
                stdout=handle,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=900,
                check=False,
            )
        return proc.returncode

    def _watch_make(self, target: str, *args: str, stdin: str = "") -> str:
        """`make TARGET` of the watch deployment (DEPLOY_CONFIG=watch.toml)."""
        log = self.logs / f"{self._step:02d}-watch-{target}.log"
        env = {"DEPLOY_CONFIG": str(self.scratch / WATCH_CONFIG)}
        if self._run([*MAKE, target, *args], env, log, stdin) != 0:
            raise StageFailure(f"`make {target}` of the watch deployment failed; log: {log}\n"
                               f"{_tail(log)}")  # fmt: skip
        return " ".join(["make", target, *args])

    def _watch_setup(self) -> str:
        # The watched deployment: this rehearsal's, pinned by digest, its [watch] table on.
        data = tomllib.loads(self._config_path.read_text())
        data["vllm"] = {**data.get("vllm", {}), "image": f"{REPOSITORY}:{TAG}@sha256:{PINNED}"}
        data["watch"] = dict(WATCH_TABLE)
        watched = self.scratch / WATCHED_CONFIG
        watched.write_text(tomlwrite.dumps(data, header="The rehearsal's watched deployment."))
        python = str(self.scratch / ".venv" / "bin" / "python")
        log = self.logs / f"{self._step:02d}-watch-config.log"
        argv = [python, "-m", "tpudeploy.upstream", "config", "--out", WATCH_CONFIG]
        if self._run(argv, {"DEPLOY_CONFIG": str(watched)}, log) != 0:
            raise StageFailure(f"`python -m tpudeploy.upstream config` failed; log: {log}")
        wcfg = self.wcfg
        # Its stacks' providers: the rehearsal's lock file, as _prepare gives the watched ones.
        lock = next((self.scratch / terraform.synth_outdir(self.cfg)).rglob(".terraform.lock.hcl"))
        for stack in platform_for(wcfg).stacks(wcfg):
            folder = self.scratch / terraform.synth_outdir(wcfg) / "stacks" / stack
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ".terraform.lock.hcl").write_bytes(lock.read_bytes())
        shown = [self._watch_make("deploy-secrets", "AUTO_APPROVE=1")]
        shown.append(self._watch_make("secret", stdin=self._token + "\n"))
        _, *others = wcfg.access.clients
        shown.append(self._watch_make("api-key"))
        shown += [self._watch_make("api-key", f"CLIENT={c}") for c in others]
        shown.append(self._watch_make("tls-cert"))
        sm = self.cloud.secretmanager
        for client in wcfg.access.clients:
            keys = current_keys(sm.values(REHEARSAL_PROJECT, wcfg.client_key_secret_ids[client]))
            if not keys:
                raise StageFailure(f"the watch deployment's client {client} has no key")
            self._api_keys += [k.encode() for k in keys]
        (tls,) = sm.values(REHEARSAL_PROJECT, wcfg.tls_secret_id)
        begin = tls.index(b"-----BEGIN PRIVATE KEY-----")
        self._tls_keys += [x for x in tls[begin:].splitlines() if x and not x.startswith(b"---")]
        self._watch_tls = fingerprints(tls[:begin].decode())["sha256"]
        shared = self._shared_identifiers(wcfg)
        if shared:
            raise StageFailure(f"the watch deployment shares {shared} with the watched one")
        # The loopback Docker Hub lives from here to the watch's destroy-all; until a "new
        # release", the followed tag points at the pinned build.
        self._hub = FakeDockerHub().__enter__()
        self._hub.publish(REPOSITORY, TAG, PINNED)
        self._boots = 0
        self._outlived: list[str] = []
        return (
            f"{watch_name(self.cfg)}: {', '.join(shown)} (DEPLOY_CONFIG={WATCH_CONFIG}); its "
            "account, secrets, certificate and cache bucket its own beside the watched one's"
        )

    def _identifiers(self, cfg: DeployConfig) -> dict[str, str]:
        return {
            "node": cfg.node_id,
            "account": service_account_email(cfg.service_account_id, REHEARSAL_PROJECT),
            "token secret": cfg.hf_token_secret_id,
            "certificate secret": cfg.tls_secret_id,
            "bucket": cfg.compile_cache_bucket(REHEARSAL_PROJECT),
            **{f"{c}'s key secret": s for c, s in cfg.client_key_secret_ids.items()},
        }

    def _shared_identifiers(self, wcfg: DeployConfig) -> list[str]:
        mine = self._identifiers(self.cfg)
        return [f"{k} {v}" for k, v in self._identifiers(wcfg).items() if v in mine.values()]

    # ---- the runner's steps: real make targets, the node booted after each deploy

    def _boot_watch_node(self) -> None:
        self._boots += 1
        self._boot_node(self._watch_node(), f"watch-node-{self._boots}")
        if self._served_sha256() != self._watch_tls:
            raise StageFailure("the watch node does not serve its deployment's certificate")

    def _bench(self, argv: Sequence[str], config: Path) -> StepResult:
        """The sweep's result files as `vllm bench serve --save-result` writes them, with the
        build's known effect: the fakes have no IAP SSH to run the real one on the node."""
        data = tomllib.loads(config.read_text())
        digest = ImageRef.parse(data["vllm"]["image"]).digest or ""
        if digest not in EFFECTS:
            return StepResult(1, f"no synthetic effect for the image {data['vllm']['image']}")
        if self.cloud.tpu.node(self._watch_node()) is None:
            return StepResult(1, "make bench: no node to run the sweep on")
        out = Path(next(a for a in argv if a.startswith("OUT="))[4:])
        round_ = int(out.name.removeprefix("round-"))
        out.mkdir(parents=True, exist_ok=True)
        settings, _ = sweep_settings(load_config(config), "quick")
        for ctx in settings.contexts:
            for clients in settings.clients:
                rec = tune_example.record(ctx, clients, 1, EFFECTS[digest], digest[:8], round_)
                (out / f"ctx{ctx}-c{clients}-r1.json").write_text(json.dumps(rec))
        self._benched.add(digest)
        return StepResult(0, "")

    def _watch_step(self, kill_after_deploy_of: str = "") -> tuple[Step, Record]:
        """The Watch's `step`: the real make target in the scratch copy (argv[0] is make), the
        watch node booted after each deploy and stopped after each destroy. Each step is
        recorded with what billed after it."""
        record: Record = []
        killed = [False]

        def step(argv: Sequence[str], env: Mapping[str, str]) -> StepResult:
            if killed[0]:
                raise Killed
            target, config = argv[1], Path(env["DEPLOY_CONFIG"])
            digest = ImageRef.parse(tomllib.loads(config.read_text())["vllm"]["image"]).digest
            if target == "bench":
                result = self._bench(argv, config)
            else:
                log = self.logs / f"{self._step:02d}-watch-{len(record):02d}-{target}.log"
                code = self._run([*MAKE, *argv[1:]], env, log)
                result = StepResult(code, _tail(log, 12))
                if code == 0 and target == "deploy":
                    self._boot_watch_node()
                elif code == 0 and target == "destroy" and self._sandbox is not None:
                    # The VM is gone, and its processes with it: none may outlive SIGTERM.
                    self._outlived += self._sandbox.stop()
                    self._sandbox = None
            record.append((target, str(digest), self._watch_billing()))
            if target == "deploy" and digest == kill_after_deploy_of:
                killed[0] = True
                raise Killed
            return result

        return step, record

    def _watch_billing(self) -> list[str]:
        node = self.wcfg.node_id
        return [r for r in self.cloud.billing() if f"/{node}" in r]

    def _accept_rows(self, config: Path) -> list[accept.Verdict]:
        """tpudeploy.upstream's own accept_rows (the front door and the key found as `make
        accept` finds them) in a process with the fake cloud's environment."""
        python = str(self.scratch / ".venv" / "bin" / "python")
        code = (
            "import dataclasses, json, sys\nfrom pathlib import Path\n"
            "from tpudeploy.upstream.__main__ import accept_rows\n"
            "rows = accept_rows(Path(sys.argv[1]))\n"
            "print('ROWS ' + json.dumps([dataclasses.asdict(r) for r in rows]))\n"
        )
        log = self.logs / f"{self._step:02d}-watch-accept-rows.log"
        self._run([python, "-c", code, str(config)], {}, log)
        line = next((x for x in log.read_text().splitlines() if x.startswith("ROWS ")), "")
        if not line:
            raise StageFailure(f"the watch's acceptance rows did not run; log: {log}")
        return [accept.Verdict(**row) for row in json.loads(line[5:])]

    def _watch(self, out: Path, step: Step) -> Outcome:
        watched = self.scratch / WATCHED_CONFIG
        base = tomllib.loads(watched.read_text())

        def latest(repository: str, tag: str) -> registry.Release:
            return registry.latest(repository, tag, base_url=self._hub.url)

        with open(self.logs / f"{self._step:02d}-watch-run.log", "w") as log:
            return Watch(
                load_config(watched),
                base,
                out,
                step=step,
                latest=latest,
                accept_rows=self._accept_rows,
                log=log,
            ).run()

    def _after_run(self, out: Path) -> None:
        left = self._watch_billing()
        if left:
            raise StageFailure(f"after the watch run these still bill: {left}")
        if self._sandbox is not None or self._outlived:
            raise StageFailure(
                f"the watch node's processes outlived its destroy: {self._outlived or 'running'}"
            )
        if not (out / VERDICT_JSON).exists():
            raise StageFailure(f"the run filed no verdict in {out}")

    # ---- the stages

    def _watch_killed(self) -> str:
        self._benched: set[str] = set()
        self._hub.publish(REPOSITORY, TAG, BETTER)
        self._watch_out = self.workdir / "watch-out"
        step, record = self._watch_step(kill_after_deploy_of=BETTER)
        try:
            self._watch(self._watch_out, step)
        except Killed:
            pass
        else:
            raise StageFailure("the run was to be killed after its candidate's deploy")
        left = self._watch_billing()
        marker = json.loads((self._watch_out / RUN_FILE).read_text())
        if not left or marker.get("state") != "running":
            raise StageFailure(
                f"killed after deploy: expected the node billing and the marker running, got "
                f"{left} and {marker}"
            )
        steps = " -> ".join(t for t, _, _ in record)
        return f"new digest {BETTER[:12]} published; {steps}, killed: {', '.join(left)} bills"

    def _watch_resumed(self) -> str:
        step, record = self._watch_step()
        outcome = self._watch(self._watch_out, step)
        self._after_run(self._watch_out)
        first = record[0] if record else ("none", "", ["?"])
        if not outcome.resumed or first[0] != "destroy" or first[2]:
            raise StageFailure(
                f"the resumed run must first destroy the killed run's node: resumed "
                f"{outcome.resumed}, first step {first[0]}, billing after it {first[2]}"
            )
        if outcome.status != "proposed" or not (self._watch_out / PR_BODY).exists():
            raise StageFailure(
                f"a better build that passes acceptance must get a PR body: {outcome.status}, "
                f"{outcome.reasons}"
            )
        pin = json.loads((self._watch_out / PIN_JSON).read_text())
        if not pin["new"].endswith(BETTER) or not pin["old"].endswith(PINNED):
            raise StageFailure(f"pin.json pins {pin}, not the better build over the pinned one")
        if self._benched != {PINNED, BETTER}:
            raise StageFailure(f"the sweep measured {self._benched}, not both builds")
        deploys = sum(1 for t, _, _ in record if t == "deploy")
        rows = ", ".join(f"{r['row']} {r['status']}" for r in outcome.accept_rows)
        sweep = outcome.verdict
        return (
            f"resumed: destroyed the killed run's node first; accept rows "
            f"{rows}; "
            f"{deploys} deploys, each node booted; better in {sweep['better_cells']} cell(s), "
            f"worse in {sweep['worse_cells']}: proposed, {PR_BODY} and {PIN_JSON} written; "
            "nothing of the watch bills"
        )

    def _watch_worse(self) -> str:
        self._benched = set()
        self._hub.publish(REPOSITORY, TAG, WORSE)
        out = self.workdir / "watch-out-worse"
        step, record = self._watch_step()
        outcome = self._watch(out, step)
        self._after_run(out)
        if outcome.status != "not-proposed" or (out / PR_BODY).exists():
            raise StageFailure(f"a worse build got {outcome.status}: {outcome.reasons}")
        if not any("worse than the pinned build" in r for r in outcome.reasons):
            raise StageFailure(f"the verdict does not say it is worse: {outcome.reasons}")
        filed = json.loads((out / VERDICT_JSON).read_text())
        deploys = sum(1 for t, _, _ in record if t == "deploy")
        return (
            f"new digest {WORSE[:12]}, {deploys} deploys: worse in "
            f"{filed['sweep']['worse_cells']} cell(s), no PR body, the verdict filed "
            f"({VERDICT_JSON}, verdict.md); nothing of the watch bills"
        )

    def _watch_destroy_all(self) -> str:
        self._hub.__exit__(None, None, None)
        shown = self._watch_make("destroy-all", "AUTO_APPROVE=1")
        wcfg = self.wcfg
        names = set(self._identifiers(wcfg).values())
        left = [r for r in self.cloud.leftovers() if any(n in r for n in names)]
        if left:
            raise StageFailure(f"`{shown}` of the watch deployment left {left}")
        kept = [n for n in self._identifiers(self.cfg).values() if n != self.cfg.node_id]
        gone = [n for n in kept if not any(n in r for r in self.cloud.leftovers())]
        if gone:
            raise StageFailure(f"the watch's destroy-all took the watched deployment's {gone}")
        return f"{shown} ({watch_name(self.cfg)}): the fakes hold nothing of it"
