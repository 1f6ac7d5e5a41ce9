"""`make rehearse PLATFORM=gke`: the GKE lifecycle, `make deploy-secrets` to `make destroy-all`,
through the real cdktf CLI and Terraform, with the stand-in google-beta and kubernetes providers
against the loopback fakes of the GKE API (tools/rehearsal/fakes/container.py) and of the
cluster's Kubernetes API (tools/rehearsal/fakes/k8s.py), which stores every object the serving
stack applies and validates each as the API server would. docs/rehearsal.md says what that
proves and what only a real cluster can.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from tools.rehearsal import schema
from tools.rehearsal.bindings import GOOGLE_BETA, KUBERNETES, Binding
from tools.rehearsal.fakes.inventory import OWNER
from tools.rehearsal.gke_pipeline import GkePipelineStages
from tools.rehearsal.lifecycle import Rehearsal, stack_output
from tools.rehearsal.pipeline import STATE_BUCKET
from tools.rehearsal.scenarios import EXTEND_BY, Stage, StageFailure, _time
from tools.rehearsal.scratch import MAKE, REHEARSAL_PROJECT, _plain, _tail, write_gke_config
from tpudeploy import stopsoon, terraform
from tpudeploy.config import DeployConfig, load_config
from tpudeploy.deadline import GRANT_MARGIN_SECONDS
from tpudeploy.gke import identifiers
from tpudeploy.logmetrics import SPECS
from tpudeploy.platform import platform_for

# The kinds the serving stack applies (stacks/gke/serving.py); the rehearsal checks each landed.
SERVING_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ConfigMap",
    "SecretProviderClass",
    "ComputeClass",
    "Deployment",
    "PodDisruptionBudget",
    "Service",
    "PodMonitoring",
    "HorizontalPodAutoscaler",
)


# What a new project has enabled without asking, of what a GKE deploy reads (Service Usage,
# "Services enabled by default": Cloud Logging API, Cloud Monitoring API, Cloud Storage, ...).
DEFAULT_ENABLED = ("logging.googleapis.com", "monitoring.googleapis.com")


# The second deployment of the same project, network and region (issue 36: two deployments in
# one VPC must not touch each other): another name, the same shipped settings otherwise.
NEIGHBOUR = "gemma4-gke-b"

# Each GKE deployment's dashboard and its log-based metrics (secrets stack: front-door requests
# and its spot pool's preemptions; GKE has no structured boot log) and alert policies (serving
# stack: KV wall, waiting, no server, errors, preempted; no email channel in the rehearsal's
# config), each its own by label or name. The neighbour deploys no serving stack: its dashboard
# and metrics only. Each cluster stack adds its deadline's "stops soon" policy
# (tpudeploy/stopsoon.py), the neighbour's included.
STOPS_SOON = 1
WATCHING = {"dashboards": 1, "alertPolicies": 5 + STOPS_SOON, "metrics": 2}
NEIGHBOUR_WATCHING = {"dashboards": 1, "alertPolicies": STOPS_SOON, "metrics": 2}


@dataclass
class GkeRehearsal(Rehearsal, GkePipelineStages):
    """The TPU VM rehearsal's stages where they are the same (prepare, the secrets), GKE's own
    checks where the platform differs."""

    def __post_init__(self) -> None:
        super().__post_init__()
        # What the run's lines name; the VM provisioning model given to the base is unused.
        self.provisioning = "gke"
        if self.scenario not in ("lifecycle", "pipeline"):
            raise ValueError(
                f"SCENARIO={self.scenario} is rehearsed for PLATFORM=tpu-vm only; GKE has "
                "lifecycle and pipeline"
            )

    def _stages(self) -> list[Stage]:
        # Both scenarios start alike: the secrets and their values, then the three stacks.
        head = [
            Stage("prepare", self._prepare_gke),
            Stage("deploy-secrets", self._deploy_secrets),
            Stage("secret", self._secret),
            Stage("api-key", self._api_key),
            Stage("tls-cert", self._tls_cert),
            Stage("deploy", self._deploy_gke),
        ]
        if self.scenario == "pipeline":
            # The GitOps path: the bootstrap as the owner, then every stack as the deploy
            # identity, then what that identity must not reach (tools/rehearsal/gke_pipeline.py).
            tail = [
                Stage("deploy-again", self._deploy_again_gke),
                Stage("plan", self._plan),
                Stage("cross-deployment", self._cross),
                Stage("destroy", self._destroy_gke),
                Stage("destroy-all", self._destroy_all),
                Stage("no-secret-left", self._no_secret_left),
            ]
            return self.pipeline_stages(head, tail)
        return [
            *head,
            Stage("neighbour", self._neighbour_deploy),
            Stage("deploy-again", self._deploy_again_gke),
            Stage("neighbour-gone", self._neighbour_destroy),
            Stage("extend", self._extend_gke),
            Stage("destroy", self._destroy_gke),
            Stage("destroy-all", self._destroy_all),
            Stage("no-secret-left", self._no_secret_left),
        ]

    # ---- hooks of the shared prepare

    def _write_config(self, port: int, proxy_port: int) -> Path:
        pipeline = self.scenario == "pipeline"
        return write_gke_config(
            self.scratch, state_bucket=STATE_BUCKET if pipeline else "", pipeline=pipeline
        )

    def _kubernetes_schema(self) -> Path | None:
        # Every resource type of the bindings: a new object in the serving stack needs nothing.
        return schema.ensure(None, binding=KUBERNETES)

    def _bindings(self) -> tuple[Binding, ...]:
        return (GOOGLE_BETA, KUBERNETES)

    def _prepare_gke(self) -> str:
        note = self._prepare()
        # The access token google_client_config reports (the real provider's access_token
        # setting): the fake Kubernetes API takes only a token the fake cloud issued.
        self._env["GOOGLE_OAUTH_ACCESS_TOKEN"] = self.cloud.inventory.mint_token(OWNER)
        # A project made with the console or gcloud starts with Cloud Monitoring (and Logging)
        # enabled (https://cloud.google.com/service-usage/docs/enabled-service#default); no
        # stack enables it, and make preflight refuses a GKE deploy without it (the HPA's
        # metric lives there).
        for service in DEFAULT_ENABLED:
            self.cloud.inventory.enable(REHEARSAL_PROJECT, service)
        return note.split(", vLLM on port")[0] + ", stand-in kubernetes 2.38.0"

    # ---- stages

    def _tls_cert(self) -> str:
        """`make tls-cert`: one certificate for every replica (the pods pin nothing of their
        own). Its private key joins the values no file, log or state may hold."""
        shown = self._make("tls-cert")
        versions = self.cloud.secretmanager.values(REHEARSAL_PROJECT, self.cfg.tls_secret_id)
        keys = [
            k
            for v in versions
            for k in re.findall(rb"-----BEGIN PRIVATE KEY-----.+?-----", v, re.S)
        ]
        if not keys:
            raise StageFailure(
                f"`{shown}` stored no certificate and key in {self.cfg.tls_secret_id}"
            )
        self._api_keys = [*self._api_keys, *keys]
        return f"{shown} (one certificate for every replica)"

    def _cluster_key(self) -> str:
        return f"projects/{REHEARSAL_PROJECT}/locations/{self.cfg.zone}/clusters/" + (
            identifiers.cluster_name(self.cfg)
        )

    def _deploy_gke(self) -> str:
        shown = self._make("deploy", approve=True)
        inv, key = self.cloud.inventory, self._cluster_key()
        if inv.get("container", key) is None:
            raise StageFailure(f"`{shown}` passed but the fake GKE API has no cluster {key}")
        pools = sorted(n.rsplit("/", 1)[-1] for n in inv.names("container", key + "/nodePools/"))
        wanted = sorted(
            ["system", *(identifiers.pool_name(c) for c in self.cfg.gke.capacity_order)]
        )
        if pools != wanted:
            raise StageFailure(f"node pools {pools}, expected {wanted}")
        kinds = sorted({obj["kind"] for obj in self.cloud.kubernetes.objects().values()})
        missing = [k for k in SERVING_KINDS if k not in kinds]
        if missing:
            raise StageFailure(f"the cluster lacks {missing}; it holds {kinds}")
        stored, declared = len(self.cloud.kubernetes.objects()), self._declared_objects()
        if stored != declared:
            raise StageFailure(
                f"the serving stack declares {declared} Kubernetes objects; the fake API holds "
                f"{stored}: {sorted(self.cloud.kubernetes.objects())}"
            )
        unchecked = sorted(self.cloud.kubernetes.unchecked)
        self._skipped += [f"{kind} (no published schema)" for kind in unchecked]
        return (
            f"{shown}: cluster, pools {', '.join(pools)}; {stored} objects stored and validated, "
            f"all {declared} the serving stack declares"
            + (f" (no schema at hand for {', '.join(unchecked)})" if unchecked else "")
        )

    def _declared_objects(self) -> int:
        """How many Kubernetes objects the synthesized serving stack declares: each typed
        kubernetes_* resource, and each kubernetes_manifest, is one object."""
        stack = self.scratch / terraform.synth_outdir(self.cfg) / "stacks"
        body = json.loads((stack / self.cfg.serving_stack_name / "cdk.tf.json").read_text())
        resources = body.get("resource", {}).items()
        return sum(len(v) for t, v in resources if t.startswith("kubernetes_"))

    def _deploy_again_gke(self) -> str:
        before = self.cloud.call_count()
        shown = self._make("deploy", approve=True)
        changed = self.cloud.mutations(before)
        text = _plain((self.logs / f"{self._step:02d}-deploy.log").read_text())
        stacks = (self.cfg.secrets_stack_name, self.cfg.gke_stack_name, self.cfg.serving_stack_name)
        by_stack = stack_output(text, stacks)
        unchanged = [s for s, out in by_stack.items() if re.search(r"^No changes\.", out, re.M)]
        planned = [line.strip() for line in text.splitlines() if re.search(r"Plan: \d", line)]
        if changed or planned or len(unchanged) != len(stacks):
            raise StageFailure(
                f"the second `{shown}` was not a no-op: plans {planned or 'none shown'}, "
                f"'No changes.' for {unchanged or 'no stack'}, API changes {changed[:5] or 'none'}"
            )
        return f"{shown}: no changes planned for the three stacks, no API call changed anything"

    def _extend_gke(self) -> str:
        """`make extend`: the cluster stack's deadline moves, and its job with it, with nothing
        else changed. The deadline hangs on the cluster's id, so the narrow apply plans the
        cluster too: a cluster as deployed must plan no change there, or extend would refuse."""
        before = _time(self._job().get("scheduleTime"))
        calls = self.cloud.call_count()
        shown = self._make("extend", args=(f"BY={int(EXTEND_BY.total_seconds() // 60)}m",))
        after = _time(self._job().get("scheduleTime"))
        # The jobs, the stop account's grant whose condition ends with the deadline (a project
        # setIamPolicy: stacks/deadline_job.py) and the "stops soon" policy, whose filter ends
        # with the deadline too (an update in place: tpudeploy/stopsoon.py).
        with self.cloud.inventory.locked() as inv:
            title = f"{self.cfg.name}: {stopsoon.DEADLINE_SOON[1]}"
            soon = [
                n
                for n in inv.names("monitoring")
                if (inv.get("monitoring", n) or {}).get("displayName") == title
            ]
        changed = [
            m
            for m in self.cloud.mutations(calls)
            if not m.startswith("cloudscheduler ")
            and not (m.startswith("cloudresourcemanager ") and m.endswith(":setIamPolicy"))
            and m not in {f"monitoring PATCH /v3/{n}" for n in soon}
        ]
        if after != before + EXTEND_BY or changed:
            raise StageFailure(
                f"`{shown}` moved the deadline from {before} to {after} and changed "
                f"{changed[:5] or 'nothing else'}"
            )
        ends = (after + timedelta(seconds=GRANT_MARGIN_SECONDS)).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self.cloud.inventory.locked() as inv:
            policy = inv.policy("cloudresourcemanager", f"projects/{REHEARSAL_PROJECT}")
            conditions = [str((b.get("condition") or {}).get("expression")) for b in policy]
        if not any(ends in c for c in conditions):
            raise StageFailure(f"`{shown}` left the stop grant's end elsewhere than {ends}")
        with self.cloud.inventory.locked() as inv:
            filters = [str(inv.get("monitoring", n)) for n in soon]
        if len(filters) != 1 or after.strftime("%Y-%m-%dT%H:%M:00Z") not in filters[0]:
            raise StageFailure(f"`{shown}` left the warning's time bound elsewhere: {filters}")
        return (
            f"{shown}: deadline {before:%H:%M} -> {after:%H:%M} UTC, only the jobs, the stop "
            f"grant (now ending {ends}) and the warning's time bound changed"
        )

    def _destroy_gke(self) -> str:
        shown = self._make("destroy", approve=True)
        left = self.cloud.kubernetes.objects()
        if left:
            raise StageFailure(f"`{shown}` passed but the cluster still holds {sorted(left)[:5]}")
        # With no pod asking for a TPU the autoscaler removes the TPU nodes (not rehearsed: the
        # fake has no nodes); the cluster and its pools stay until make destroy-all.
        return f"{shown}: no serving object left; the cluster stays for make destroy-all"

    # ---- a second deployment in the same project, VPC and region

    def _neighbour_cfg(self) -> DeployConfig:
        return load_config(self.scratch / "neighbour.toml")

    def _neighbour_run(self, label: str, command: list[str]) -> str:
        """`command` in the scratch copy with the neighbour's config; logs/NN-LABEL.log."""
        env = {**self._env, "DEPLOY_CONFIG": str(self.scratch / "neighbour.toml")}
        log = self.logs / f"{self._step:02d}-{label}.log"
        with open(log, "w") as handle:
            proc = subprocess.run(
                command,
                cwd=self.scratch,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=900,
                check=False,
            )
        shown = " ".join(command)
        if proc.returncode != 0:
            raise StageFailure(f"`{shown}` exited {proc.returncode}; log: {log}\n{_tail(log)}")
        return shown

    def _cdktf_deploy(self, cfg: DeployConfig, stack: str) -> list[str]:
        """One stack, as make destroy-all deploys its protected stacks (its dependency, the
        secrets stack, applied just before by make deploy-secrets)."""
        outdir = str(terraform.synth_outdir(cfg))
        return ["node_modules/.bin/cdktf", "deploy", "--output", outdir, stack,
                "--ignore-missing-stack-dependencies", "--auto-approve"]  # fmt: skip

    def _neighbour_deploy(self) -> str:
        """A second deployment (another name; same project, network default, region) deploys
        its secrets and cluster stacks beside the first, which keeps serving: NAT, router,
        cluster and control-plane range of its own. Its serving stack is left out (the fake
        Kubernetes API serves one cluster), which keeps the stage short."""
        write_gke_config(self.scratch, name=NEIGHBOUR, file="neighbour.toml", nat=False)
        cfg = self._neighbour_cfg()
        # The lock file the prepare stage computed offline for both providers
        # (tools/rehearsal/mirror.lock_file); a stack's own lock keeps only its providers.
        names = "-".join(b.name for b in self._bindings())
        lock = self.workdir / "terraform" / f"lock-{names}" / ".terraform.lock.hcl"
        for stack in platform_for(cfg).stacks(cfg):
            folder = self.scratch / terraform.synth_outdir(cfg) / "stacks" / stack
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(lock, folder / ".terraform.lock.hcl")
        self._neighbour_run("neighbour-deploy-secrets", [*self._make_argv("deploy-secrets")])
        self._neighbour_run("neighbour-deploy", self._cdktf_deploy(cfg, cfg.gke_stack_name))
        inv = self.cloud.inventory
        clusters = [
            n
            for n in inv.names("container", f"projects/{REHEARSAL_PROJECT}/locations/")
            if "/clusters/" in n and "/nodePools/" not in n
        ]
        mine = self._cluster_key()
        theirs = mine.rsplit("/", 1)[0] + "/" + identifiers.cluster_name(cfg)
        if sorted(clusters) != sorted([mine, theirs]):
            raise StageFailure(
                f"expected the clusters {mine} and {theirs}; the fake has {clusters}"
            )
        ranges = {
            k: (inv.get("container", k) or {})
            .get("privateClusterConfig", {})
            .get("masterIpv4CidrBlock")
            for k in clusters
        }
        nats = self._nats()
        watching = {name: self._watching(name) for name in (self.cfg.name, cfg.name)}
        if watching != {self.cfg.name: WATCHING, cfg.name: NEIGHBOUR_WATCHING}:
            raise StageFailure(f"expected {WATCHING} and {NEIGHBOUR_WATCHING}; found {watching}")
        return (
            f"{NEIGHBOUR}: secrets and cluster stacks beside {self.cfg.name} in network "
            f"{cfg.network.network}, {cfg.effective_region}; control planes "
            f"{', '.join(sorted(str(r) for r in ranges.values()))}; NATs {', '.join(nats)}; "
            f"{self.cfg.name}'s dashboard, log-based metrics and {WATCHING['alertPolicies']} "
            f"alert policies, {cfg.name}'s own dashboard, metrics and deadline warning"
        )

    def _watching(self, deployment: str) -> dict[str, int]:
        """The Monitoring objects labelled with `deployment`, by collection, and the log-based
        metrics named after it (a LogMetric has no labels: its name carries the deployment's)."""
        inv = self.cloud.inventory
        found: dict[str, int] = {}
        for key in inv.names("logging", f"projects/{REHEARSAL_PROJECT}/metrics/{deployment}-"):
            # gemma4-gke-... is also a prefix of gemma4-gke-b-...: keep the deployment's own.
            rest = key.rsplit("/", 1)[-1].removeprefix(f"{deployment}-")
            if rest in {spec.key for spec in SPECS}:
                found["metrics"] = found.get("metrics", 0) + 1
        for key in inv.names("monitoring", f"projects/{REHEARSAL_PROJECT}/"):
            obj = inv.get("monitoring", key) or {}
            if {**obj.get("labels", {}), **obj.get("userLabels", {})}.get("deployment") == (
                deployment
            ):
                collection = key.split("/")[2]
                found[collection] = found.get(collection, 0) + 1
        return found

    def _make_argv(self, target: str) -> list[str]:
        return [*MAKE, target, "AUTO_APPROVE=1"]

    def _nats(self) -> list[str]:
        prefix = f"projects/{REHEARSAL_PROJECT}/regions/{self.cfg.effective_region}/routers/"
        inv = self.cloud.inventory
        return sorted(
            str(nat.get("name"))
            for key in inv.names("compute", prefix)
            for nat in (inv.get("compute", key) or {}).get("nats", [])
        )

    def _neighbour_destroy(self) -> str:
        """The neighbour goes (protection lifted, then its cluster and secrets stacks); the
        first deployment's cluster, pools, NAT and serving objects stay as they were."""
        cfg = self._neighbour_cfg()
        before = len(self.cloud.kubernetes.objects())
        # The user's path: make destroy-all lifts the protection, then destroys every stack (the
        # serving stack, never deployed here, has nothing to destroy). A cdktf destroy of the
        # cluster and secrets stacks alone waits for the serving stack, which depends on them.
        self._neighbour_run("neighbour-destroy-all", self._make_argv("destroy-all"))
        inv = self.cloud.inventory
        left = [k for k in inv.objects if cfg.name + "-" in k or k.endswith("/" + cfg.name)]
        if left:
            raise StageFailure(f"the neighbour's destroy left {sorted(left)[:5]}")
        if inv.get("container", self._cluster_key()) is None or self._nats() != [
            identifiers.nat_name(self.cfg)
        ]:
            raise StageFailure(
                f"the neighbour's destroy touched {self.cfg.name}: NATs now {self._nats()}"
            )
        if len(self.cloud.kubernetes.objects()) != before:
            raise StageFailure(f"the neighbour's destroy changed {self.cfg.name}'s cluster objects")
        if self._watching(cfg.name) or self._watching(self.cfg.name) != WATCHING:
            raise StageFailure(
                f"after the neighbour's destroy: its Monitoring objects "
                f"{self._watching(cfg.name)}, {self.cfg.name}'s {self._watching(self.cfg.name)}"
            )
        return f"{NEIGHBOUR} destroyed; {self.cfg.name}'s cluster, NAT and {before} objects intact"
