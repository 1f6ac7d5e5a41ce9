"""GitOps bootstrap stack: the state bucket, GitHub's Workload Identity Federation, CI accounts.

Applied once per repository by a person with project-owner rights (`make bootstrap`); its own
state stays local because it creates the bucket every other stack keeps its state in.
Run as `python -m stacks.bootstrap`; nothing is synthesized at import.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TypeVar

from cdktf import App, LocalBackend, TerraformOutput, TerraformResourceLifecycle, TerraformStack
from cdktf_cdktf_provider_google_beta.data_google_project import DataGoogleProject
from cdktf_cdktf_provider_google_beta.google_iam_workload_identity_pool import (
    GoogleIamWorkloadIdentityPool,
)
from cdktf_cdktf_provider_google_beta.google_iam_workload_identity_pool_provider import (
    GoogleIamWorkloadIdentityPoolProvider,
    GoogleIamWorkloadIdentityPoolProviderOidc,
)
from cdktf_cdktf_provider_google_beta.google_project_iam_custom_role import (
    GoogleProjectIamCustomRole,
)
from cdktf_cdktf_provider_google_beta.google_project_iam_member import (
    GoogleProjectIamMember,
    GoogleProjectIamMemberCondition,
)
from cdktf_cdktf_provider_google_beta.google_project_service import GoogleProjectService
from cdktf_cdktf_provider_google_beta.google_service_account import GoogleServiceAccount
from cdktf_cdktf_provider_google_beta.google_service_account_iam_member import (
    GoogleServiceAccountIamMember,
)
from cdktf_cdktf_provider_google_beta.google_storage_bucket import (
    GoogleStorageBucket,
    GoogleStorageBucketLifecycleRule,
    GoogleStorageBucketLifecycleRuleAction,
    GoogleStorageBucketLifecycleRuleCondition,
    GoogleStorageBucketVersioning,
)
from cdktf_cdktf_provider_google_beta.google_storage_bucket_iam_member import (
    GoogleStorageBucketIamMember,
    GoogleStorageBucketIamMemberCondition,
)
from constructs import Construct

from stacks.common import TERRAFORM_REQUIRED_VERSION, google_beta
from stacks.gke.subnet import proxy_subnet
from stacks.nat import cloud_nat
from stacks.secrets import (
    REQUIRED_SERVICES,
    compile_cache_bucket,
    node_account,
    node_secret,
    stop_account,
)
from tpudeploy import errors, identities
from tpudeploy.bootstrap_config import (
    BOOTSTRAP_STACK,
    DEPLOY_ATTRIBUTE,
    WATCH_ATTRIBUTE,
    Bootstrap,
    bootstrap_path,
    load_bootstrap,
)
from tpudeploy.config import ConfigError
from tpudeploy.github_environments import github_settings_text
from tpudeploy.platform import platform_for

_C = TypeVar("_C", GoogleProjectIamMemberCondition, GoogleStorageBucketIamMemberCondition)

# Apart from the deployments' cdktf.out/stacks/ (whose manifest and clean-up are theirs); the
# bootstrap's state file itself sits at the repository root, where `make clean` never goes.
BOOTSTRAP_OUTDIR = "cdktf.out/bootstrap"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"

# APIs the federation and the state bucket need, and those every deployment's stacks use: the
# bootstrap enables them so that no deploy identity needs Service Usage admin (which could disable
# an API every other deployment in the project depends on).
BOOTSTRAP_SERVICES = (
    "cloudresourcemanager.googleapis.com",
    "iam.googleapis.com",
    "iamcredentials.googleapis.com",
    "serviceusage.googleapis.com",
    "storage.googleapis.com",
    "sts.googleapis.com",
)


def _slug(role: str) -> str:
    return role.removeprefix("roles/").replace(".", "-")


class BootstrapStack(TerraformStack):
    """Creates: the APIs federation and the deployments need, the versioned state bucket, a
    workload identity pool with a GitHub OIDC provider restricted to one repository (by its and
    its owner's numeric ids), the read-only plan account, and per pipeline deployment its node
    account, its deadline job's account, its two secrets (no values), its compile-cache bucket
    and its own deploy identity (no keys anywhere), with the grants of tpudeploy.identities."""

    def __init__(self, scope: Construct, id_: str, *, config: Bootstrap) -> None:
        super().__init__(scope, id_)
        cfg = config.config
        self.add_override("terraform.required_version", TERRAFORM_REQUIRED_VERSION)
        # Local on purpose: this stack creates the bucket remote state would live in. Terraform
        # runs in cdktf.out/bootstrap/stacks/<stack>/; the file lands at the repository root.
        LocalBackend(self, path=f"../../../../terraform.{id_}.tfstate")
        provider_beta = google_beta(
            self,
            project=cfg.project,
            default_labels={"managed_by": "tpudeploy", "component": "gitops"},
        )
        # Secret Manager names secrets by project number in IAM conditions. A data source is not a
        # TerraformResource, so google_beta's aspect does not bind it: name the provider here.
        project_number = DataGoogleProject(
            self, "project", project_id=cfg.project, provider=provider_beta
        ).number

        wanted = {*BOOTSTRAP_SERVICES, *REQUIRED_SERVICES, *_platform_services(config)}
        services = [
            GoogleProjectService(
                self,
                f"service-{svc.split('.')[0]}",
                service=svc,
                disable_on_destroy=False,
            )
            for svc in sorted(wanted)
        ]

        bucket = GoogleStorageBucket(
            self,
            "state",
            name=cfg.state_bucket,
            location=cfg.state_bucket_location,
            # The state of every deployment: never emptied by Terraform, never destroyed by it.
            force_destroy=False,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=GoogleStorageBucketVersioning(enabled=True),
            lifecycle_rule=[
                GoogleStorageBucketLifecycleRule(
                    action=GoogleStorageBucketLifecycleRuleAction(type="Delete"),
                    condition=GoogleStorageBucketLifecycleRuleCondition(
                        with_state="ARCHIVED", num_newer_versions=cfg.noncurrent_versions
                    ),
                )
            ],
            lifecycle=TerraformResourceLifecycle(prevent_destroy=True),
            depends_on=services,
        )

        pool = GoogleIamWorkloadIdentityPool(
            self,
            "github-pool",
            workload_identity_pool_id=cfg.pool_id,
            display_name="GitHub Actions",
            description=f"GitHub Actions of {cfg.github_repository} (tpudeploy GitOps)",
            depends_on=services,
        )
        provider = GoogleIamWorkloadIdentityPoolProvider(
            self,
            "github-provider",
            workload_identity_pool_id=pool.workload_identity_pool_id,
            workload_identity_pool_provider_id=cfg.provider_id,
            display_name="GitHub OIDC",
            oidc=GoogleIamWorkloadIdentityPoolProviderOidc(issuer_uri=GITHUB_ISSUER),
            attribute_mapping=cfg.attribute_mapping,
            attribute_condition=cfg.attribute_condition,
        )

        roles = {
            key: GoogleProjectIamCustomRole(
                self,
                f"role-{key}",
                role_id=key,
                title=key,
                description=description,
                permissions=list(permissions),
            )
            for key, (description, permissions) in identities.CUSTOM_ROLES.items()
        }

        def role_id(role: str) -> str:
            return role if role.startswith("roles/") else roles[role].id

        plan_sa = GoogleServiceAccount(
            self,
            "plan-sa",
            account_id=cfg.plan_account_id,
            display_name="tpudeploy GitOps plan (read-only)",
            description=f"Plans and drift checks for {cfg.github_repository}; reads only.",
            depends_on=services,
        )
        for grant in identities.plan_grants():
            slug = f"plan-{_slug(grant.role)}"
            if grant.scope == identities.PLAN_ACCOUNT:
                # By exact subject: pull-request jobs and jobs on main, nothing else.
                for n, subject in enumerate(cfg.plan_subjects):
                    GoogleServiceAccountIamMember(
                        self,
                        f"{slug}-{n}",
                        service_account_id=plan_sa.name,
                        role=grant.role,
                        member=f"principal://iam.googleapis.com/{pool.name}/subject/{subject}",
                    )
            elif grant.scope == identities.STATE_BUCKET:
                GoogleStorageBucketIamMember(
                    self, slug, bucket=bucket.name, role=grant.role, member=plan_sa.member
                )
            else:
                GoogleProjectIamMember(
                    self, slug, project=cfg.project, role=role_id(grant.role), member=plan_sa.member
                )

        deploy_emails = {}
        project_members: dict[tuple[str, str], GoogleProjectIamMember] = {}
        watch_names = {w.name for w in config.watches}
        # The upstream watch's deployments (<name>-watch) get everything a pipeline deployment
        # gets, their deploy identity bound to the watch's own attribute and workflow.
        for dep in (*config.deployments, *config.watches):
            watch = dep.name in watch_names
            # The node's account lives here, not in the deployment's secrets stack, so that the
            # deploy identity gets actAs on this one account (an IAM grant on a resource that
            # exists when the bootstrap runs) instead of project-wide serviceAccountUser.
            node_sa = node_account(self, f"{dep.name}-node-sa", dep, services)
            # The deadline job's identity (spot, on-demand), made for every pipeline deployment so
            # that switching one to spot needs no second bootstrap. Its one grant is below.
            stop_sa = stop_account(self, f"{dep.name}-stop-sa", dep, services)
            # Its two secrets (no values) and its compile-cache bucket: creating either is
            # checked on the project, which carries no name a condition could match
            # (tpudeploy/identities.py), so the deploy identity gets only their IAM, by name.
            # Every secret its replicas read (the token and the API key; GKE: the TLS key too).
            for secret_id, _ in platform_for(dep).secrets(dep):
                node_secret(self, secret_id, dep, secret_id, services)
            compile_cache_bucket(self, f"{dep.name}-compile-cache", dep, cfg.project, services)
            for grant in identities.stop_grants(dep):
                GoogleProjectIamMember(
                    self,
                    f"{dep.name}-stop-{_slug(grant.role)}",
                    project=cfg.project,
                    role=role_id(grant.role),
                    member=stop_sa.member,
                    condition=_condition(GoogleProjectIamMemberCondition, grant.condition),
                )
            # Project roles only setIamPolicy on the project could grant (GKE: the nodes' and the
            # metrics adapter's); one binding per role and member, which deployments may share.
            for member in identities.project_members(
                dep, project=cfg.project, project_number=project_number
            ):
                if (member.role, member.member) not in project_members:
                    project_members[(member.role, member.member)] = GoogleProjectIamMember(
                        self,
                        f"{dep.name}-project-{_slug(member.role)}",
                        project=cfg.project,
                        role=member.role,
                        member=member.member,
                        depends_on=services,
                    )
            # Its router and NAT (private nodes): compute.routers.* cannot be scoped to one
            # router (a router gives IAM Conditions no name), so no deploy identity holds it.
            if platform_for(dep).declares_nat(dep):
                cloud_nat(self, dep, prefix=f"{dep.name}-", depends_on=services)
            # GKE's Gateway proxies' subnet ([routing] proxy_subnet_cidr), for the same reason.
            if dep.routing.proxy_subnet_cidr:
                proxy_subnet(
                    self, dep, project=cfg.project, prefix=f"{dep.name}-", depends_on=services
                )
            deploy_sa = GoogleServiceAccount(
                self,
                f"{dep.name}-deploy-sa",
                account_id=dep.deploy_account_id,
                display_name=f"tpudeploy GitOps deploy of {dep.name}",
                description=f"Applies deployment {dep.name} of {cfg.github_repository} only.",
                depends_on=services,
            )
            deploy_emails[dep.name] = deploy_sa.email
            grants = (identities.watch_grants if watch else identities.deploy_grants)(
                dep,
                project=cfg.project,
                project_number=project_number,
                state_bucket=cfg.state_bucket,
            )
            for grant in grants:
                slug = f"{dep.name}-{_slug(grant.role)}"
                condition = grant.condition
                if grant.scope == identities.DEPLOY_ACCOUNT:
                    GoogleServiceAccountIamMember(
                        self,
                        slug,
                        service_account_id=deploy_sa.name,
                        role=grant.role,
                        member=(
                            f"principalSet://iam.googleapis.com/{pool.name}"
                            f"/attribute.{WATCH_ATTRIBUTE if watch else DEPLOY_ATTRIBUTE}"
                            f"/{dep.name}"
                        ),
                    )
                elif grant.scope in (identities.NODE_ACCOUNT, identities.STOP_ACCOUNT):
                    account = node_sa if grant.scope == identities.NODE_ACCOUNT else stop_sa
                    GoogleServiceAccountIamMember(
                        self,
                        # The node account's grant keeps its original address.
                        slug if account is node_sa else f"{slug}-stop",
                        service_account_id=account.name,
                        role=grant.role,
                        member=deploy_sa.member,
                    )
                elif grant.scope == identities.STATE_BUCKET:
                    assert condition is not None
                    GoogleStorageBucketIamMember(
                        self,
                        slug,
                        bucket=bucket.name,
                        role=role_id(grant.role),
                        member=deploy_sa.member,
                        condition=GoogleStorageBucketIamMemberCondition(
                            title=condition.title,
                            expression=condition.expression,
                            description=condition.description,
                        ),
                    )
                else:
                    GoogleProjectIamMember(
                        self,
                        slug,
                        project=cfg.project,
                        role=role_id(grant.role),
                        member=deploy_sa.member,
                        condition=GoogleProjectIamMemberCondition(
                            title=condition.title,
                            expression=condition.expression,
                            description=condition.description,
                        )
                        if condition
                        else None,
                    )

        # The repository variables the workflows read, under the same names; each deploy
        # workflow derives its deployment's deploy account from the deployment name.
        TerraformOutput(self, "GCP_WORKLOAD_IDENTITY_PROVIDER", value=provider.name)
        TerraformOutput(self, "GCP_PLAN_SERVICE_ACCOUNT", value=plan_sa.email)
        TerraformOutput(self, "GCP_PROJECT", value=cfg.project)
        TerraformOutput(self, "deploy_service_accounts", value=deploy_emails)
        TerraformOutput(self, "state_bucket", value=bucket.name)


def _platform_services(config: Bootstrap) -> set[str]:
    """The APIs a deployment's own stacks would enable (Platform.apis: GKE's container API):
    the bootstrap's, for a pipeline deployment holds no serviceusage permission."""
    return {
        svc
        for dep in config.deployments
        for svc, stack_enables, _ in platform_for(dep).apis(dep)
        if stack_enables
    }


