"""The dress rehearsal: the README's deploy path, `make deploy-secrets` to `make destroy-all`, run
for real (the cdktf CLI, Terraform, the project's own clients) against the loopback fake cloud,
in a scratch copy of the repository."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import socket
import string
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tools.rehearsal import schema
from tools.rehearsal.bindings import GOOGLE_BETA, Binding
from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.fakes.metadata import FakeMetadata
from tools.rehearsal.idle_stage import IdleStages
from tools.rehearsal.keys_stage import KeysStages
from tools.rehearsal.mirror import lock_file, write_mirror
from tools.rehearsal.pipeline import STATE_BUCKET, PipelineStages, local_state_override
from tools.rehearsal.sandbox import BootSandbox, nginx_binary, sha256
from tools.rehearsal.scenarios import LADDER_ZONES, ScenarioStages, Stage, StageFailure
from tools.rehearsal.scratch import (
    MAKE,
    REHEARSAL_PROJECT,
    _plain,
    _tail,
    copy_repository,
    free_port,
    install_post_synth,
    write_config,
    write_user_credentials,
)
from tools.rehearsal.watch_stage import WatchStages
from tpudeploy import terraform
from tpudeploy.config import DeployConfig, load_config
from tpudeploy.config.secretshape import HF_TOKEN_RE
from tpudeploy.names import service_account_email
from tpudeploy.platform import platform_for
from tpudeploy.tlscert import fingerprints

PROVISIONING_MODELS = ("flex-start", "spot", "on-demand")
# lifecycle: deploy-secrets to destroy-all. preemption and deadline (spot, on-demand): the node
# preempted and recovered by `make recover`; the deadline job fired (tools/rehearsal/scenarios.py).
# pipeline: the GitOps deploy applied as the deploy identity (tools/rehearsal/pipeline.py).
# ladder (spot, on-demand): a capacity ladder whose first zone is out of stock.
# idle (any provisioning): the idle node ends its own billing (tools/rehearsal/idle_stage.py).
SCENARIOS = ("lifecycle", "preemption", "deadline", "pipeline", "ladder", "idle")
VM_SCENARIOS = ("preemption", "deadline", "ladder", "idle")
REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DEAD_PROXY = "http://127.0.0.1:9"
_DROPPED_ENV = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GOOGLE_CLOUD_PROJECT", "DEPLOY_CONFIG")


@dataclass
class Rehearsal(ScenarioStages, PipelineStages, KeysStages, IdleStages, WatchStages):
    provisioning: str
    workdir: Path
    out: TextIO = sys.stdout
    scenario: str = "lifecycle"
    post_synth: str | None = None
    repo: Path = REPO_ROOT
    scratch: Path = field(init=False)
    logs: Path = field(init=False)

    def __post_init__(self) -> None:
        if self.provisioning not in PROVISIONING_MODELS:
            raise ValueError(
                f"PROVISIONING={self.provisioning!r} is not a provisioning model: use one of "
                f"{', '.join(PROVISIONING_MODELS)}"
            )
        if self.scenario not in SCENARIOS:
            raise ValueError(
                f"SCENARIO={self.scenario!r} is not rehearsed yet: use one of "
                f"{', '.join(SCENARIOS)}"
            )
        # The idle stop runs on flex-start too (its node deletes its queued resource).
        if (
            self.scenario in VM_SCENARIOS
            and self.scenario != "idle"
            and (self.provisioning == "flex-start")
        ):
            raise ValueError(
                f"SCENARIO={self.scenario} rehearses a spot or on-demand node (its preemption, "
                "its deadline job): use PROVISIONING=spot or on-demand"
            )
        if self.scenario == "pipeline" and self.provisioning == "flex-start":
            raise ValueError(
                "SCENARIO=pipeline rehearses the provider's calls as the deploy identity; "
                "flex-start's queued resource is made by a local-exec client: use "
                "PROVISIONING=spot or on-demand"
            )
        self.scratch = self.workdir / "repo"
        self.logs = self.workdir / "logs"
        # A token of the real format (tpudeploy.config.secretshape): make secret and the node
        # refuse anything else.
        alphabet = string.ascii_letters + string.digits
        self._token = "hf_" + "".join(secrets.choice(alphabet) for _ in range(34))
        assert HF_TOKEN_RE.match(self._token)
        self._env: dict[str, str] = {}
        self._cloud: FakeCloud | None = None
        self._sandbox: BootSandbox | None = None
        self._cfg: DeployConfig | None = None
        self._step = 0
        self._api_keys: list[bytes] = []
        # The base64 lines of every TLS private key `make tls-cert` stored (no-secret-left), and
        # the SHA-256 of the certificate every node of the deployment must serve.
        self._tls_keys: list[bytes] = []
        self._tls_sha256 = ""
        # What a stage could not check (a custom resource with no published schema): the last
        # line says it, so "passed" never hides a skip.
        self._skipped: list[str] = []
        self._config_path = self.scratch / "deploy.toml"

    # ---- running

    def run(self) -> int:
        """Every stage in order; 0 when all pass, 1 at the first that fails."""
        start = time.monotonic()
        print(
            f"rehearsal: {self.provisioning} {self.scenario} in {self.workdir}",
            file=self.out,
            flush=True,
        )
        try:
            with FakeCloud() as cloud:
                self._cloud = cloud
                cloud.hub_accepts(self._token)  # as if its account accepted the licences
                for stage in self._stages():
                    if not self._run_stage(stage):
                        print(
                            f"rehearsal FAILED at stage {stage.name} ({self.provisioning}); logs "
                            f"and the scratch copy are kept in {self.workdir}",
                            file=self.out,
                            flush=True,
                        )
                        return 1
        finally:
            if self._sandbox is not None:
                self._sandbox.stop()
        print(
            f"rehearsal passed: {self.provisioning} {self.scenario}, "
            f"{self._step} stages in {time.monotonic() - start:.1f} s"
            + (f"; not checked: {'; '.join(self._skipped)}" if self._skipped else ""),
            file=self.out,
            flush=True,
        )
        return 0

    def _run_stage(self, stage: Stage) -> bool:
        self._step += 1
        start = time.monotonic()
        try:
            note = stage.run()
        except StageFailure as exc:
            elapsed = time.monotonic() - start
            print(f"  {stage.name:<15} FAILED {elapsed:6.1f} s  {exc}", file=self.out, flush=True)
            return False
        elapsed = time.monotonic() - start
        print(f"  {stage.name:<15} ok     {elapsed:6.1f} s  {note}", file=self.out, flush=True)
        return True

    def _stages(self) -> list[Stage]:
        head = [
            Stage("prepare", self._prepare),
            Stage("deploy-secrets", self._deploy_secrets),
            Stage("secret", self._secret),
            Stage("api-key", self._api_key),
            Stage("tls-cert", self._tls_cert),
            Stage("deploy", self._deploy),
        ]
        if self.scenario == "preemption":
            return head + self.preemption_stages()
        if self.scenario == "deadline":
            return head + self.deadline_stages()
        if self.scenario == "ladder":
            return head[:-1] + self.ladder_stages()
        if self.scenario == "idle":
            return head + self.idle_stages()
        tail = [
            Stage("boot", self._boot),
            Stage("wait", lambda: self._make("wait")),
            Stage("smoke", lambda: self._make("smoke")),
            Stage("accept", lambda: self._make("accept")),
            Stage("keys", self._keys),
            Stage("status", self._status),
            Stage("deploy-again", self._deploy_again),
            # A VM's metadata is patched in place and its startup script runs at boot only: a
            # changed [vllm] setting must reach the node as a new node (issue 21).
            *(
                [Stage("change-config", self._change_config)]
                if self.provisioning != "flex-start"
                else []
            ),
            Stage("destroy", self._destroy),
            # Issue 40: the upstream watch end to end on its own flex-start deployment
            # (tools/rehearsal/watch_stage.py), beside the watched one's secrets.
            *(self.watch_stages() if self.provisioning == "flex-start" else []),
            Stage("destroy-all", self._destroy_all),
            Stage("no-secret-left", self._no_secret_left),
        ]
        if self.scenario == "pipeline":
            return self.pipeline_stages(head, tail)
        return [*head, *tail]

    @property
    def cloud(self) -> FakeCloud:
        assert self._cloud is not None
        return self._cloud

    @property
    def cfg(self) -> DeployConfig:
        assert self._cfg is not None
        return self._cfg

    def _make(
        self,
        target: str,
        *,
        stdin: str | None = None,
        approve: bool = False,
        args: tuple[str, ...] = (),
    ) -> str:
        """`make TARGET` in the scratch copy; its output goes to logs/NN-TARGET.log."""
        command = [*MAKE, target, *args, *(["AUTO_APPROVE=1"] if approve else [])]
        shown = " ".join(["make", target, *args]) + (" AUTO_APPROVE=1" if approve else "")
        log = self.logs / f"{self._step:02d}-{target}.log"
        with open(log, "w") as handle:
            proc = subprocess.run(
                command,
                cwd=self.scratch,
                env=self._env,
                input=stdin,
                stdout=handle,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=900,
                check=False,
            )
        if proc.returncode != 0:
            raise StageFailure(f"`{shown}` exited {proc.returncode}; log: {log}\n{_tail(log)}")
        return shown

    # ---- stages

    def _prepare(self) -> str:
        for tool in ("terraform", "curl", "openssl", "timeout", "bash", "make"):
            if shutil.which(tool) is None:
                raise StageFailure(
                    f"{tool} is not on PATH: the rehearsal runs the real one (Terraform 1.11.4; "
                    "curl and openssl, as the node's boot script does)"
                )
        if nginx_binary() is None:
            raise StageFailure(
                "nginx is not installed: the node's front door runs for real (apt-get install "
                "nginx, as .ci/system-packages does)"
            )
        for folder in (self.scratch, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        copy_repository(self.repo, self.scratch)
        port, proxy_port = free_port(), free_port()
        config = self._write_config(port, proxy_port)
        self._cfg = load_config(config)
        self._config_path = config
        python = str(self.scratch / ".venv" / "bin" / "python")
        if self.post_synth:
            install_post_synth(self.scratch, self.post_synth, python)
        schema_file = schema.stand_in_schema()
        cli_config = write_mirror(
            self.workdir / "terraform",
            python=python,
            repo=self.scratch,
            schema=schema_file,
            kubernetes_schema=self._kubernetes_schema(),
        )
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        env = {k: v for k, v in env.items() if not k.startswith("TF_VAR_")}
        env.update(self.cloud.environment())
        env.update(
            DEPLOY_CONFIG=str(config),
            TF_CLI_CONFIG_FILE=str(cli_config),
            # The cdktf CLI points Terraform at ~/.terraform.d/plugin-cache unless told
            # otherwise: the stand-in must never land in the user's provider cache.
            TF_PLUGIN_CACHE_DIR=str(self.workdir / "terraform" / "plugin-cache"),
            TF_IN_AUTOMATION="1",
            CHECKPOINT_DISABLE="1",
            DISABLE_VERSION_CHECK="1",
            CI="1",
        )
        # Belt and braces: an HTTPS request (the registry, a real Google API) goes to a closed
        # loopback port instead of the network; Terraform, Node and Python clients read these.
        # The fakes speak plain HTTP on loopback, which needs no proxy variable at all.
        for name in ("HTTPS_PROXY", "https_proxy"):
            env[name] = DEAD_PROXY
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            env.pop(name, None)
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
        # The user's own credentials, as `gcloud auth application-default login` writes them:
        # `make preflight` requires them before deploy, diff and destroy. The fakes take every
        # client by its emulator variable, so no token is ever asked for.
        env.update(
            GOOGLE_APPLICATION_CREDENTIALS=str(write_user_credentials(self.workdir)),
            CLOUDSDK_CONFIG=str(self.workdir / "gcloud"),
            NO_GCE_CHECK="true",
        )
        self._env = env
        (self.workdir / "terraform" / "plugin-cache").mkdir(parents=True, exist_ok=True)
        lock = lock_file(self.workdir / "terraform", env=env, bindings=self._bindings())
        for stack in platform_for(self.cfg).stacks(self.cfg):
            folder = self.scratch / terraform.synth_outdir(self.cfg) / "stacks" / stack
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy(lock, folder / ".terraform.lock.hcl")
            if self.scenario == "pipeline":
                local_state_override(folder, self.scratch)
        return (
            f"scratch copy, stand-in google-beta from {schema_file.name}, vLLM on port {port} "
            f"behind the proxy on {proxy_port}"
        )

    # ---- what a platform's rehearsal (tools/rehearsal/gke.py) changes

    def _write_config(self, port: int, proxy_port: int) -> Path:
        state_bucket = STATE_BUCKET if self.scenario == "pipeline" else ""
        return write_config(
            self.scratch,
            provisioning=self.provisioning,
            port=port,
            proxy_port=proxy_port,
            state_bucket=state_bucket,
            pipeline=bool(state_bucket),
            ladder=LADDER_ZONES if self.scenario == "ladder" else (),
            idle_stop_after="30m" if self.scenario == "idle" else "",
        )

    def _kubernetes_schema(self) -> Path | None:
        return None

    def _bindings(self) -> tuple[Binding, ...]:
        return (GOOGLE_BETA,)

    def _deploy_secrets(self) -> str:
        shown = self._make("deploy-secrets", approve=True)
        cfg, inv = self.cfg, self.cloud.inventory
        expected = [
            ("iam", f"projects/{REHEARSAL_PROJECT}/serviceAccounts/{self._account()}"),
            ("secretmanager", f"projects/{REHEARSAL_PROJECT}/secrets/{cfg.hf_token_secret_id}"),
            # Every [access] client's key secret, not only the first's.
            *(
                ("secretmanager", f"projects/{REHEARSAL_PROJECT}/secrets/{secret}")
                for secret in cfg.client_key_secret_ids.values()
            ),
            ("storage", f"b/{cfg.compile_cache_bucket(REHEARSAL_PROJECT)}"),
        ]
        missing = [f"{api}/{name}" for api, name in expected if inv.get(api, name) is None]
        if missing:
            raise StageFailure(f"`{shown}` passed but the fake cloud lacks {missing}")
        return shown

    def _account(self) -> str:
        return service_account_email(self.cfg.service_account_id, REHEARSAL_PROJECT)

    def _secret(self) -> str:
        shown = self._make("secret", stdin=self._token + "\n")
        stored = self.cloud.secretmanager.values(REHEARSAL_PROJECT, self.cfg.hf_token_secret_id)
        if stored[-1:] != [self._token.encode()]:
            raise StageFailure(f"`{shown}` did not store the token piped to it")
        # Then it asks the (loopback) Hub whether this token may download the model.
        asked = [
            r["path"] for r in self.cloud.hub.requests if r["authorization"].endswith(self._token)
        ]
        if f"/api/models/{self.cfg.vllm.model}/auth-check" not in asked:
            raise StageFailure(
                f"`{shown}` did not ask the Hub about {self.cfg.vllm.model}: {asked}"
            )
        return f"{shown} (token on stdin; the Hub asked {len(asked)} times with it)"

    def _tls_cert(self) -> str:
        """`make tls-cert`: the deployment's one front-door certificate, stored before the first
        node boots; a second run without ROTATE=1 must change nothing (agents pin it)."""
        shown = self._make("tls-cert")
        versions = self.cloud.secretmanager.values(REHEARSAL_PROJECT, self.cfg.tls_secret_id)
        if len(versions) != 1:
            raise StageFailure(f"`{shown}` stored {len(versions)} versions, not one")
        again = subprocess.run(
            [*MAKE, "tls-cert"],
            cwd=self.scratch,
            env=self._env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        after = self.cloud.secretmanager.values(REHEARSAL_PROJECT, self.cfg.tls_secret_id)
        if again.returncode == 0 or after != versions or "ROTATE=1" not in again.stderr:
            raise StageFailure(
                "a second `make tls-cert` must refuse (exit non-zero, naming ROTATE=1) and add "
                f"nothing: exit {again.returncode}, {len(after)} versions"
            )
        self._remember_tls(versions[0])
        return f"{shown} (stored once; a second run refused without ROTATE=1)"

    def _remember_tls(self, version: bytes) -> None:
        begin = version.index(b"-----BEGIN PRIVATE KEY-----")
        self._tls_keys += [
            line for line in version[begin:].splitlines() if line and not line.startswith(b"-----")
        ]
        self._tls_sha256 = fingerprints(version[:begin].decode())["sha256"]

    def _served_sha256(self) -> str:
        """The SHA-256 of the certificate the node's front door serves now (a TLS handshake
        on its port: what an agent's pin is checked against)."""
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the fingerprint is the check
        try:
            with (
                socket.create_connection(("127.0.0.1", self.cfg.proxy.port), timeout=10) as raw,
                context.wrap_socket(raw, server_hostname="localhost") as tls,
            ):
                der = tls.getpeercert(binary_form=True)
        except OSError as exc:
            raise StageFailure(f"the node's front door did not answer TLS: {exc}") from None
        if not der:
            raise StageFailure("the node's front door sent no certificate")
        return hashlib.sha256(der).hexdigest()

    def _check_served_certificate(self, node: str) -> str:
        """The node serves the certificate `make tls-cert` stored, whichever node it is."""
        served = self._served_sha256()
        if served != self._tls_sha256:
            raise StageFailure(
                f"{node} serves the certificate {served[:16]}..., not the deployment's stored "
                f"one {self._tls_sha256[:16]}...: every agent's pin would break"
            )
        return served

    def _deploy(self) -> str:
        shown = self._make("deploy", approve=True)
        node = self.cloud.tpu.node(self._node_name())
        if node is None:
            raise StageFailure(
                f"`{shown}` passed but the fake TPU API has no node {self._node_name()}"
            )
        return f"{shown}: {', '.join(self.cloud.billing())}"

    def _node_name(self) -> str:
        return f"projects/{REHEARSAL_PROJECT}/locations/{self.cfg.zone}/nodes/{self.cfg.node_id}"

    def _boot(self, disk: str = "node") -> str:
        self._boot_node(
            self._node_name(), disk, extra_env=self.idle_env() if self.scenario == "idle" else None
        )
        self._check_served_certificate(disk)
        assert self._sandbox is not None
        problems = self._sandbox.agent_problems()
        if problems:
            raise StageFailure(f"the node's Ops Agent config would not run: {problems}")
        return (
            "startup script from the node's metadata: vLLM ready behind the TLS proxy serving "
            "the stored certificate, compile cache saved, Ops Agent configured (installer: a "
            "stand-in, offline)"
        )

    def _boot_node(
        self, node_name: str, disk: str, *, extra_env: dict[str, str] | None = None
    ) -> BootSandbox:
        """The node's VM boots: its startup script, read from its metadata in the fake TPU API,
        runs once in a new BootSandbox under workdir/DISK, with a metadata server of its own
        (it lives as long as the VM: the key poller gets its token there). The previous VM is
        gone, and its processes with it. The lifecycle's node and the watch's (watch_stage.py)
        both boot here."""
        node = self.cloud.tpu.node(node_name) or {}
        script = (node.get("metadata") or {}).get("startup-script")
        if not script:
            raise StageFailure(f"node {node_name} has no startup-script in its metadata")
        if self._sandbox is not None:
            self._sandbox.stop()
        self._sandbox = sandbox = BootSandbox(self.workdir / disk)
        metadata = FakeMetadata(
            inventory=self.cloud.inventory, tpu=self.cloud.tpu, node_name=node_name
        ).start()
        sandbox.companions.append(metadata)
        result = sandbox.boot(
            script,
            metadata_url=metadata.url,
            secretmanager_host=self.cloud.secretmanager.host,
            storage_host=self.cloud.storage.host,
            hf_token_sha256=sha256(self._token),
            internet=self._internet(node),
            extra_env=extra_env,
        )
        if result.returncode != 0:
            raise StageFailure(
                f"the startup script of {node_name} exited {result.returncode}; log: "
                f"{result.log}\n{_tail(result.log)}"
            )
        return sandbox

    def _internet(self, node: dict[str, object]) -> bool:
        """What the node reaches beyond Google APIs: everything with an external address, else
        only what a Cloud NAT for its subnetwork in its region carries."""
        network = node.get("networkConfig") or {}
        assert isinstance(network, dict)
        if network.get("enableExternalIps", True):
            return True
        subnetwork = str(network.get("subnetwork") or network.get("network") or "default")
        return self.cloud.compute.nat_serves(
            REHEARSAL_PROJECT, self.cfg.effective_region, subnetwork
        )

    def _status(self) -> str:
        shown = self._make("status")
        text = (self.logs / f"{self._step:02d}-status.log").read_text()
        wanted = "ACTIVE" if self.provisioning == "flex-start" else "READY"
        if wanted not in text:
            raise StageFailure(f"`{shown}` did not report the node {wanted}")
        return shown

    def _deploy_again(self) -> str:
        before = self.cloud.call_count()
        shown = self._make("deploy", approve=True)
        changed = self.cloud.mutations(before)
        text = _plain((self.logs / f"{self._step:02d}-deploy.log").read_text())
        planned = [line.strip() for line in text.splitlines() if re.search(r"Plan: \d", line)]
        by_stack = stack_output(text, (self.cfg.secrets_stack_name, self.cfg.node_stack_name))
        unchanged = [
            stack for stack, out in by_stack.items() if re.search(r"^No changes\.", out, re.M)
        ]
        if changed or planned or len(unchanged) != 2:
            raise StageFailure(
                f"the second `{shown}` was not a no-op: plans {planned or 'none shown'}, "
                f"'No changes.' for {unchanged or 'no stack'}, API changes {changed[:5] or 'none'}"
            )
        return f"{shown}: no changes planned, no API call changed anything"

    def _destroy(self) -> str:
        shown = self._make("destroy", approve=True)
        # The VM is gone, and its containers and key poller with it: none may outlive SIGTERM.
        left = self._sandbox.stop() if self._sandbox is not None else []
        # One owner: the VM is gone, so nothing (a later boot, run()'s `finally`) stops it again.
        self._sandbox = None
        if left:
            raise StageFailure(f"the node's {left} still ran after SIGTERM (killed)")
        left = self.cloud.billing()
        if left:
            raise StageFailure(f"`{shown}` passed but these still bill: {left}")
        return f"{shown}: no queued resource, no node"

    def _destroy_all(self) -> str:
        shown = self._make("destroy-all", approve=True)
        left = self.cloud.leftovers()
        if left:
            raise StageFailure(f"`{shown}` passed but the fake cloud still holds {left}")
        return f"{shown}: nothing left but the enabled APIs"

    def _no_secret_left(self) -> str:
        values = [self._token.encode(), *self._api_keys, *self._tls_keys]
        found = []
        for path in self.workdir.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                if any(value in data for value in values):
                    found.append(str(path.relative_to(self.workdir)))
        if found:
            raise StageFailure(f"a secret value was written to {found}")
        return "no token, API key or TLS key in any file, log, state or argument record"

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def stack_output(text: str, stacks: Sequence[str]) -> dict[str, str]:
    """Each stack's lines of a cdktf CLI log, without the prefix. The CLI names the stack only
    when the output switches to it: an indented line continues the last stack named, so a
    stack's "No changes." may come without its name when nothing else was printed between."""
    out: dict[str, list[str]] = {stack: [] for stack in stacks}
    current: str | None = None
    for line in text.splitlines():
        named = next((s for s in stacks if re.match(rf"{re.escape(s)}(\s|$)", line)), None)
        if named is not None:
            current = named
            out[named].append(line[len(named) :].strip())
        elif current is not None and (not line or line[0].isspace()):
            out[current].append(line.strip())
        else:
            current = None  # make's own lines, or another command's
    return {stack: "\n".join(lines) for stack, lines in out.items()}
