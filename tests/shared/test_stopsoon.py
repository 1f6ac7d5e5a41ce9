""" "Stops soon" as the APIs get it (tpudeploy/stopsoon.py): the policies are what the Monitoring
API's discovery document and its LogMatch rules accept, the fakes refuse what the APIs refuse,
two deployments in one project never match each other's entries, and make check lists the
policies and prices their conditions."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from tools.rehearsal.fakes import scheduler_rules
from tools.rehearsal.fakes.cloudscheduler import attempt_entry
from tools.rehearsal.fakes.logging_rules import parse_filter
from tools.rehearsal.fakes.monitoring_rules import problems
from tpudeploy import stopsoon
from tpudeploy.config import parse_config
from tpudeploy.platform import watching_lines

BASE = {"project": "my-proj-123", "provisioning": "spot", "idle": {"stop_after": "30m"}}
ALPHA, BETA = (parse_config({**BASE, "name": n}) for n in ("alpha", "alpha-b"))
DEADLINE = "2026-08-09T16:00:00Z"
WARNED = datetime(2026, 8, 9, 15, 30, tzinfo=UTC)  # 30 minutes before


def _policies() -> list[dict[str, Any]]:
    return [
        stopsoon.deadline_policy(ALPHA, "TPU node alpha", DEADLINE, ["projects/p/nc/1"]),
        stopsoon.idle_policy(ALPHA, "TPU node alpha", []),
    ]


@pytest.mark.parametrize("policy", _policies(), ids=["deadline", "idle"])
def test_the_policies_are_valid_log_based_alert_policies(policy: dict[str, Any]) -> None:
    assert problems(policy, "AlertPolicy") == []


def test_the_monitoring_fake_refuses_what_the_api_refuses_in_a_log_based_policy() -> None:
    policy = _policies()[0]
    no_limit = {k: v for k, v in policy.items() if k != "alertStrategy"}
    assert any("notificationRateLimit" in p for p in problems(no_limit, "AlertPolicy"))
    two = copy.deepcopy(policy)
    two["conditions"].append(
        {"displayName": "x", "conditionPrometheusQueryLanguage": {"query": "up", "duration": "0s"}}
    )
    assert any("no other condition" in p for p in problems(two, "AlertPolicy"))
    bad = copy.deepcopy(policy)
    bad["conditions"][0]["conditionMatchedLog"]["filter"] = 'resource.type="a" AND ('
    assert any("filter" in p for p in problems(bad, "AlertPolicy"))
    unknown = copy.deepcopy(policy)
    unknown["conditions"][0]["conditionMatchedLog"]["severity"] = "ERROR"
    assert any('Unknown name "severity"' in p for p in problems(unknown, "AlertPolicy"))


def _entry(cfg: Any, job_id: str) -> dict[str, Any]:
    return {
        "timestamp": "2026-08-09T15:30:00Z",
        "resource": {
            "type": "cloud_scheduler_job",
            "labels": {"job_id": job_id, "location": cfg.deadline_region},
        },
    }


def test_two_deployments_in_one_project_never_match_each_others_warning() -> None:
    # "alpha-b"'s job name starts with "alpha"'s: the filter compares the whole id.
    a = parse_filter(stopsoon.deadline_filter(ALPHA, DEADLINE))
    b = parse_filter(stopsoon.deadline_filter(BETA, DEADLINE))
    job_a, job_b = stopsoon.warn_job_name(ALPHA), stopsoon.warn_job_name(BETA)
    assert job_a != job_b
    assert a(_entry(ALPHA, job_a)) and not a(_entry(BETA, job_b))
    assert b(_entry(BETA, job_b)) and not b(_entry(ALPHA, job_a))
    after = {**_entry(ALPHA, job_a), "timestamp": "2027-08-09T15:30:00Z"}
    assert not a(after)  # a year later, past the deadline


def _warn_job(**changes: Any) -> dict[str, Any]:
    """The warning job as google_cloud_scheduler_job sends it."""
    job: dict[str, Any] = {
        "name": f"projects/p/locations/us-central1/jobs/{stopsoon.warn_job_name(ALPHA)}",
        "schedule": "30 15 9 8 *",
        "timeZone": "Etc/UTC",
        "description": "tpudeploy: warns",
        "attemptDeadline": "60s",
        "retryConfig": {"retryCount": stopsoon.RETRY_COUNT},
        "httpTarget": {
            "uri": stopsoon.warn_uri("https://tpu.googleapis.com/v2/projects/p/x"),
            "httpMethod": "GET",
        },
    }
    return {**job, **changes}


def test_the_scheduler_fake_takes_the_warning_job_and_refuses_what_the_api_refuses() -> None:
    assert scheduler_rules.problems(_warn_job()) == []
    refused = {
        "retry": _warn_job(retryConfig={"retryCount": 6}),
        "deadline short": _warn_job(attemptDeadline="10s"),
        "deadline long": _warn_job(attemptDeadline="1801s"),
        "description": _warn_job(description="x" * 501),
        "id": _warn_job(name="projects/p/locations/us-central1/jobs/a.b"),
        "uri": _warn_job(httpTarget={"uri": "tpu.googleapis.com/x", "httpMethod": "GET"}),
    }
    for what, job in refused.items():
        assert scheduler_rules.problems(job), what


def test_make_check_lists_the_warnings_and_prices_their_conditions() -> None:
    without = parse_config({**BASE, "name": "alpha", "idle": {}})
    lines, fewer = "\n".join(watching_lines(ALPHA)), "\n".join(watching_lines(without))
    assert "Deadline in 30m: billing stops then" in lines
    assert "Idle: the node stops itself soon" in lines
    assert "Idle: the node stops itself soon" not in fewer
    count = re.compile(r"\((\d+) conditions at")
    (mine,), (theirs,) = count.findall(lines), count.findall(fewer)
    assert int(mine) == int(theirs) + 1


def test_the_fake_schedulers_attempt_entry_is_what_the_warning_filter_matches() -> None:
    def entry(cfg: Any, status: int) -> dict[str, Any]:
        name = f"projects/my-proj-123/locations/{cfg.deadline_region}/jobs/"
        uri = stopsoon.warn_uri("https://tpu.googleapis.com/v2/x")
        return attempt_entry(name + stopsoon.warn_job_name(cfg), uri, status, WARNED)

    mine = parse_filter(stopsoon.deadline_filter(ALPHA, DEADLINE))
    assert mine(entry(ALPHA, 200)) and mine(entry(ALPHA, 404))  # a failed GET still warns
    assert not mine(entry(BETA, 200))
