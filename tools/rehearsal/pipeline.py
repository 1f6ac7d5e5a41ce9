"""SCENARIO=pipeline: the GitOps pipeline's deploy, applied as the deployment's deploy identity.

The bootstrap's outcome is put in the fake cloud first, as the owner, from the same definitions
stacks/bootstrap.py synthesizes (tpudeploy.identities): the accounts, the two secrets and the
compile-cache bucket, the custom roles, every conditional project grant and the actAs grants.
Then `make deploy-secrets`, `make deploy`, `make destroy` and `make destroy-all` run with the
deploy identity's access token (GOOGLE_OAUTH_ACCESS_TOKEN, read by the google-beta provider
and by the stand-in), so every call Terraform makes is judged by tools/rehearsal/fakes/iamrules:
a grant Google would not honour fails the stage with the API's 403.

What stays outside: the federation itself (GitHub's token for the deploy account; the CEL of
the provider's condition and mapping is evaluated in tests/gitops/test_gitops_identities.py) and the
remote state (state is local here; the state grant is evaluated in the same tests): a
Terraform override file in each stack's folder replaces the synthesized GCS backend.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tools.rehearsal.fakes import iamrules
from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.fakes.inventory import API_TITLES
from tools.rehearsal.scenarios import Stage, StageFailure, StageHost
from tools.rehearsal.scratch import REHEARSAL_PROJECT
from tpudeploy import identities
from tpudeploy.config import DeployConfig
from tpudeploy.names import service_account_email
from tpudeploy.platform import platform_for

STATE_BUCKET = "tpudeploy-rehearsal-tfstate"
TOKEN_ENV = "GOOGLE_OAUTH_ACCESS_TOKEN"  # noqa: S105 (the variable's name)
# The APIs whose changes are Terraform's, which must all come from the deploy identity.
_PROVIDER_APIS = (
    "compute",
    "cloudscheduler",
    "tpu",
    "secretmanager",
    "storage",
    "iam",
    # GKE (issue 41): the cluster, its Kubernetes objects, the project policy and APIs.
    "container",
    "k8s",
    "cloudresourcemanager",
    "serviceusage",
)
# The person's own calls in between (make secret / api-key, whose ROTATE=1 disables the earlier
# versions: the stacks declare no secret version, so Terraform never does; make wait's
# guest-attribute read, a POST that changes nothing).
_NOT_TERRAFORMS = (":addVersion", ":disable", ":getGuestAttributes")


def local_state_override(stack_dir: Path, repo: Path) -> None:
    """A Terraform override file in the stack's folder: its `backend` block replaces the
    synthesized GCS one (Terraform merges *_override.tf.json over the configuration, and a
    backend block in an override replaces the original), so every synth, by the cdktf CLI or by
    main.py, keeps state local at the scratch copy's root (the rehearsal serves no GCS backend)."""
    state = repo / f"terraform.{stack_dir.name}.tfstate"
    backend = {"local": {"path": os.path.relpath(state, stack_dir)}}
    stack_dir.mkdir(parents=True, exist_ok=True)
    (stack_dir / "rehearsal_override.tf.json").write_text(
        json.dumps({"terraform": {"backend": backend}}, indent=2) + "\n"
    )


def _owner_call(
    host: str,
    method: str,
    path: str,
    body: Any = None,
    query: Mapping[str, str] | None = None,
    *,
    exists_ok: bool = False,
) -> Any:
    """One call to a fake as the owner (no credentials), as `make bootstrap` makes them.
    `exists_ok`: a 409 (made by an earlier deployment's bootstrap: the custom roles are the
    project's, one for all) is no failure."""
    url = f"http://{host}{path}" + (f"?{urlencode(query)}" if query else "")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            raw = response.read()
    except urllib.error.HTTPError as exc:
        if exists_ok and exc.code == 409:
            return {}
        raise StageFailure(
            f"bootstrap: {method} {path} answered {exc.code}: {exc.read()!r}"
        ) from None
    return json.loads(raw) if raw else {}


