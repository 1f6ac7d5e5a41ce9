"""Long-lived stack: the node's service account, its secrets, the compile-cache bucket, IAM.

Destroying the node never touches this stack, so the user's token, API key and front-door
certificate (the secrets' versions: every re-created node serves the same certificate, so
agents' pins survive), the identity that reads them and the XLA compile cache outlive every
re-creation of the billing part.
"""

from __future__ import annotations

from cdktf import TerraformOutput, TerraformStack
from cdktf_cdktf_provider_google_beta.google_project_iam_custom_role import (
    GoogleProjectIamCustomRole,
)
from cdktf_cdktf_provider_google_beta.google_project_iam_member import GoogleProjectIamMember
from cdktf_cdktf_provider_google_beta.google_project_service import GoogleProjectService
from cdktf_cdktf_provider_google_beta.google_secret_manager_secret import (
    GoogleSecretManagerSecret,
    GoogleSecretManagerSecretReplication,
    GoogleSecretManagerSecretReplicationAuto,
)
from cdktf_cdktf_provider_google_beta.google_secret_manager_secret_iam_member import (
    GoogleSecretManagerSecretIamMember,
)
from cdktf_cdktf_provider_google_beta.google_service_account import GoogleServiceAccount
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

from stacks.common import TERRAFORM_REQUIRED_VERSION, configure, service_account_email
from stacks.watch import dashboard
from tpudeploy.config import DeployConfig
from tpudeploy.platform import platform_for
from tpudeploy.render import cache_bucket_grants
from tpudeploy.tpuvm.deadline_target import needs_stop_role, stop_role_permissions

REQUIRED_SERVICES = (
    "cloudscheduler.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",  # the dashboard's log-based metrics (stacks/watch.py)
    "monitoring.googleapis.com",  # the dashboard and alert policies (stacks/watch.py)
    "secretmanager.googleapis.com",
    "storage.googleapis.com",
    "tpu.googleapis.com",
)


def node_account(
    scope: Construct, id_: str, cfg: DeployConfig, services: list[GoogleProjectService]
) -> GoogleServiceAccount:
    """The node's service account: declared here for a local deployment and by the GitOps
    bootstrap for a pipeline one, the same account either way. On GKE it runs the nodes only
    (Platform.node_reads_secrets): the pods read the secrets as their own identity."""
    reads = platform_for(cfg).node_reads_secrets
    return GoogleServiceAccount(
        scope,
        id_,
        account_id=cfg.service_account_id,
        display_name=f"TPU node {cfg.name} (vLLM)" if reads else f"GKE nodes {cfg.name}",
        description="Runs the vLLM TPU node; reads only its own secrets."
        if reads
        else "Runs the GKE nodes: node logging and monitoring only, no secret, no cache.",
        depends_on=services,
    )


def stop_account(
    scope: Construct, id_: str, cfg: DeployConfig, services: list[GoogleProjectService]
) -> GoogleServiceAccount:
    """The deadline job's identity, shared with the GitOps bootstrap like node_account."""
    one, many = platform_for(cfg).stop_nouns
    return GoogleServiceAccount(
        scope,
        id_,
        account_id=cfg.stop_account_id,
        display_name=f"{one} {cfg.name} deadline",
        description=f"The deadline job's identity: deletes {many}, nothing else.",
        depends_on=services,
    )


def node_secret(
    scope: Construct,
    id_: str,
    cfg: DeployConfig,
    secret_id: str,
    services: list[GoogleProjectService],
) -> str:
    """A secret without a version (the user adds the value with `make secret` / `make api-key`,
    so it never passes through Terraform state or the synthesized JSON); the node reads it at
    boot. Declared by the secrets stack locally and by the GitOps bootstrap for a pipeline
    deployment. Returns its secret id."""
    secret = GoogleSecretManagerSecret(
        scope,
        id_,
        secret_id=secret_id,
        replication=GoogleSecretManagerSecretReplication(
            auto=GoogleSecretManagerSecretReplicationAuto()
        ),
        labels={"deployment": cfg.name},
        depends_on=services,
    )
    return secret.secret_id


def _construct_id(cfg: DeployConfig, secret_id: str) -> str:
    """ "hf-token", "api-key", "tls": a secret's construct id (its Terraform address)."""
    return secret_id.removeprefix(f"{cfg.name}-")


