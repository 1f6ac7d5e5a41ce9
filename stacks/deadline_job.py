"""A deployment's deadline: a value fixed at deploy time, and the Cloud Scheduler job that
deletes what bills when it comes (tpudeploy/deadline.py explains the value's lifecycle). Both
platforms declare it through declare_deadline: the TPU VM's node stack (the node) and GKE's
cluster stack (the cluster, its pools and its idle floor). With them, for a local deployment,
the stop account's one grant, which ends an hour after the deadline: the job's cron line fires
again every year, and a year on it must delete nothing (issue 36 item 10)."""

from __future__ import annotations

from collections.abc import Sequence

from cdktf import TerraformOutput, TerraformResource, TerraformStack, TerraformVariable
from cdktf import TerraformVariableValidationConfig as Validation
from cdktf_cdktf_provider_google_beta.google_cloud_scheduler_job import (
    GoogleCloudSchedulerJobHttpTarget,
    GoogleCloudSchedulerJobHttpTargetOauthToken,
    GoogleCloudSchedulerJobRetryConfig,
)
from cdktf_cdktf_provider_google_beta.google_project_iam_member import (
    GoogleProjectIamMember,
    GoogleProjectIamMemberCondition,
)

from stacks.deadline_warn import declare_scheduler_job, declare_stop_soon
from tpudeploy import deadline
from tpudeploy.config import DeployConfig
from tpudeploy.names import CLOUD_PLATFORM_SCOPE, service_account_email


