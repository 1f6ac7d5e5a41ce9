"""The deadline of a spot or on-demand node: a value fixed at deploy time, and the Cloud Scheduler
job that deletes the node when it comes (tpudeploy/tpuvm/deadline.py explains the value's
lifecycle)."""

from __future__ import annotations

from cdktf import TerraformOutput, TerraformResource, TerraformStack, TerraformVariable
from cdktf import TerraformVariableValidationConfig as Validation
from cdktf_cdktf_provider_google_beta.google_cloud_scheduler_job import (
    GoogleCloudSchedulerJob,
    GoogleCloudSchedulerJobHttpTarget,
    GoogleCloudSchedulerJobHttpTargetOauthToken,
    GoogleCloudSchedulerJobRetryConfig,
)

from tpudeploy.config import DeployConfig
from tpudeploy.names import CLOUD_PLATFORM_SCOPE, service_account_email
from tpudeploy.tpuvm import deadline
from tpudeploy.tpuvm.addresses import DEADLINE_ID, DEADLINE_JOB_ID


def declare_deadline(stack: TerraformStack, cfg: DeployConfig, project: str, seconds: int) -> None:
    """terraform_data `deadline-time` (deploy time + max_run_duration, or `make extend`'s value)
    and the job deleting the node then, as the deployment's stop account (tpu.nodes.delete
    only). Neither depends on the node: `make extend` applies them with -target, which would
    pull a dependency (the VM and any change pending on it) into the apply."""
    TerraformVariable(
        stack,
        deadline.VARIABLE,
        type="string",
        default="",
        nullable=False,
        description="Set by `make extend` only: the node's new deadline (RFC 3339, UTC). Empty: "
        "the deploy's time plus max_run_duration.",
        validation=[
            Validation(
                condition=f"${{{deadline.VARIABLE_CONDITION}}}",
                error_message=f"{deadline.VARIABLE} must be an RFC 3339 UTC time, "
                "e.g. 2026-08-09T16:00:00Z.",
            )
        ],
    )
    held = TerraformResource(stack, DEADLINE_ID, terraform_resource_type="terraform_data")
    held.add_override("input", f"${{{deadline.deadline_expression(seconds)}}}")
    # Computed once: timestamp() changes at every plan, so the input is ignored afterwards and a
    # second deploy plans no change. A new max_run_duration replaces it (a new deadline from
    # that deploy); so do `make extend` (-replace with the variable) and a deploy after the
    # deadline passed (tpudeploy.tpuvm.recover taints it).
    held.add_override("lifecycle.ignore_changes", ["input"])
    held.add_override("triggers_replace", [str(seconds)])
    at = f"{held.terraform_resource_type}.{held.friendly_unique_id}.output"

    GoogleCloudSchedulerJob(
        stack,
        DEADLINE_JOB_ID,
        name=cfg.deadline_job_name,
        # Cloud Scheduler's locations are not every region: [deadline] region moves the job
        # (its target URL names the node's zone, so any location can delete the node).
        region=cfg.deadline_region,
        description=f"tpudeploy: deletes TPU node {cfg.node_id} at its deadline "
        f"(max_run_duration {seconds / 3600:g} h); make extend moves it",
        schedule=f"${{{deadline.cron_expression(at)}}}",
        time_zone=deadline.TIME_ZONE,
        # Explicit: a job someone paused is drift, and the next deploy enables it again.
        paused=False,
        attempt_deadline=deadline.ATTEMPT_DEADLINE,
        retry_config=GoogleCloudSchedulerJobRetryConfig(
            retry_count=deadline.RETRY_COUNT, min_backoff_duration=deadline.MIN_BACKOFF
        ),
        http_target=GoogleCloudSchedulerJobHttpTarget(
            uri=deadline.node_url(project, cfg.zone, cfg.node_id),
            http_method="DELETE",
            oauth_token=GoogleCloudSchedulerJobHttpTargetOauthToken(
                service_account_email=service_account_email(cfg.stop_account_id, project),
                scope=CLOUD_PLATFORM_SCOPE,
            ),
        ),
    )
    TerraformOutput(stack, "deadline", value=f"${{{at}}}")
    TerraformOutput(
        stack,
        "billing",
        value=f"{cfg.provisioning}: Cloud Scheduler job {cfg.deadline_job_name} deletes the node "
        f"at the deadline output (deploy time + {seconds / 3600:g} h); "
        "`make extend BY=2h` moves it, `make destroy` stops the billing now",
    )
