"""`make rehearse PLATFORM=gke SCENARIO=pipeline`: the GitOps deploy of a GKE deployment, its three
stacks applied as the deployment's own deploy identity (tools/rehearsal/pipeline.py says how the
bootstrap's outcome is made and what stays outside), then what that identity must NOT reach:
another GKE deployment's cluster, Kubernetes objects, secrets and cache, and a TPU VM
deployment's, each asked of the fakes with the neighbour's token and refused by IAM's rules
(tools/rehearsal/fakes/iamrules.py), with the owner's own view as the control.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tools.rehearsal.lifecycle import stack_output
from tools.rehearsal.pipeline import TOKEN_ENV, bootstrap, bootstrap_plan
from tools.rehearsal.scenarios import StageFailure, StageHost
from tools.rehearsal.scratch import REHEARSAL_PROJECT, _plain, write_gke_config
from tpudeploy.config import DeployConfig, load_config, parse_config
from tpudeploy.gke import identifiers
from tpudeploy.platform import platform_for

# The other deployments of the same project the cross-deployment stage bootstraps: a second GKE
# deployment and a TPU VM one, each with its own deploy identity.
GKE_NEIGHBOUR = "gemma4-gke-c"
VM_NEIGHBOUR = "gemma4-vm-d"


def _as(token: str, host: str, method: str, path: str, body: Any = None) -> int:
    """One call to a fake with `token`; its HTTP status."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{host}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


