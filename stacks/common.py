"""Pieces every stack shares: the google-beta provider, the project variable, Terraform pins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsii
from cdktf import (
    App,
    Aspects,
    GcsBackend,
    IAspect,
    LocalBackend,
    TerraformDataSource,
    TerraformProvider,
    TerraformResource,
    TerraformStack,
    TerraformVariable,
    TerraformVariableValidationConfig,
)
from cdktf_cdktf_provider_google_beta.provider import GoogleBetaProvider
from constructs import IConstruct

from tpudeploy import names, terraform
from tpudeploy.config import DeployConfig
from tpudeploy.gitops import STATE_PREFIX_ROOT

# One home for the version the stacks accept (tpudeploy.terraform; `make preflight` checks it).
TERRAFORM_REQUIRED_VERSION = terraform.REQUIRED_VERSION


@jsii.implements(IAspect)
class _BindToProvider:
    """Sets `provider` on every google_* resource and data source of a stack.

    The google-beta bindings emit no `provider` argument, and Terraform maps a `google_*` type to
    the implicit, unpinned hashicorp/google (GA) provider by its name prefix: the pinned
    google-beta block (project, region, labels) would never apply, and `google_tpu_v2_vm`, which
    exists only in google-beta, would go to a provider that lacks it.
    """

    def __init__(self, provider: TerraformProvider) -> None:
        self._provider = provider

    def visit(self, node: IConstruct) -> None:
        if isinstance(
            node, (TerraformResource, TerraformDataSource)
        ) and node.terraform_resource_type.startswith("google_"):
            node.provider = self._provider


def google_beta(
    stack: TerraformStack,
    *,
    project: str,
    default_labels: dict[str, str],
    region: str | None = None,
    zone: str | None = None,
) -> GoogleBetaProvider:
    """Declare the google-beta provider on `stack` and bind every google_* resource to it."""
    provider = GoogleBetaProvider(
        stack,
        "google-beta",
        project=project,
        region=region,
        zone=zone,
        default_labels=default_labels,
    )
    Aspects.of(stack).add(_BindToProvider(provider))
    return provider


def configure(stack: TerraformStack, cfg: DeployConfig) -> str:
    """Declare provider and pins on `stack`; return the project as a Terraform expression.

    Synthesizing needs no project (a newcomer runs `make synth` with no cloud access); deploying
    does, so an unset project becomes a required variable that Terraform refuses to plan without.
    """
    stack.add_override("terraform.required_version", TERRAFORM_REQUIRED_VERSION)
    if cfg.state_bucket:
        # GitOps: a runner's disk is gone after the job, so state lives in GCS, one prefix per
        # deployment and stack (two deployments share the bucket, never a state file). The GCS
        # backend locks natively (a .tflock object per prefix): no lock table to declare.
        GcsBackend(stack, bucket=cfg.state_bucket, prefix=state_prefix(cfg.name, stack.node.id))
    else:
        # Terraform runs in <outdir>/stacks/<stack>/; keep state at the repository root, outside
        # the synth output (which `make clean` removes), whichever folder it was synthesized into
        # (each deployment has its own; a plain `cdktf deploy` uses cdktf.json's).
        stack_dir = Path(App.of(stack).outdir, "stacks", stack.node.id)
        LocalBackend(stack, path=terraform.local_state_reference(stack_dir, stack.node.id))
    project = TerraformVariable(
        stack,
        "project",
        type="string",
        default=cfg.project or None,
        description="Google Cloud project id (config key `project` or GOOGLE_CLOUD_PROJECT).",
        validation=[
            TerraformVariableValidationConfig(
                # Terraform's JSON syntax reads a bare string as a literal: the condition must be
                # an interpolation, or Terraform refuses every stack at load.
                condition="${length(var.project) > 0}",
                error_message=(
                    "project is empty: set project in the deployment config or export "
                    "GOOGLE_CLOUD_PROJECT, then synthesize again."
                ),
            )
        ],
    )
    google_beta(
        stack,
        project=project.string_value,
        region=cfg.effective_region,
        zone=cfg.zone,
        default_labels={"deployment": cfg.name, "managed_by": "tpudeploy"},
    )
    return project.string_value


def state_prefix(deployment: str, stack_name: str) -> str:
    """Where a stack's state lives in the state bucket: deterministic, one per deployment+stack."""
    return f"{STATE_PREFIX_ROOT}/{deployment}/{stack_name}"


def service_account_email(cfg: DeployConfig, project: str) -> str:
    """Deterministic, so the node stack needs no cross-stack state lookup."""
    return names.service_account_email(cfg.service_account_id, project)


def terraform_literal(text: str) -> str:
    """Escape Terraform template sequences so a literal string (a bash script) reaches the cloud
    unchanged: Terraform would read `${HOME:-/root}` as an interpolation and refuse the plan."""
    return text.replace("${", "$${").replace("%{", "%%{")


def terraform_literals(value: Any) -> Any:
    """Every string in `value` (an API object: dicts, lists, strings) escaped for Terraform,
    as terraform_literal does one: an address, a filter or a document may hold `${`."""
    if isinstance(value, str):
        return terraform_literal(value)
    if isinstance(value, dict):
        return {k: terraform_literals(v) for k, v in value.items()}
    if isinstance(value, list):
        return [terraform_literals(v) for v in value]
    return value