def _binding(role: str, member: str, condition: identities.Condition | None) -> dict[str, Any]:
    binding: dict[str, Any] = {"role": role, "members": [member]}
    if condition is not None:
        binding["condition"] = {
            "title": condition.title,
            "expression": condition.expression,
            "description": condition.description,
        }
    return binding


def bootstrap(cloud: FakeCloud, cfg: DeployConfig) -> tuple[str, list[str]]:
    """What `make bootstrap` leaves for deployment `cfg`, made as the owner; returns the deploy
    account's email and the names of everything made (which `destroy-all` must leave)."""
    project = REHEARSAL_PROJECT
    with cloud.inventory.locked() as inv:
        for service in API_TITLES:
            inv.enable(project, service)
        # And what the deployment's own stacks would enable (GKE: the container API).
        for service, stack_enables, _ in platform_for(cfg).apis(cfg):
            if stack_enables:
                inv.enable(project, service)
    accounts = {
        "node": cfg.service_account_id,
        "stop": cfg.stop_account_id,
        "deploy": cfg.deploy_account_id,
    }
    emails = {k: service_account_email(v, project) for k, v in accounts.items()}
    for account_id in accounts.values():
        _owner_call(
            cloud.iam.host,
            "POST",
            f"/v1/projects/{project}/serviceAccounts",
            {"accountId": account_id, "serviceAccount": {"displayName": account_id}},
        )
    # Every secret the replicas read (the token and the API key; GKE: the TLS key too).
    for secret_id, _ in platform_for(cfg).secrets(cfg):
        _owner_call(
            cloud.secretmanager.host,
            "POST",
            f"/v1/projects/{project}/secrets",
            {"replication": {"automatic": {}}, "labels": {"deployment": cfg.name}},
            query={"secretId": secret_id},
        )
    _owner_call(
        cloud.storage.host,
        "POST",
        "/storage/v1/b",
        {
            "name": cfg.compile_cache_bucket(project),
            "location": cfg.effective_region.upper(),
            "versioning": {"enabled": True},
            "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}},
        },
        query={"project": project},
    )
    for key, (description, permissions) in identities.CUSTOM_ROLES.items():
        _owner_call(
            cloud.iam.host,
            "POST",
            f"/v1/projects/{project}/roles",
            {
                "roleId": key,
                "role": {
                    "title": key,
                    "description": description,
                    "includedPermissions": list(permissions),
                },
            },
            exists_ok=True,
        )
    grants = identities.deploy_grants(
        cfg, project=project, project_number=iamrules.PROJECT_NUMBER, state_bucket=STATE_BUCKET
    )
    # Added to what the project's policy holds already (another deployment's bootstrap).
    project_bindings: list[dict[str, Any]] = list(
        _owner_call(cloud.resourcemanager.host, "POST", f"/v1/projects/{project}:getIamPolicy").get(
            "bindings"
        )
        or []
    )
    account_bindings: dict[str, list[dict[str, Any]]] = {}
    deploy_member = f"serviceAccount:{emails['deploy']}"
    for grant in [*grants, *identities.stop_grants(cfg)]:
        role = grant.role if not grant.custom else f"projects/{project}/roles/{grant.role}"
        member = (
            f"serviceAccount:{emails['stop']}"
            if grant.identity.startswith("stop:")
            else deploy_member
        )
        if grant.scope == identities.PROJECT:
            project_bindings.append(_binding(role, member, grant.condition))
        elif grant.scope in (identities.NODE_ACCOUNT, identities.STOP_ACCOUNT):
            email = emails["node" if grant.scope == identities.NODE_ACCOUNT else "stop"]
            account_bindings.setdefault(email, []).append(_binding(role, member, None))
        # DEPLOY_ACCOUNT (federation) and STATE_BUCKET (remote state): see the module docstring.
    # Project roles only the owner grants (GKE: the nodes' and the metrics adapter's).
    for extra in identities.project_members(
        cfg, project=project, project_number=iamrules.PROJECT_NUMBER
    ):
        project_bindings.append(_binding(extra.role, extra.member, None))
    _owner_call(
        cloud.resourcemanager.host,
        "POST",
        f"/v1/projects/{project}:setIamPolicy",
        {"policy": {"bindings": project_bindings}},
    )
    if platform_for(cfg).declares_nat(cfg):
        _owner_nat(cloud, cfg)
    for email, bindings in account_bindings.items():
        _owner_call(
            cloud.iam.host,
            "POST",
            f"/v1/projects/{project}/serviceAccounts/{email}:setIamPolicy",
            {"policy": {"bindings": bindings}},
        )
    with cloud.inventory.locked() as inv:
        made = sorted(key for key in inv.objects if "/operations/" not in key)
    return emails["deploy"], made