def _condition(kind: type[_C], condition: identities.Condition | None) -> _C | None:
    if condition is None:
        return None
    return kind(
        title=condition.title, expression=condition.expression, description=condition.description
    )


def build_bootstrap_app(cfg: Bootstrap, *, outdir: str) -> App:
    app = App(outdir=outdir)
    BootstrapStack(app, BOOTSTRAP_STACK, config=cfg)
    return app


def synth_bootstrap(cfg: Bootstrap, *, outdir: str) -> None:
    """Write the bootstrap's JSON to `outdir`, creating its parents: cdktf creates the last folder
    only, so on a fresh clone (no cdktf.out yet) it failed with ENOENT on cdktf.out/bootstrap."""
    Path(outdir).mkdir(parents=True, exist_ok=True)
    build_bootstrap_app(cfg, outdir=outdir).synth()


def main() -> int:
    """Synthesize the bootstrap from BOOTSTRAP_CONFIG (else gitops.toml); exit 2 on bad config."""
    path = bootstrap_path()
    try:
        cfg = load_bootstrap(path)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    # Its own output directory: the deployments' cdktf.out/manifest.json stays theirs, and the
    # cdktf CLI's clean-up of other stacks in cdktf.out/stacks never reaches this one.
    outdir = os.environ.get("CDKTF_OUTDIR") or BOOTSTRAP_OUTDIR
    synth_bootstrap(cfg, outdir=outdir)
    print(f"synthesized the GitOps bootstrap from {path} for {cfg.config.github_repository}:")
    print(f"  {outdir}/stacks/{BOOTSTRAP_STACK}/cdk.tf.json")
    for dep in cfg.deployments:
        print(f"  environment {dep.name}: deploy identity {dep.deploy_account_id}")
    for dep in cfg.watches:
        print(f"  environment {dep.name}: upstream watch identity {dep.deploy_account_id}")
    print()
    print(github_settings_text(cfg.config))
    return 0


if __name__ == "__main__":
    sys.exit(errors.run(main))