class GkePipelineStages(StageHost):
    """The GKE pipeline's own stage; the rest are the TPU VM pipeline's and the GKE lifecycle's."""

    scratch: Path
    logs: Path
    _step: int
    _deploy_account: str
    _bootstrapped: list[str]
    _owner_spans: list[tuple[int, int]]

    def _cluster_key(self) -> str:
        raise NotImplementedError

    _env: dict[str, str]

    def _plan(self) -> str:
        """The pull request's plan (and the drift check's), as the read-only plan identity:
        `make diff` of the three stacks must refresh everything with its grants alone, find no
        change, and change nothing itself."""
        with self.cloud.inventory.locked() as inv:
            before = set(inv.objects)
            # The owner's bootstrap of the plan account is no change of the deploy identity's.
            owner_start = len(inv.calls)
        plan = bootstrap_plan(self.cloud)
        with self.cloud.inventory.locked() as inv:
            # The plan account is the bootstrap's: no leftover of this deployment's destroy-all.
            self._bootstrapped = sorted({*self._bootstrapped, *(set(inv.objects) - before)})
            token = inv.mint_token(f"serviceAccount:{plan}")
            start = len(inv.calls)
        deploy_token = self._env[TOKEN_ENV]
        self._env[TOKEN_ENV] = token
        try:
            shown = self._make("diff")
        finally:
            self._env[TOKEN_ENV] = deploy_token
            self._owner_spans = [*self._owner_spans, (owner_start, self.cloud.call_count())]
        with self.cloud.inventory.locked() as inv:
            calls = [c for c in inv.calls[start:] if c.principal == f"serviceAccount:{plan}"]
        wrote = [f"{c.method} {c.path}" for c in calls if c.mutating]
        refused = [f"{c.method} {c.path}" for c in calls if c.status == 403]
        if wrote or refused or not calls:
            raise StageFailure(
                f"`{shown}` as {plan}: {len(calls)} calls, writes {wrote[:5] or 'none'}, "
                f"refused {refused[:5] or 'none'}"
            )
        text = _plain((self.logs / f"{self._step:02d}-diff.log").read_text())
        stacks = platform_for(self.cfg).stacks(self.cfg)
        unchanged = [
            s
            for s, out in stack_output(text, stacks).items()
            if re.search(r"^No changes\.", out, re.M)
        ]
        if len(unchanged) != len(stacks):
            raise StageFailure(f"`{shown}` as {plan}: 'No changes.' for {unchanged or 'no stack'}")
        apis = sorted({c.api for c in calls})
        return (
            f"{shown} as {plan}: no change in the {len(stacks)} stacks; {len(calls)} reads "
            f"({', '.join(apis)}), no write, no 403"
        )

    def _neighbours(self) -> tuple[DeployConfig, DeployConfig]:
        base = load_config(self.scratch / "deploy.toml")
        # The shipped GKE deployment's settings under another name (no NAT of its own: one per
        # subnetwork, and this one's serves it).
        path = write_gke_config(
            self.scratch,
            name=GKE_NEIGHBOUR,
            file="neighbour-gke.toml",
            nat=False,
            state_bucket=str(base.state_bucket),
            pipeline=True,
        )
        gke = load_config(path)
        vm = parse_config(
            {
                "project": REHEARSAL_PROJECT,
                "name": VM_NEIGHBOUR,
                "provisioning": "spot",
                "state_bucket": base.state_bucket,
                "pipeline": True,
            }
        )
        return gke, vm

    def _cross(self) -> str:
        """Two more deployments are bootstrapped in the same project (a GKE one and a TPU VM
        one); each deploy identity, and this deployment's, asks for what is the other's."""
        gke, vm = self._neighbours()
        # This stage's calls (the owner's bootstraps, the refused asks) are no part of the
        # deploy identity's record that as-deploy-identity judges.
        start = self.cloud.call_count()
        try:
            return self._cross_asks(gke, vm)
        finally:
            self._owner_spans = [*self._owner_spans, (start, self.cloud.call_count())]

    def _cross_asks(self, gke: DeployConfig, vm: DeployConfig) -> str:
        tokens = {}
        with self.cloud.inventory.locked() as inv:
            before = set(inv.objects)
        for dep in (gke, vm):
            account, made = bootstrap(self.cloud, dep)
            # The neighbours' bootstrap objects are no leftover of this deployment's destroy-all.
            self._bootstrapped = sorted({*self._bootstrapped, *(set(made) - before)})
            with self.cloud.inventory.locked() as inv:
                tokens[dep.name] = inv.mint_token(f"serviceAccount:{account}")
        with self.cloud.inventory.locked() as inv:
            mine = inv.mint_token(f"serviceAccount:{self._deploy_account}")
        c = self.cloud
        cluster = f"/v1beta1/{self._cluster_key()}"
        namespace = identifiers.namespace(self.cfg)
        # One of its serving objects, by name (the fake serves objects one by one).
        stored = sorted(
            k for k in c.kubernetes.objects() if k.startswith(f"v1/configmaps/{namespace}/")
        )
        if not stored:
            raise StageFailure(f"no ConfigMap in {namespace} to ask for: was it deployed?")
        objects = "/api/v1/namespaces/{}/configmaps/{}".format(*stored[0].split("/")[2:4])
        project = f"/v1/projects/{REHEARSAL_PROJECT}"
        # (who, what, host, method, path, body): every one must be refused with 403.
        asks: list[tuple[str, str, str, str, str, Any]] = []
        for name in (gke.name, vm.name):
            asks += [
                (name, "read the cluster", c.container.host, "GET", cluster, None),
                (name, "delete the cluster", c.container.host, "DELETE", cluster, None),
                (name, "read its namespace's ConfigMap", c.kubernetes.host, "GET", objects, None),
                (
                    name,
                    "rewrite its token secret's IAM",
                    c.secretmanager.host,
                    "POST",
                    f"{project}/secrets/{self.cfg.hf_token_secret_id}:setIamPolicy",
                    {"policy": {"bindings": []}},
                ),
                (
                    name,
                    "rewrite its cache bucket's IAM",
                    c.storage.host,
                    "PUT",
                    f"/storage/v1/b/{self.cfg.compile_cache_bucket(REHEARSAL_PROJECT)}/iam",
                    {"bindings": []},
                ),
            ]
        asks += [
            (
                self.cfg.name,
                f"rewrite {vm.name}'s token secret's IAM",
                c.secretmanager.host,
                "POST",
                f"{project}/secrets/{vm.hf_token_secret_id}:setIamPolicy",
                {"policy": {"bindings": []}},
            ),
            (
                self.cfg.name,
                "create a TPU node (a TPU VM deployment's kind)",
                c.tpu.host,
                "POST",
                f"/v2/projects/{REHEARSAL_PROJECT}/locations/{vm.zone}/nodes?nodeId={vm.node_id}",
                {"acceleratorType": vm.accelerator_type, "runtimeVersion": vm.runtime_version},
            ),
        ]
        token = {**tokens, self.cfg.name: mine}
        allowed = [
            f"{who}: {what} ({status})"
            for who, what, host, method, path, body in asks
            if (status := _as(token[who], host, method, path, body)) != 403
        ]
        if allowed:
            raise StageFailure(f"not refused (403 expected): {allowed}")
        # The control: this deployment's own identity reads its own cluster and objects.
        own = {
            "its cluster": _as(mine, c.container.host, "GET", cluster),
            "its namespace's ConfigMap": _as(mine, c.kubernetes.host, "GET", objects),
        }
        if any(status != 200 for status in own.values()):
            raise StageFailure(f"{self.cfg.name}'s own identity was refused its own: {own}")
        return (
            f"{len(asks)} asks across {gke.name} (GKE), {vm.name} (TPU VM) and {self.cfg.name} "
            "refused with 403; its own cluster and namespace answer its identity"
        )
