""" "Stops soon" in the synthesized stacks (issue 38): beside each deadline job, a warning job
30 minutes ahead (a read-only GET, no identity) and a log-based alert policy matching that job's
run only, before the deadline only; with [idle], a second policy on the node's warning. Each
filter, with the deadline Terraform would put in it, is run through the Logging fake's parser
against both deployments' entries (the session's two GKE deployments; the TPU VM's second
deployment is the domain-level test in tests/shared/test_stopsoon.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.conftest import Stacks, Synthesizer, gke_configs, resources
from tests.stacks.test_deadline_synth import SPOT_NONE
from tests.stacks.test_idle_flex_synth import FLEX_IDLE
from tests.stacks.test_idle_synth import IDLE
from tools.rehearsal.fakes.logging_rules import parse_filter
from tpudeploy import deadline
from tpudeploy.config import parse_config

DEADLINE = datetime(2026, 8, 9, 16, 0, tzinfo=UTC)
HELD = "${terraform_data.deadline-time.output}"


def _scheduler_entry(cfg: Any, job_id: str, at: datetime) -> dict[str, Any]:
    """A Cloud Scheduler attempt entry as the project's log holds it."""
    return {
        "logName": "projects/my-proj-123/logs/cloudscheduler.googleapis.com%2Fexecutions",
        "timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "resource": {
            "type": "cloud_scheduler_job",
            "labels": {
                "project_id": "my-proj-123",
                "job_id": job_id,
                "location": cfg.deadline_region,
            },
        },
        "jsonPayload": {"jobName": f"projects/my-proj-123/locations/x/jobs/{job_id}"},
    }


def _soon(stack: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    jobs = resources(stack, "google_cloud_scheduler_job")
    policy = resources(stack, "google_monitoring_alert_policy")[deadline.WARN_ALERT_ID]
    return jobs[deadline.WARN_JOB_ID], policy


def _filter(policy: dict[str, Any]) -> str:
    (condition,) = policy["conditions"]
    text = str(condition["condition_matched_log"]["filter"])
    return text.replace(HELD, DEADLINE.strftime("%Y-%m-%dT%H:%M:00Z"))


def test_the_tpu_vm_warns_30_minutes_ahead_with_a_harmless_request(synth: Synthesizer) -> None:
    cfg = parse_config(IDLE)
    node = synth(IDLE)[cfg.node_stack_name]
    job, policy = _soon(node)
    stop = resources(node, "google_cloud_scheduler_job")[deadline.DEADLINE_JOB_ID]
    assert job["name"] == "gemma4-v5e-deadline-soon" != stop["name"]
    assert job["region"] == stop["region"] and job["time_zone"] == "Etc/UTC"
    # A GET of a public document, as nobody: the job can change nothing.
    assert job["http_target"] == {
        "http_method": "GET",
        "uri": "https://tpu.googleapis.com/$discovery/rest?version=v2",
    }
    assert job["retry_config"] == {"retry_count": 0}
    assert policy["alert_strategy"]["notification_rate_limit"]["period"] == "3600s"
    doc = policy["documentation"]["content"]
    assert HELD in doc and "make extend BY=2h" in doc and "make destroy" in doc
    matches = parse_filter(_filter(policy))
    warned = DEADLINE - timedelta(minutes=30)
    assert matches(_scheduler_entry(cfg, job["name"], warned))
    assert not matches(_scheduler_entry(cfg, stop["name"], warned))  # the deadline job's own
    # The cron line has no year: its run a year later warns of nothing.
    assert not matches(_scheduler_entry(cfg, job["name"], warned.replace(year=2027)))
    # [idle]: the node's own warning, in the boot log (tests/node/test_idlewatch_soon.py).
    idle = resources(node, "google_monitoring_alert_policy")["alert-idle-soon"]
    (condition,) = idle["conditions"]
    assert condition["condition_matched_log"]["label_extractors"] == {
        "stops_at": "EXTRACT(jsonPayload.stops_at)"
    }
    # Escaped for Terraform: Cloud Monitoring, not Terraform, fills in the extracted label.
    assert "$${log.extracted_label.stops_at}" in idle["documentation"]["content"]


def test_two_gke_deployments_warn_each_of_its_own_deadline(
    gke_pair: tuple[Stacks, Stacks],
) -> None:
    cfgs = [parse_config(raw) for raw in gke_configs()]
    soon = [_soon(stacks[cfg.gke_stack_name]) for stacks, cfg in zip(gke_pair, cfgs, strict=True)]
    (job_a, policy_a), (job_b, policy_b) = soon
    assert job_a["name"] != job_b["name"]
    assert job_a["http_target"]["uri"] == (
        "https://container.googleapis.com/$discovery/rest?version=v1"
    )
    warned = DEADLINE - timedelta(minutes=30)
    a, b = parse_filter(_filter(policy_a)), parse_filter(_filter(policy_b))
    assert a(_scheduler_entry(cfgs[0], job_a["name"], warned))
    assert not a(_scheduler_entry(cfgs[1], job_b["name"], warned))
    assert b(_scheduler_entry(cfgs[1], job_b["name"], warned))
    assert not b(_scheduler_entry(cfgs[0], job_a["name"], warned))
    # GKE runs no idle watcher: no idle policy.
    for stacks, cfg in zip(gke_pair, cfgs, strict=True):
        assert "alert-idle-soon" not in resources(
            stacks[cfg.gke_stack_name], "google_monitoring_alert_policy"
        )


def test_a_flex_start_node_with_no_deadline_still_warns_of_its_idle_stop(
    synth: Synthesizer,
) -> None:
    """Flex-start has no deadline job (its queued resource ends the run), but its idle watcher
    stops it all the same (issue 39): the idle warning is the node's, not the deadline's."""
    cfg = parse_config(FLEX_IDLE)
    node = synth(FLEX_IDLE)[cfg.node_stack_name]
    assert resources(node, "google_cloud_scheduler_job") == {}
    policies = resources(node, "google_monitoring_alert_policy")
    assert deadline.WARN_ALERT_ID not in policies
    (condition,) = policies["alert-idle-soon"]["conditions"]
    matches = parse_filter(str(condition["condition_matched_log"]["filter"]))
    entry = {
        "logName": "projects/my-proj-123/logs/tpudeploy-boot",
        "labels": {"tpudeploy_deployment": cfg.name},
        "jsonPayload": {"phase": "idle", "event": "stops-soon", "stops_at": "2026-08-09T16:00Z"},
    }
    assert matches(entry)
    assert not matches({**entry, "labels": {"tpudeploy_deployment": f"{cfg.name}-b"}})


def test_no_deadline_no_warning(synth: Synthesizer) -> None:
    node = synth(SPOT_NONE)[parse_config(SPOT_NONE).node_stack_name]
    assert resources(node, "google_cloud_scheduler_job") == {}
    assert deadline.WARN_ALERT_ID not in resources(node, "google_monitoring_alert_policy")