def _bindings_of(policies: Mapping[str, list[dict[str, Any]]]) -> set[tuple[str, str, str]]:
    """(policy, role, member) of every binding."""
    return {
        (key, str(b.get("role")), member)
        for key, bindings in policies.items()
        for b in bindings
        for member in b.get("members", [])
    }


def _owner_nat(cloud: FakeCloud, cfg: DeployConfig) -> None:
    """The deployment's router and NAT, as the bootstrap declares them (stacks/nat.py): the
    router, then the NAT as a patch of it, which is how the provider writes a NAT."""
    routers = f"/compute/v1/projects/{REHEARSAL_PROJECT}/regions/{cfg.effective_region}/routers"
    network = f"projects/{REHEARSAL_PROJECT}/global/networks/{cfg.network.network}"
    _owner_call(cloud.compute.host, "POST", routers, {"name": cfg.router_name, "network": network})
    nat = {
        "name": cfg.nat_name,
        "natIpAllocateOption": "AUTO_ONLY",
        "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
        "subnetworks": [
            {
                "name": f"projects/{REHEARSAL_PROJECT}/regions/{cfg.effective_region}/"
                f"subnetworks/{cfg.nat_subnetwork}",
                "sourceIpRangesToNat": ["ALL_IP_RANGES"],
            }
        ],
    }
    _owner_call(cloud.compute.host, "PATCH", f"{routers}/{cfg.router_name}", {"nats": [nat]})


PLAN_ACCOUNT = "tpudeploy-plan"  # tpudeploy.bootstrap_config.BootstrapConfig's default


def bootstrap_plan(cloud: FakeCloud) -> str:
    """The read-only plan identity the bootstrap makes once for every deployment, with its
    project grants (identities.plan_grants; the state bucket's is the remote state's: outside,
    see the module docstring); returns its email."""
    project = REHEARSAL_PROJECT
    _owner_call(
        cloud.iam.host,
        "POST",
        f"/v1/projects/{project}/serviceAccounts",
        {"accountId": PLAN_ACCOUNT, "serviceAccount": {"displayName": PLAN_ACCOUNT}},
    )
    email = service_account_email(PLAN_ACCOUNT, project)
    bindings = list(
        _owner_call(cloud.resourcemanager.host, "POST", f"/v1/projects/{project}:getIamPolicy").get(
            "bindings"
        )
        or []
    )
    for grant in identities.plan_grants():
        if grant.scope == identities.PROJECT:
            role = f"projects/{project}/roles/{grant.role}" if grant.custom else grant.role
            bindings.append(_binding(role, f"serviceAccount:{email}", grant.condition))
    _owner_call(
        cloud.resourcemanager.host,
        "POST",
        f"/v1/projects/{project}:setIamPolicy",
        {"policy": {"bindings": bindings}},
    )
    return email


