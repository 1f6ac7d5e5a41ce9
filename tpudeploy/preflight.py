"""`make preflight`: what a deploy, diff or destroy needs, checked in about a second before any of
them spends half a minute loading cdktf.

Terraform on PATH and recent enough, credentials present (read from disk, no token request),
a project, and for a deploy the two secrets with a version: the node reads them at boot and
stops there without them, after a capacity wait and a paid boot. For a spot or on-demand deploy
or diff, the deadline job's region among Cloud Scheduler's locations (locations.list). Each
failure is one line with the command that fixes it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from tpudeploy import errors, policy, terraform
from tpudeploy.config import DeployConfig, config_path
from tpudeploy.gcp import session as gcp_session
from tpudeploy.gcp.api_errors import ApiError, QueuedResourceError
from tpudeploy.gcp.scheduler import SchedulerApi
from tpudeploy.gcp.secretmanager import SecretStore, SecretStoreError
from tpudeploy.gcp.serviceusage import ServiceUsageError, service_state

# What each creating or destroying command needs before it starts.
PURPOSES = ("deploy", "deploy-secrets", "diff", "destroy")


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    line: str
    # A check that could not be made (e.g. no permission to look): said, never a refusal.
    note: bool = False


def check_terraform() -> Check:
    minimum = ".".join(map(str, terraform.MIN_VERSION))
    install = (
        f"install Terraform {terraform.TESTED_VERSION} (the tested version; >= {minimum} works) "
        "from developer.hashicorp.com/terraform/install and put it on PATH"
    )
    try:
        path, version = terraform.installed_version()
    except terraform.TerraformMissing as exc:
        return Check(False, f"{exc}: {install}")
    shown = ".".join(map(str, version))
    if version < terraform.MIN_VERSION:
        return Check(False, f"Terraform {shown} ({path}) is older than {minimum}: {install}")
    return Check(True, f"terraform {shown}")


def check_credentials() -> Check:
    """Application Default Credentials present and readable, without asking Google for a token
    (and without probing the metadata server off a Google machine): tpudeploy/gcp/session.py."""
    found = gcp_session.find_credentials()
    return Check(found.ok, found.line)


def check_project(cfg: DeployConfig) -> Check:
    if cfg.project:
        return Check(True, f"project {cfg.project}")
    return Check(
        False,
        f'no project: set project = "my-project" in {config_path()} or export '
        "GOOGLE_CLOUD_PROJECT=my-project",
    )


def _and(items: list[str]) -> str:
    return " and ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + " and " + items[-1]


def check_secrets(cfg: DeployConfig, store: SecretStore) -> list[Check]:
    """The secrets the node (or every replica) reads at boot, each with an enabled latest
    version: the platform names them (tpudeploy.platform)."""
    from tpudeploy.platform import platform_for

    checks = []
    for secret_id, command in platform_for(cfg).secrets(cfg):
        try:
            state = store.version_state(secret_id)
        except SecretStoreError as exc:
            checks.append(
                Check(
                    True,
                    f"cannot tell whether {secret_id} has a version ({exc}); if the boot stops "
                    f"at reading-secrets, run `{command}`",
                    note=True,
                )
            )
            continue
        if state == SecretStore.NO_SECRET:
            checks.append(
                Check(
                    False,
                    f"secret {secret_id} does not exist in project {store.project}: run "
                    "`make deploy-secrets` first (the long-lived stack), then "
                    + _and([f"`{c}`" for _, c in platform_for(cfg).secrets(cfg)])
                    + ", then `make deploy`",
                )
            )
            break  # the long-lived stack is missing: one line says it for both secrets
        elif state == SecretStore.NO_VERSION:
            checks.append(
                Check(
                    False,
                    f"secret {secret_id} has no version yet: run `{command}` (the node reads it "
                    "at boot and stops without it), then `make deploy`",
                )
            )
        elif state != "ENABLED":
            checks.append(
                Check(
                    False,
                    f"the latest version of {secret_id} is {state.lower()}: run `{command}` to "
                    "add a new one, then `make deploy`",
                )
            )
        else:
            checks.append(Check(True, f"{secret_id} has a version"))
    return checks


def check_permissions(
    cfg: DeployConfig,
    purpose: str,
    held: Callable[[str, list[str]], set[str]] | None = None,
) -> Check:
    """Your own account holds, on the project, every permission the stacks' resources need
    (tpudeploy.permissions); a missing one would be PERMISSION_DENIED in the middle of an apply.
    actAs is granted per service account, which this project-level test cannot see."""
    from tpudeploy import permissions
    from tpudeploy.gcp import resourcemanager

    wanted = (
        _pipeline_permissions(cfg)
        if cfg.gitops_managed
        else permissions.project_permissions(cfg, purpose)
    )
    try:
        have = (held or resourcemanager.held_permissions)(cfg.project, wanted)
    except resourcemanager.PermissionCheckError as exc:
        return Check(
            True,
            f"could not test your permissions on {cfg.project} ({exc}); a missing one fails "
            "the apply with PERMISSION_DENIED naming it (roles: docs/deploying.md)",
            note=True,
        )
    missing = [p for p in wanted if p not in have]
    if cfg.gitops_managed:
        # The pipeline's deploy identity: the rest of its grants are conditioned on this
        # deployment's resources, which a test on the project cannot see (it would call them
        # missing); the rehearsal judges them (make rehearse SCENARIO=pipeline).
        if not missing:
            return Check(
                True,
                f"the deploy identity holds the {len(wanted)} project-wide permissions of "
                f"{cfg.deploy_account_id} (its conditioned grants are judged at apply)",
            )
        return Check(
            False,
            f"the caller lacks {len(missing)} project-wide permission(s) of the deploy identity "
            f"{cfg.deploy_account_id}: {', '.join(missing)}. Run `make bootstrap` again with "
            "this deployment in deployments/ (docs/gitops.md), and check that the job "
            "authenticated as that account",
        )
    if not missing:
        return Check(True, f"your account holds the {len(wanted)} permissions {purpose} needs")
    roles = ", ".join(permissions.roles_for(missing, cfg, purpose))
    return Check(
        False,
        f"your account lacks {len(missing)} permission(s) {purpose} needs on {cfg.project}: "
        f"{', '.join(missing)}. Grant yourself {roles} (or Owner), see the role list in "
        "docs/deploying.md",
    )


def _pipeline_permissions(cfg: DeployConfig) -> list[str]:
    """What the deploy identity holds on the project without a condition: all that
    projects.testIamPermissions can see of it (tpudeploy/identities.py; the bootstrap grants
    them)."""
    from tpudeploy import identities

    grants = identities.deploy_grants(
        cfg, project=cfg.project or "", project_number="0", state_bucket=cfg.state_bucket or ""
    )
    return sorted(
        {
            p
            for g in grants
            if g.scope == identities.PROJECT and g.condition is None
            for p in identities.permissions(g)
        }
    )


def check_apis(cfg: DeployConfig, state: Callable[[str, str], str] = service_state) -> list[Check]:
    """The APIs the platform needs that no stack enables are enabled (a disabled one fails the
    apply, or a GKE add-on, well after the cluster bills); one a stack enables is a note."""
    from tpudeploy.platform import platform_for

    checks = []
    for service, enabled_by_stack, why in platform_for(cfg).apis(cfg):
        try:
            found = state(cfg.project, service)
        except ServiceUsageError as exc:
            checks.append(
                Check(True, f"cannot tell whether {service} is enabled ({exc}); {why}", note=True)
            )
            continue
        if found == "ENABLED":
            checks.append(Check(True, f"{service} enabled"))
        elif enabled_by_stack:
            checks.append(
                Check(True, f"{service} is not enabled yet: the deploy enables it ({why})", True)
            )
        else:
            checks.append(
                Check(
                    False,
                    f"{service} is not enabled in project {cfg.project} ({why}): run `gcloud "
                    f"services enable {service} --project={cfg.project}`, then try again",
                )
            )
    return checks


def check_scheduler_location(cfg: DeployConfig, api: SchedulerApi) -> Check:
    """The deadline job's region is a Cloud Scheduler location of the project (locations.list):
    a missing one fails here in a second instead of at apply, after the node was created."""
    region = cfg.deadline_region
    try:
        locations = api.location_ids(cfg.project)
    except (ApiError, QueuedResourceError) as exc:
        return Check(
            True,
            f"cannot list Cloud Scheduler locations ({errors.one_line(exc)}); if the deploy "
            f"stops at the deadline job, set [deadline] region to one `gcloud scheduler "
            "locations list` shows",
            note=True,
        )
    if region in locations:
        return Check(True, f"Cloud Scheduler has {region}")
    near = sorted(loc for loc in locations if loc.split("-")[0] == region.split("-")[0])
    return Check(
        False,
        f"Cloud Scheduler has no location {region} in project {cfg.project}, so the deadline "
        f"job that deletes {cfg.deadline_target} cannot be created there: set "
        f'[deadline] region = "{(near or sorted(locations) or ["us-central1"])[0]}" (one of: '
        f"{', '.join(sorted(locations)) or 'none listed'}) in {config_path()}",
    )


def run(
    cfg: DeployConfig,
    purpose: str,
    *,
    store: Callable[[str], SecretStore] = SecretStore.from_env,
    held: Callable[[str, list[str]], set[str]] | None = None,
    scheduler: Callable[[], SchedulerApi] | None = None,
    apis: Callable[[str, str], str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print one line per failure (stderr) or one summary line (stdout); 0 when all pass."""
    out = out or sys.stdout
    err = err or sys.stderr
    start = time.monotonic()
    if purpose in ("deploy", "deploy-secrets", "diff"):
        # What is about to be created passes the guard rails (a destroy never needs them).
        from tpudeploy.platform import guard_rails

        policy.enforce(cfg, guard_rails(cfg), source=str(config_path()))
    checks = [check_terraform(), check_credentials(), check_project(cfg)]
    if purpose in ("deploy", "deploy-secrets") and all(c.ok for c in checks):
        checks.append(check_permissions(cfg, purpose, held))
    if purpose in ("deploy", "diff") and all(c.ok for c in checks):
        checks += check_apis(cfg, apis or service_state)
    if purpose == "deploy" and all(c.ok for c in checks):
        try:
            checks += check_secrets(cfg, store(cfg.project))
        except SecretStoreError as exc:
            checks.append(Check(False, str(exc)))
    if (
        purpose in ("deploy", "diff")
        and cfg.deadline_seconds is not None
        and all(c.ok for c in checks)
    ):
        try:
            api = scheduler() if scheduler else SchedulerApi(num_retries=1)
        except (ApiError, QueuedResourceError) as exc:
            checks.append(Check(True, f"no Cloud Scheduler client ({exc})", note=True))
        else:
            checks.append(check_scheduler_location(cfg, api))
    if (
        purpose in ("deploy", "diff")
        and not cfg.network.enable_external_ip
        and not cfg.declares_nat
    ):
        # What can be said without reading the network's routers: the egress is the user's.
        checks.append(
            Check(
                True,
                "the node has no external address and [network] nat = false: its boot pulls "
                "from Docker Hub and Hugging Face through your network's egress (a Cloud NAT "
                "for its subnetwork, or a proxy), or stops at pulling-image",
                note=True,
            )
        )
    failed = [c for c in checks if not c.ok]
    for check in failed:
        print(f"preflight: {check.line}", file=err)
    for check in checks:
        if check.note:
            print(f"preflight: note: {check.line}", file=err)
    if failed:
        return 1
    took = time.monotonic() - start
    passed = ", ".join(c.line for c in checks if not c.note)
    print(f"preflight for {purpose}: {passed} ({took:.1f} s)", file=out)
    return 0
