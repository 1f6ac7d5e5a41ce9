"""GitOps bootstrap stack: the state bucket, GitHub's Workload Identity Federation, CI accounts.

Applied once per repository by a person with project-owner rights (`make bootstrap`); its own
state stays local because it creates the bucket every other stack keeps its state in.
Run as `python -m stacks.bootstrap`; nothing is synthesized at import.
"""

from __future__ import annotations

import os
import sys

from cdktf import App, LocalBackend, TerraformOutput, TerraformResourceLifecycle, TerraformStack
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
from cdktf_cdktf_provider_google_beta.google_project_iam_member import GoogleProjectIamMember
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
)
from constructs import Construct

from stacks.common import TERRAFORM_REQUIRED_VERSION, google_beta
from tpudeploy.bootstrap import BOOTSTRAP_STACK, BootstrapConfig, bootstrap_path, load_bootstrap
from tpudeploy.config import ConfigError

# Apart from the deployments' cdktf.out/stacks/ (whose manifest and clean-up are theirs); the
# bootstrap's state file itself sits at the repository root, where `make clean` never goes.
BOOTSTRAP_OUTDIR = "cdktf.out/bootstrap"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"

# APIs the federation and the state bucket need; the deployments' own APIs are enabled by their
# secrets stack (the deploy account holds serviceUsageAdmin for that).
BOOTSTRAP_SERVICES = (
    "cloudresourcemanager.googleapis.com",
    "iam.googleapis.com",
    "iamcredentials.googleapis.com",
    "serviceusage.googleapis.com",
    "storage.googleapis.com",
    "sts.googleapis.com",
)

# Project roles of the deploy account, each for what the deployment stacks declare. Predefined
# where one is narrow enough; what remains is in DEPLOYER_PERMISSIONS.
DEPLOY_ROLES = (
    "roles/tpu.admin",  # google_tpu_v2_vm and the flex-start queued resource
    # google_compute_firewall: compute.networkAdmin explicitly excludes firewall rules;
    # securityAdmin holds compute.firewalls.* without instance or network admin.
    "roles/compute.securityAdmin",
    "roles/serviceusage.serviceUsageAdmin",  # google_project_service in the secrets stack
    # actAs on the node's service account, to attach it to the TPU VM. It cannot be granted on
    # that account alone: the secrets stack creates it after this bootstrap, and IAM Conditions
    # do not scope service-account resources. See README (GitOps) for the mitigation.
    "roles/iam.serviceAccountUser",
)
# A custom role instead of serviceAccountAdmin, secretmanager.admin and storage.admin: the same
# lifecycle permissions without secret-version access (the HF token), object access (someone
# else's data) or setIamPolicy on service accounts.
DEPLOYER_PERMISSIONS = (
    # google_service_account (the node's identity)
    "iam.serviceAccounts.create",
    "iam.serviceAccounts.delete",
    "iam.serviceAccounts.disable",
    "iam.serviceAccounts.enable",
    "iam.serviceAccounts.get",
    "iam.serviceAccounts.list",
    "iam.serviceAccounts.update",
    # google_secret_manager_secret and its IAM member; no secretmanager.versions.access
    "secretmanager.secrets.create",
    "secretmanager.secrets.delete",
    "secretmanager.secrets.get",
    "secretmanager.secrets.getIamPolicy",
    "secretmanager.secrets.list",
    "secretmanager.secrets.setIamPolicy",
    "secretmanager.secrets.update",
    # the compile-cache bucket and its IAM; no storage.objects.*
    "storage.buckets.create",
    "storage.buckets.delete",
    "storage.buckets.get",
    "storage.buckets.getIamPolicy",
    "storage.buckets.list",
    "storage.buckets.setIamPolicy",
    "storage.buckets.update",
)
# Read-only roles for `terraform plan` (pull requests, drift): never roles/viewer, a basic role
# that reads every service in the project.
PLAN_ROLES = (
    "roles/tpu.viewer",
    "roles/compute.networkViewer",  # firewall rules
    "roles/secretmanager.viewer",  # secret metadata only, never a version's payload
    "roles/iam.serviceAccountViewer",
    "roles/serviceusage.serviceUsageViewer",
)
# What the predefined viewers leave out and a refresh reads: IAM policies of the secret and of
# the compile-cache bucket, and the bucket itself.
PLANNER_PERMISSIONS = (
    "secretmanager.secrets.getIamPolicy",
    "storage.buckets.get",
    "storage.buckets.getIamPolicy",
)
DEPLOYER_ROLE_ID = "tpudeployDeployer"
PLANNER_ROLE_ID = "tpudeployPlanner"


