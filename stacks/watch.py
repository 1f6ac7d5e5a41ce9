"""The deployment's dashboard, alert policies and email channels (tpudeploy/dashboard.py and
tpudeploy/alertpolicies.py hold their JSON; this declares it)."""

from __future__ import annotations

from typing import Any

from cdktf import TerraformOutput
from cdktf_cdktf_provider_google_beta.google_logging_metric import GoogleLoggingMetric
from cdktf_cdktf_provider_google_beta.google_monitoring_alert_policy import (
    GoogleMonitoringAlertPolicy,
    GoogleMonitoringAlertPolicyConditions,
    GoogleMonitoringAlertPolicyConditionsConditionPrometheusQueryLanguage,
    GoogleMonitoringAlertPolicyDocumentation,
)
from cdktf_cdktf_provider_google_beta.google_monitoring_dashboard import GoogleMonitoringDashboard
from cdktf_cdktf_provider_google_beta.google_monitoring_notification_channel import (
    GoogleMonitoringNotificationChannel,
)
from cdktf_cdktf_provider_google_beta.google_project_service import GoogleProjectService
from constructs import Construct

from stacks.common import terraform_literal, terraform_literals
from stacks.deadline_warn import declare_log_policy
from tpudeploy import stopsoon
from tpudeploy.alertpolicies import alert_policies, email_channel
from tpudeploy.config import DeployConfig
from tpudeploy.dashboard import dashboard_json
from tpudeploy.logmetrics import tiles
from tpudeploy.platform import log_metrics_for, platform_for


def dashboard(
    scope: Construct, cfg: DeployConfig, project: str, services: list[GoogleProjectService]
) -> None:
    """The dashboard, in the long-lived stack: it costs nothing to keep, and its tiles show the
    history of every node the deployment has had, across re-creations. The Monitoring API
    (dashboards v1, alert policies v3) is enabled with the others (secrets.REQUIRED_SERVICES).
    The log-based metrics its tiles read live beside it, for the same reason."""
    metrics = log_metrics_for(cfg)
    for key, metric in metrics.items():
        log_metric(scope, key, metric, project, services)
    board = GoogleMonitoringDashboard(
        scope,
        "dashboard",
        project=project,
        # Config strings (the served model name in its title) reach the API as written, never
        # as a Terraform expression (tests/stacks/test_terraform.py's hostile config).
        dashboard_json=terraform_literal(
            dashboard_json(
                cfg,
                selector=platform_for(cfg).metrics_selector(cfg),
                extra=tiles(cfg, tuple(metrics)) + platform_for(cfg).dashboard_tiles(cfg),
            )
        ),
        depends_on=services,
    )
    # projects/P/dashboards/ID: `make dashboard` prints the console URL from it.
    TerraformOutput(scope, "dashboard_id", value=board.id)


def log_metric(
    scope: Construct,
    key: str,
    metric: dict[str, Any],
    project: str,
    services: list[GoogleProjectService],
) -> None:
    """One LogMetric (tpudeploy/logmetrics.py's JSON) as google_logging_metric."""
    body = terraform_literals(metric)
    descriptor = body["metricDescriptor"]
    buckets = body.get("bucketOptions", {}).get("explicitBuckets")
    GoogleLoggingMetric(
        scope,
        f"log-metric-{key}",
        project=project,
        name=body["name"],
        description=body["description"],
        filter=body["filter"],
        metric_descriptor={
            "metric_kind": descriptor["metricKind"],
            "value_type": descriptor["valueType"],
            "unit": descriptor["unit"],
            "labels": [
                {"key": x["key"], "value_type": x["valueType"], "description": x["description"]}
                for x in descriptor["labels"]
            ],
        },
        label_extractors=body.get("labelExtractors"),
        value_extractor=body.get("valueExtractor"),
        bucket_options={"explicit_buckets": {"bounds": buckets["bounds"]}} if buckets else None,
        depends_on=services,
    )


def _policy_args(api_policy: dict[str, Any]) -> dict[str, Any]:
    """The v3 AlertPolicy's JSON as the provider's arguments (one PromQL condition each)."""
    policy = terraform_literals(api_policy)
    condition = policy["conditions"][0]
    promql = condition["conditionPrometheusQueryLanguage"]
    doc = policy["documentation"]
    return {
        "display_name": policy["displayName"],
        "combiner": policy["combiner"],
        "user_labels": policy["userLabels"],
        "conditions": [
            GoogleMonitoringAlertPolicyConditions(
                display_name=condition["displayName"],
                condition_prometheus_query_language=(
                    GoogleMonitoringAlertPolicyConditionsConditionPrometheusQueryLanguage(
                        query=promql["query"],
                        duration=promql["duration"],
                        evaluation_interval=promql["evaluationInterval"],
                    )
                ),
            )
        ],
        "documentation": GoogleMonitoringAlertPolicyDocumentation(
            content=doc["content"], mime_type=doc["mimeType"], subject=doc["subject"]
        ),
    }


def alerts(scope: Construct, cfg: DeployConfig, project: str) -> None:
    """The alert policies and their email channels, in the billing stack `make destroy` removes
    (the node; GKE's serving stack): the no-server policy fires on absence, so it must end with
    the node or replicas it watches."""
    channels = [
        GoogleMonitoringNotificationChannel(
            scope,
            f"email-{i}",
            project=project,
            type=channel["type"],
            display_name=channel["displayName"],
            labels=channel["labels"],
            user_labels=channel["userLabels"],
        )
        for i, channel in enumerate(
            terraform_literals(email_channel(cfg, a)) for a in cfg.alerts.emails
        )
    ]
    platform = platform_for(cfg)
    policies = alert_policies(
        cfg,
        selector=platform.metrics_selector(cfg),
        channels=[c.name for c in channels],
        absence_grace_s=platform.absence_grace_s(cfg),
        log_metric_keys=tuple(log_metrics_for(cfg)),
    )
    for key, policy in policies.items():
        GoogleMonitoringAlertPolicy(
            scope,
            f"alert-{key}",
            project=project,
            # Terraform references to the channels above: never escaped.
            notification_channels=policy["notificationChannels"],
            **_policy_args(policy),
        )
    if cfg.idle.seconds is not None:
        # The idle stop's warning (a TPU VM's watcher writes it, on every provisioning model):
        # here with the node, not beside the deadline job, which a flex-start node has none of.
        idle = terraform_literals(stopsoon.idle_policy(cfg, f"TPU node {cfg.node_id}", []))
        declare_log_policy(
            scope, f"alert-{stopsoon.IDLE_SOON[0]}", project, idle, [c.name for c in channels]
        )
