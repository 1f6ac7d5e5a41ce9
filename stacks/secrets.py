"""Long-lived stack: the node's service account, the token's secret, its IAM, project services.

Destroying the node never touches this stack, so the user's token (the secret's versions) and the
identity that reads it outlive every re-creation of the billing part.
"""

from __future__ import annotations

from cdktf import TerraformOutput, TerraformStack
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
from constructs import Construct

from stacks.common import configure
from tpudeploy.config import DeployConfig

REQUIRED_SERVICES = (
    "compute.googleapis.com",
    "iam.googleapis.com",
    "secretmanager.googleapis.com",
    "tpu.googleapis.com",
)


class SecretsStack(TerraformStack):
    """Creates: project services, the node service account, the HF-token secret (no value) and
    secretAccessor on that one secret for that one account."""

    def __init__(self, scope: Construct, id_: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id_)
        cfg = config
        project = configure(self, cfg)

        services = [
            GoogleProjectService(
                self,
                f"service-{svc.split('.')[0]}",
                service=svc,
                # Disabling an API on destroy would break anything else in the project using it.
                disable_on_destroy=False,
            )
            for svc in REQUIRED_SERVICES
        ]

        self.service_account = GoogleServiceAccount(
            self,
            "node-sa",
            account_id=cfg.service_account_id,
            display_name=f"TPU node {cfg.name} (vLLM)",
            description="Runs the vLLM TPU node; reads only its own secrets.",
            depends_on=services,
        )

        # The secret only: its value is added by the user (`make secret`) and never passes
        # through Terraform state or the synthesized JSON.
        self.hf_token = GoogleSecretManagerSecret(
            self,
            "hf-token",
            secret_id=cfg.hf_token_secret_id,
            replication=GoogleSecretManagerSecretReplication(
                auto=GoogleSecretManagerSecretReplicationAuto()
            ),
            labels={"deployment": cfg.name},
            depends_on=services,
        )

        GoogleSecretManagerSecretIamMember(
            self,
            "hf-token-accessor",
            project=project,
            secret_id=self.hf_token.secret_id,
            role="roles/secretmanager.secretAccessor",
            member=f"serviceAccount:{self.service_account.email}",
        )

        TerraformOutput(self, "service_account_email", value=self.service_account.email)
        TerraformOutput(self, "hf_token_secret", value=self.hf_token.secret_id)