class PipelineStages(StageHost):
    """Stages the Rehearsal runs for SCENARIO=pipeline (tools/rehearsal/lifecycle.py)."""

    _env: dict[str, str]
    _deploy_account: str
    _bootstrapped: list[str]
    _bootstrap_bindings: set[tuple[str, str, str]]
    _owner_spans: list[tuple[int, int]]
    _since: int

    # Provided by the Rehearsal, besides StageHost's.
    def _deploy_secrets(self) -> str:
        raise NotImplementedError

    def pipeline_stages(self, head: list[Stage], tail: list[Stage]) -> list[Stage]:
        prepare, *rest = head
        return [
            prepare,
            Stage("bootstrap", self._bootstrap),
            *rest,
            *tail[:-2],
            Stage("destroy-all", self._pipeline_destroy_all),
            Stage("as-deploy-identity", self._as_deploy_identity),
            tail[-1],
        ]

    def _bootstrap(self) -> str:
        self._deploy_account, self._bootstrapped = bootstrap(self.cloud, self.cfg)
        with self.cloud.inventory.locked() as inv:
            token = inv.mint_token(f"serviceAccount:{self._deploy_account}")
            # The bootstrap's own grants (GKE: the node account's project role) outlive every
            # destroy: destroy-all is judged on the rest.
            self._bootstrap_bindings = _bindings_of(inv.policies)
        # Every later make target runs as the pipeline does: the deploy identity's token.
        self._env[TOKEN_ENV] = token
        self._since = self.cloud.call_count()
        self._owner_spans = []
        return (
            f"as the owner: {len(self._bootstrapped)} objects and the grants of "
            f"tpudeploy.identities for {self._deploy_account}"
        )

    def _pipeline_destroy_all(self) -> str:
        shown = self._make("destroy-all", approve=True)
        left = self.cloud.leftovers()
        extra = sorted(set(left) - set(self._bootstrapped))
        if extra:
            raise StageFailure(f"`{shown}` left what the bootstrap did not make: {extra}")
        email = service_account_email(self.cfg.service_account_id, REHEARSAL_PROJECT)
        node = f"serviceAccount:{email}"
        with self.cloud.inventory.locked() as inv:
            still = sorted(
                {
                    key
                    for key, role, member in _bindings_of(inv.policies) - self._bootstrap_bindings
                    if member == node
                }
            )
        if still:
            raise StageFailure(f"`{shown}` left the node account's grants on {still}")
        return f"{shown}: the bootstrap's objects stay, the node account's grants are gone"

    def _as_deploy_identity(self) -> str:
        deploy = f"serviceAccount:{self._deploy_account}"
        with self.cloud.inventory.locked() as inv:
            # Less the spans a stage made as someone else on purpose (gke_pipeline's
            # cross-deployment asks and the neighbours' bootstraps).
            calls = [
                c
                for n, c in enumerate(inv.calls)
                if n >= self._since and not any(a <= n < b for a, b in self._owner_spans)
            ]
        theirs = [
            c
            for c in calls
            if c.mutating
            and c.api in _PROVIDER_APIS
            and not c.path.endswith(_NOT_TERRAFORMS)
            and c.principal != deploy
            # Objects are never Terraform's here: the node's uploads (XML API) and `make
            # destroy-all`'s empty-cache, run with the person's own credentials.
            and not (
                c.api == "storage" and (not c.path.startswith("/storage/v1/") or "/o/" in c.path)
            )
        ]
        if theirs:
            shown = [f"{c.principal} {c.method} {c.path}" for c in theirs[:5]]
            raise StageFailure(f"changes made by someone other than the deploy identity: {shown}")
        mine = [c for c in calls if c.principal == deploy and c.mutating]
        if not mine:
            raise StageFailure("the deploy identity made no change: was its token sent?")
        refused = [c for c in calls if c.principal == deploy and c.status == 403]
        if refused:
            raise StageFailure(f"the deploy identity was refused: {[c.path for c in refused[:5]]}")
        return f"all {len(mine)} changes Terraform made came from {self._deploy_account}"