def compile_cache_bucket(
    scope: Construct,
    id_: str,
    cfg: DeployConfig,
    project: str,
    services: list[GoogleProjectService],
) -> GoogleStorageBucket:
    """The compile-cache bucket, shared with the GitOps bootstrap like node_account."""
    # The XLA compile cache outlives the VM (a spot preemption or the end of a flex-start run
    # deletes the disk; seed: cold boot 857 s, warm 497 s). The cache is code the node runs,
    # so only the node's account gets object access here: no public access, no ACLs
    # (uniform access), no project-level grant. Versioning keeps what an operator replaces
    # or deletes for a week; force_destroy stays false so `destroy-all` never deletes a
    # cache silently.
    return GoogleStorageBucket(
        scope,
        id_,
        name=cfg.compile_cache_bucket(project),
        location=cfg.home_region.upper(),
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        force_destroy=False,
        versioning=GoogleStorageBucketVersioning(enabled=True),
        lifecycle_rule=[
            GoogleStorageBucketLifecycleRule(
                action=GoogleStorageBucketLifecycleRuleAction(type="Delete"),
                condition=GoogleStorageBucketLifecycleRuleCondition(
                    with_state="ARCHIVED", days_since_noncurrent_time=7
                ),
            )
        ],
        labels={"deployment": cfg.name},
        depends_on=services,
    )


