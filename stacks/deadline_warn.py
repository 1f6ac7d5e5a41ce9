""" "Stops soon": the warning job and the log-based alert policies (tpudeploy/stopsoon.py holds
their JSON and says why), declared by stacks/deadline_job.py beside the deadline job, in the
same stack and on the same Terraform value, so `make extend` moves them with it."""

from __future__ import annotations

from typing import Any

from cdktf import TerraformStack
from cdktf_cdktf_provider_google_beta.google_cloud_scheduler_job import (
    GoogleCloudSchedulerJob,
    GoogleCloudSchedulerJobHttpTarget,
    GoogleCloudSchedulerJobRetryConfig,
)
from cdktf_cdktf_provider_google_beta.google_monitoring_alert_policy import (
    GoogleMonitoringAlertPolicy,
    GoogleMonitoringAlertPolicyAlertStrategy,
    GoogleMonitoringAlertPolicyAlertStrategyNotificationRateLimit,
    GoogleMonitoringAlertPolicyConditions,
    GoogleMonitoringAlertPolicyConditionsConditionMatchedLog,
    GoogleMonitoringAlertPolicyDocumentation,
)
from cdktf_cdktf_provider_google_beta.google_monitoring_notification_channel import (
    GoogleMonitoringNotificationChannel,
)
from constructs import Construct

from stacks.common import terraform_literal, terraform_literals
from tpudeploy import deadline, stopsoon
from tpudeploy.alertpolicies import email_channel
from tpudeploy.config import DeployConfig

# Stands for the deadline's Terraform reference while the config's strings are escaped.
_DEADLINE = "\x00deadline\x00"


def declare_stop_soon(
    stack: TerraformStack,
    cfg: DeployConfig,
    project: str,
    at: str,
    *,
    what: str,
    uri: str,
) -> None:
    """`at`: the deadline's Terraform reference; `uri`: what the deadline job deletes. The idle
    stop's warning is not here: it needs no deadline (a flex-start node has none) and lives
    with the node's other alerts (stacks/watch.py)."""
    declare_scheduler_job(
        stack,
        deadline.WARN_JOB_ID,
        cfg,
        name=stopsoon.warn_job_name(cfg),
        description=f"tpudeploy: warns {deadline.WARN_BEFORE} before {cfg.deadline_job_name} "
        f"deletes {what} (a read-only GET; the alert matches its run)",
        cron=deadline.warn_cron_expression(at),
        retry_config=GoogleCloudSchedulerJobRetryConfig(retry_count=stopsoon.RETRY_COUNT),
        # No identity: a public discovery document, read-only (tpudeploy/stopsoon.warn_uri).
        http_target=GoogleCloudSchedulerJobHttpTarget(
            uri=terraform_literal(stopsoon.warn_uri(uri)), http_method="GET"
        ),
    )
    if cfg.gitops_managed:
        return  # the pipeline's deploy identity holds no Monitoring permission (watching_lines)
    # Their own channels: GKE's alerts live in the serving stack, this stack is the cluster's.
    channels = [
        GoogleMonitoringNotificationChannel(
            stack,
            f"deadline-email-{i}",
            project=project,
            type=channel["type"],
            display_name=f"{channel['displayName']} (deadline)",
            labels=channel["labels"],
            user_labels=channel["userLabels"],
        ).name
        for i, channel in enumerate(
            terraform_literals(email_channel(cfg, address)) for address in cfg.alerts.emails
        )
    ]
    policy = terraform_literals(stopsoon.deadline_policy(cfg, what, _DEADLINE, []))
    declare_log_policy(stack, deadline.WARN_ALERT_ID, project, _with_deadline(policy, at), channels)


def declare_scheduler_job(
    stack: TerraformStack,
    key: str,
    cfg: DeployConfig,
    *,
    name: str,
    description: str,
    cron: str,
    retry_config: GoogleCloudSchedulerJobRetryConfig,
    http_target: GoogleCloudSchedulerJobHttpTarget,
) -> None:
    """One Cloud Scheduler job shape for the deadline job and its warning: `cron` is a Terraform
    expression of the deadline (deadline.cron_expression), so both move when it does."""
    GoogleCloudSchedulerJob(
        stack,
        key,
        name=name,
        # Cloud Scheduler's locations are not every region: [deadline] region moves the job
        # (its target URL names the zone, so any location can delete the target).
        region=cfg.deadline_region,
        description=description,
        schedule=f"${{{cron}}}",
        time_zone=deadline.TIME_ZONE,
        # Explicit: a job someone paused is drift, and the next deploy enables it again.
        paused=False,
        attempt_deadline=deadline.ATTEMPT_DEADLINE,
        retry_config=retry_config,
        http_target=http_target,
    )


def _with_deadline(value: Any, at: str) -> Any:
    if isinstance(value, str):
        return value.replace(_DEADLINE, f"${{{at}}}")
    if isinstance(value, dict):
        return {k: _with_deadline(v, at) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_deadline(v, at) for v in value]
    return value


def declare_log_policy(
    stack: Construct, key: str, project: str, policy: dict[str, Any], channels: list[str]
) -> None:
    """A log-based ("stops soon") policy of tpudeploy/stopsoon.py, its strings already made
    Terraform literals, notifying `channels`."""
    (condition,) = policy["conditions"]
    matched = condition["conditionMatchedLog"]
    doc = policy["documentation"]
    GoogleMonitoringAlertPolicy(
        stack,
        key,
        project=project,
        display_name=policy["displayName"],
        combiner=policy["combiner"],
        user_labels=policy["userLabels"],
        conditions=[
            GoogleMonitoringAlertPolicyConditions(
                display_name=condition["displayName"],
                condition_matched_log=GoogleMonitoringAlertPolicyConditionsConditionMatchedLog(
                    filter=matched["filter"], label_extractors=matched.get("labelExtractors")
                ),
            )
        ],
        alert_strategy=GoogleMonitoringAlertPolicyAlertStrategy(
            notification_rate_limit=GoogleMonitoringAlertPolicyAlertStrategyNotificationRateLimit(
                period=policy["alertStrategy"]["notificationRateLimit"]["period"]
            )
        ),
        documentation=GoogleMonitoringAlertPolicyDocumentation(
            content=doc["content"], mime_type=doc["mimeType"], subject=doc["subject"]
        ),
        notification_channels=channels,
    )