def declare_deadline(
    stack: TerraformStack,
    cfg: DeployConfig,
    project: str,
    seconds: int,
    *,
    what: str,
    uri: str,
    renew_on: Sequence[str] = (),
    resource_condition: str = "",
    self_stop_email: str = "",
) -> None:
    """terraform_data `deadline-time` (deploy time + max_run_duration, or `make extend`'s value)
    and the job sending DELETE `uri` then, as the deployment's stop account (one permission:
    the delete). `what` names the target in the job's description and outputs.

    Neither depends on what it deletes: `make extend` applies them with -target, which would
    pull a dependency (the VM and any change pending on it) into the apply. `renew_on`: values
    known while what the job deletes exists and unknown when a deploy creates it again (its
    id): creating it starts a new deadline. The TPU VM passes none (tpudeploy.tpuvm.recover
    renews it); GKE passes the cluster's id, which ties the deadline to the cluster (`make
    extend` then also plans the cluster, and refuses when that plan would change it:
    tpudeploy.deadline_ops.extend).

    The stop account's grant (local deployments; a pipeline deployment's is the bootstrap's)
    holds while the request is made before the deadline plus deadline.GRANT_MARGIN, and
    `resource_condition` (the target's own name, where IAM conditions see it) holds. It hangs
    on the deadline's value, so `make extend` and a new deadline replace it with the job.

    `self_stop_email`: the node's own account, for the idle stop ([idle] stop_after, issue 39):
    it gets the same role under the same condition, so the idle node can delete itself. No
    narrower grant exists: Cloud TPU keeps no policy per node and gives IAM conditions no
    resource name (tools/rehearsal/fakes/iamrules.py ATTRIBUTES), so a grant conditioned on
    the node's name never grants, and an unconditioned one reaches every node in the project.
    Running the deadline job now (Cloud Scheduler's jobs.run: "Authorization requires the
    following IAM permission on the specified resource name: cloudscheduler.jobs.run",
    scheduler/docs/reference/rest/v1/projects.locations.jobs/run) is no narrower: a job keeps
    no policy of its own (the jobs API has no setIamPolicy; the roles page gives "Lowest-level
    resources where you can grant this role: Project", iam/docs/roles-permissions/
    cloudscheduler, read for Cloud Scheduler Admin, the Job Runner row cut off in the stored
    copy), and Cloud Scheduler gives conditions no name, so the node could run every job in the
    project, each as its own identity (another deployment's deadline job deletes its node, or
    its whole GKE cluster), and a flex-start node has no deadline job to run. The self-delete
    reaches TPU nodes only, ends with the deadline, and its holder is the one account the node
    already trusts with its secrets; docs/security.md names the residual risk (another
    deployment's node)."""
    TerraformVariable(
        stack,
        deadline.VARIABLE,
        type="string",
        default="",
        nullable=False,
        description=f"Set by `make extend` only: {what}'s new deadline (RFC 3339, UTC). Empty: "
        "the deploy's time plus max_run_duration.",
        validation=[
            Validation(
                condition=f"${{{deadline.VARIABLE_CONDITION}}}",
                error_message=f"{deadline.VARIABLE} must be an RFC 3339 UTC time, "
                "e.g. 2026-08-09T16:00:00Z.",
            )
        ],
    )
    held = TerraformResource(stack, deadline.DEADLINE_ID, terraform_resource_type="terraform_data")
    held.add_override("input", f"${{{deadline.deadline_expression(seconds)}}}")
    # Computed once: timestamp() changes at every plan, so the input is ignored afterwards and a
    # second deploy plans no change. A new max_run_duration replaces it (a new deadline from
    # that deploy); so do `make extend` (-replace with the variable) and a deploy after the
    # deadline passed (the TPU VM: tpudeploy.tpuvm.recover taints it; GKE: creating the cluster
    # again, which the job deleted, replaces it).
    held.add_override("lifecycle.ignore_changes", ["input"])
    # (Measured with Terraform 1.11.4: replace_triggered_by does not fire when the referenced
    # resource is created, and fires on its in-place updates; an id in triggers_replace is
    # unknown exactly when the resource is (re)created.)
    held.add_override("triggers_replace", [str(seconds), *renew_on])
    at = f"{held.terraform_resource_type}.{held.friendly_unique_id}.output"
    stop_email = service_account_email(cfg.stop_account_id, project)

    declare_scheduler_job(
        stack,
        deadline.DEADLINE_JOB_ID,
        cfg,
        name=cfg.deadline_job_name,
        description=f"tpudeploy: deletes {what} at its deadline "
        f"(max_run_duration {seconds / 3600:g} h); make extend moves it",
        cron=deadline.cron_expression(at),
        retry_config=GoogleCloudSchedulerJobRetryConfig(
            retry_count=deadline.RETRY_COUNT, min_backoff_duration=deadline.MIN_BACKOFF
        ),
        http_target=GoogleCloudSchedulerJobHttpTarget(
            uri=uri,
            http_method="DELETE",
            # An OAuth access token, not OIDC: the target is a Google API on *.googleapis.com
            # (Cloud Scheduler, "Use authentication with HTTP targets").
            oauth_token=GoogleCloudSchedulerJobHttpTargetOauthToken(
                service_account_email=stop_email,
                scope=CLOUD_PLATFORM_SCOPE,
            ),
        ),
    )
    role = f"projects/{project}/roles/{cfg.stop_role_id}"

    def _stop_grant(id_: str, email: str, title: str, description: str) -> None:
        # One grant shape for both holders: the stop role, until the deadline + GRANT_MARGIN.
        GoogleProjectIamMember(
            stack,
            id_,
            project=project,
            role=role,
            member=f"serviceAccount:{email}",
            condition=GoogleProjectIamMemberCondition(
                title=title,
                description=description,
                expression=deadline.grant_expression(at, resource_condition),
            ),
        )

    if not cfg.gitops_managed:
        _stop_grant(
            deadline.DEADLINE_GRANT_ID,
            stop_email,
            "until-deadline",
            f"{cfg.deadline_job_name} deletes {what} until its deadline "
            f"+ {deadline.GRANT_MARGIN}, never a year later",
        )
    if self_stop_email and not cfg.gitops_managed:
        _stop_grant(
            deadline.IDLE_GRANT_ID,
            self_stop_email,
            "idle-stop-until-deadline",
            f"{what} deletes itself after {cfg.idle.stop_after} idle, until "
            f"its deadline + {deadline.GRANT_MARGIN}",
        )
    # "Stops soon" (issue 38): a warning job deadline.WARN_BEFORE ahead, and its alert.
    declare_stop_soon(stack, cfg, project, at, what=what, uri=uri)
    TerraformOutput(stack, "deadline", value=f"${{{at}}}")
    TerraformOutput(
        stack,
        "billing",
        value=f"Cloud Scheduler job {cfg.deadline_job_name} deletes {what} at the deadline output "
        f"(deploy time + {seconds / 3600:g} h); `make extend BY=2h` moves it, `make destroy` "
        "stops the billing now",
    )