class SecretsStack(TerraformStack):
    """Creates: project services, the node service account and, for spot and on-demand with a
    deadline (and GKE), the deadline job's account with a custom role holding tpu.nodes.delete
    (GKE: container.clusters.delete) only (granted by the billing stack with the job, until the
    deadline: stacks/deadline_job.py), the
    HF-token, API-key and TLS secrets (no values) and the compile-cache bucket (all of these
    left to the GitOps bootstrap for a pipeline deployment); on the TPU VM, secretAccessor on
    each of those secrets for the node's account, and on the bucket read and create for that
    account, never replace or delete. On GKE the node account gets the project roles running
    nodes needs and nothing else: the cluster stack grants the secrets and the cache to the
    pods' identity."""

    def __init__(self, scope: Construct, id_: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id_)
        cfg = config
        project = configure(self, cfg)

        if cfg.gitops_managed:
            # A pipeline deployment: the GitOps bootstrap enables these APIs and creates the node's
            # account, so that each deployment's deploy identity holds serviceAccountUser on that
            # one account and no Service Usage or service-account admin rights at all (README,
            # GitOps). The account is referenced by its deterministic email.
            services: list[GoogleProjectService] = []
            self.service_account_email = service_account_email(cfg, project)
        else:
            services = [
                GoogleProjectService(
                    self,
                    f"service-{svc.split('.')[0]}",
                    service=svc,
                    # Disabling an API on destroy would break anything else using it.
                    disable_on_destroy=False,
                )
                for svc in REQUIRED_SERVICES
            ]
            self.service_account_email = node_account(self, "node-sa", cfg, services).email

        if cfg.gitops_managed:
            # A pipeline deployment's secrets and bucket are the bootstrap's (their create
            # permissions are checked on the project, where no condition can name them; see
            # tpudeploy/identities.py): this stack grants its node account access to them, by
            # their deterministic names.
            # By construct id (the accessor's address), as the else branch keys them.
            read: dict[str, str] = {
                _construct_id(cfg, secret_id): secret_id
                for secret_id, _ in platform_for(cfg).secrets(cfg)
            }
            bucket_name: str = cfg.compile_cache_bucket(project)
            # A pipeline deployment that predates this declared them here: forget them from
            # this stack's state without destroying them (Terraform >= 1.7 `removed` blocks; a
            # no-op when they were never in it), so the token's versions and the cache survive
            # the upgrade; docs/gitops.md says how the bootstrap imports them.
            self.add_override(
                "terraform.required_version", f"{TERRAFORM_REQUIRED_VERSION}, >= 1.7.0"
            )
            self.add_override(
                "removed",
                [
                    {"from": address, "lifecycle": {"destroy": False}}
                    for address in (
                        *(f"google_secret_manager_secret.{id_}" for id_ in read),
                        "google_storage_bucket.compile-cache",
                    )
                ],
            )
        else:
            # Every secret the platform's servers read (the token, the API key, the front
            # door's one certificate: tpudeploy/replicasecrets.py); on GKE the cluster stack
            # grants them to the serving identity.
            read = {
                _construct_id(cfg, secret_id): node_secret(
                    self, _construct_id(cfg, secret_id), cfg, secret_id, services
                )
                for secret_id, _ in platform_for(cfg).secrets(cfg)
            }
            bucket_name = compile_cache_bucket(self, "compile-cache", cfg, project, services).name
        node_reads = platform_for(cfg).node_reads_secrets
        if node_reads:
            # One grant per secret (the TPU VM's node reads each at boot), never one on the
            # project: the node reads its own deployment's secrets and no other's.
            for id_, secret_id in read.items():
                self._accessor(cfg, id_, secret_id, project)
        # A pipeline deployment's are the bootstrap's (Platform.pipeline.project_members): a
        # grant on the project takes setIamPolicy on it, which no condition narrows to a member.
        for role in () if cfg.gitops_managed else platform_for(cfg).node_project_roles:
            GoogleProjectIamMember(
                self,
                f"node-{role.rsplit('.', 1)[-1]}",
                project=project,
                role=role,
                member=f"serviceAccount:{self.service_account_email}",
            )

        # Read and create, nothing else: replacing an object needs storage.objects.delete, which
        # neither role has, so a node (even a compromised one) can add a cache entry but never
        # change one a later node will restore. The boot script also uploads with the
        # precondition x-goog-if-generation-match: 0 (create only). Create is conditioned on the
        # object's name (tpudeploy.render.cache_write_condition): this configuration's key only,
        # so a node cannot plant archives for a configuration it does not serve.
        grants = cache_bucket_grants(cfg, cfg.compile_cache_bucket(project)) if node_reads else {}
        for suffix, (role, condition) in grants.items():
            GoogleStorageBucketIamMember(
                self,
                f"compile-cache-{suffix}",
                bucket=bucket_name,
                role=role,
                member=f"serviceAccount:{self.service_account_email}",
                condition=GoogleStorageBucketIamMemberCondition(**condition) if condition else None,
            )

        if needs_stop_role(cfg) and not cfg.gitops_managed:
            self._stop_identity(cfg, project, services)
        if not cfg.gitops_managed:  # its deploy identity holds no Monitoring permissions
            dashboard(self, cfg, project, services)

        TerraformOutput(self, "service_account_email", value=self.service_account_email)
        TerraformOutput(self, "hf_token_secret", value=read["hf-token"])
        # The first [access] client's (cfg.api_key_secret_id): what `make smoke` reads.
        TerraformOutput(
            self, "api_key_secret", value=read[_construct_id(cfg, cfg.api_key_secret_id)]
        )
        TerraformOutput(self, "compile_cache_bucket", value=bucket_name)

    def _stop_identity(
        self, cfg: DeployConfig, project: str, services: list[GoogleProjectService]
    ) -> None:
        """The account the deadline job acts as, and its role holding tpu.nodes.delete (GKE:
        container.clusters.delete) and nothing else. Long-lived like the node's account: `make
        destroy` keeps them. The grant is the billing stack's, with the job: it ends with the
        deadline (stacks/deadline_job.py). Cloud TPU has no per-node policy and gives IAM
        conditions no resource name, and a GKE cluster no policy of its own, so the grant is on
        the project (GKE: conditioned on the cluster's name; README, residual risks); a
        pipeline deployment gets an unconditioned one from the GitOps bootstrap."""
        stop_account(self, "stop-sa", cfg, services)
        GoogleProjectIamCustomRole(
            self,
            "stop-role",
            role_id=cfg.stop_role_id,
            title=cfg.stop_role_id,
            description=f"Delete {platform_for(cfg).stop_nouns[1]}: the deadline job of {cfg.name}",
            # One node's rungs each stop their own way (tpudeploy/tpuvm/deadline_target.py);
            # GKE's cluster has one.
            permissions=list(
                stop_role_permissions(cfg)
                if cfg.section.one_node
                else platform_for(cfg).stop_permissions
            ),
            depends_on=services,
        )

    def _accessor(self, cfg: DeployConfig, id_: str, secret_id: str, project: str) -> None:
        """The node's account reads the secret; nobody else this stack grants."""
        GoogleSecretManagerSecretIamMember(
            self,
            f"{id_}-accessor",
            project=project,
            secret_id=secret_id,
            role="roles/secretmanager.secretAccessor",
            member=f"serviceAccount:{self.service_account_email}",
        )