class BootstrapStack(TerraformStack):
    """Creates: the APIs federation needs, the versioned state bucket, a workload identity pool
    with a GitHub OIDC provider restricted to one repository, the deploy and plan service
    accounts (no keys), their federation grants, state-bucket grants and project roles."""

    def __init__(self, scope: Construct, id_: str, *, config: BootstrapConfig) -> None:
        super().__init__(scope, id_)
        cfg = config
        self.add_override("terraform.required_version", TERRAFORM_REQUIRED_VERSION)
        # Local on purpose: this stack creates the bucket remote state would live in. Terraform
        # runs in cdktf.out/bootstrap/stacks/<stack>/; the file lands at the repository root.
        LocalBackend(self, path=f"../../../../terraform.{id_}.tfstate")
        google_beta(
            self,
            project=cfg.project,
            default_labels={"managed_by": "tpudeploy", "component": "gitops"},
        )

        services = [
            GoogleProjectService(
                self,
                f"service-{svc.split('.')[0]}",
                service=svc,
                disable_on_destroy=False,
            )
            for svc in BOOTSTRAP_SERVICES
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
            # sub carries repository and environment/ref/pull_request; the others let bindings
            # and audit logs name the repository, its immutable id and the ref.
            attribute_mapping={
                "google.subject": "assertion.sub",
                "attribute.repository": "assertion.repository",
                "attribute.repository_id": "assertion.repository_id",
                "attribute.repository_owner_id": "assertion.repository_owner_id",
                "attribute.ref": "assertion.ref",
            },
            attribute_condition=cfg.attribute_condition,
        )

        deploy_sa = GoogleServiceAccount(
            self,
            "deploy-sa",
            account_id=cfg.deploy_account_id,
            display_name="tpudeploy GitOps deploy",
            description=f"Applies the deployments of {cfg.github_repository} from GitHub Actions.",
            depends_on=services,
        )
        plan_sa = GoogleServiceAccount(
            self,
            "plan-sa",
            account_id=cfg.plan_account_id,
            display_name="tpudeploy GitOps plan (read-only)",
            description=f"Plans and drift checks for {cfg.github_repository}; reads only.",
            depends_on=services,
        )

        # Federation: the deploy account only from jobs of a deployment's GitHub environment
        # (one principal per exact subject), the plan account from any job the provider admits.
        for env, subject in zip(cfg.environments, cfg.deploy_subjects, strict=True):
            GoogleServiceAccountIamMember(
                self,
                f"deploy-wif-{env}",
                service_account_id=deploy_sa.name,
                role="roles/iam.workloadIdentityUser",
                member=f"principal://iam.googleapis.com/{pool.name}/subject/{subject}",
            )
        GoogleServiceAccountIamMember(
            self,
            "plan-wif",
            service_account_id=plan_sa.name,
            role="roles/iam.workloadIdentityUser",
            member=(
                f"principalSet://iam.googleapis.com/{pool.name}"
                f"/attribute.repository/{cfg.github_repository}"
            ),
        )

        # State: bucket-level only. The plan account reads (plans run with -lock=false, so they
        # never need to write a lock object); the deploy account reads, writes and locks.
        GoogleStorageBucketIamMember(
            self,
            "state-deploy",
            bucket=bucket.name,
            role="roles/storage.objectAdmin",
            member=deploy_sa.member,
        )
        GoogleStorageBucketIamMember(
            self,
            "state-plan",
            bucket=bucket.name,
            role="roles/storage.objectViewer",
            member=plan_sa.member,
        )

        deployer = GoogleProjectIamCustomRole(
            self,
            "deployer-role",
            role_id=DEPLOYER_ROLE_ID,
            title="tpudeploy deployer",
            description="Lifecycle of the node SA, secrets and cache bucket; no data access.",
            permissions=list(DEPLOYER_PERMISSIONS),
        )
        planner = GoogleProjectIamCustomRole(
            self,
            "planner-role",
            role_id=PLANNER_ROLE_ID,
            title="tpudeploy planner",
            description="IAM policies and buckets a Terraform refresh reads.",
            permissions=list(PLANNER_PERMISSIONS),
        )
        for role in DEPLOY_ROLES:
            GoogleProjectIamMember(
                self,
                f"deploy-{role.removeprefix('roles/').replace('.', '-')}",
                project=cfg.project,
                role=role,
                member=deploy_sa.member,
            )
        GoogleProjectIamMember(
            self, "deploy-custom", project=cfg.project, role=deployer.id, member=deploy_sa.member
        )
        for role in PLAN_ROLES:
            GoogleProjectIamMember(
                self,
                f"plan-{role.removeprefix('roles/').replace('.', '-')}",
                project=cfg.project,
                role=role,
                member=plan_sa.member,
            )
        GoogleProjectIamMember(
            self, "plan-custom", project=cfg.project, role=planner.id, member=plan_sa.member
        )

        # The repository variables the workflows read, under the same names.
        TerraformOutput(self, "GCP_WORKLOAD_IDENTITY_PROVIDER", value=provider.name)
        TerraformOutput(self, "GCP_DEPLOY_SERVICE_ACCOUNT", value=deploy_sa.email)
        TerraformOutput(self, "GCP_PLAN_SERVICE_ACCOUNT", value=plan_sa.email)
        TerraformOutput(self, "GCP_PROJECT", value=cfg.project)
        TerraformOutput(self, "state_bucket", value=bucket.name)


def build_bootstrap_app(cfg: BootstrapConfig, *, outdir: str) -> App:
    app = App(outdir=outdir)
    BootstrapStack(app, BOOTSTRAP_STACK, config=cfg)
    return app


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
    build_bootstrap_app(cfg, outdir=outdir).synth()
    print(f"synthesized the GitOps bootstrap from {path} for {cfg.github_repository}:")
    print(f"  {outdir}/stacks/{BOOTSTRAP_STACK}/cdk.tf.json")
    print(f"  deploy environments: {', '.join(cfg.environments)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
