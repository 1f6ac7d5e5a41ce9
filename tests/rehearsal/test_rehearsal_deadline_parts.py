"""The rehearsal's parts for issue 16: the Cloud Scheduler fake (its schedule and its firing),
custom roles and the project policy, and the TPU fake's check of tpu.nodes.delete."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.fakes.cloudscheduler import next_run
from tpudeploy import deadline

PROJECT = "rehearsal-deadline"
PARENT = f"projects/{PROJECT}/locations/us-west4-a"
STOP = f"stop-account@{PROJECT}.iam.gserviceaccount.com"
# The job in a location the scheduler fake confirms (tools/rehearsal/fakes/cloudscheduler.py
# LOCATIONS: us-west4 is unconfirmed, issue 21), as [deadline] region moves it.
JOB = f"projects/{PROJECT}/locations/us-central1/jobs/n-deadline"


def call(host: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{host}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.mark.parametrize(
    ("cron", "after", "expected"),
    [
        (
            "5 16 9 8 *",
            datetime(2026, 8, 9, 12, 0, tzinfo=UTC),
            datetime(2026, 8, 9, 16, 5, tzinfo=UTC),
        ),
        # Its minute has passed this year: a year later (the cron has no year).
        (
            "5 16 9 8 *",
            datetime(2026, 8, 9, 16, 5, tzinfo=UTC),
            datetime(2027, 8, 9, 16, 5, tzinfo=UTC),
        ),
        (
            "0 0 1 1 *",
            datetime(2026, 12, 31, 23, 59, tzinfo=UTC),
            datetime(2027, 1, 1, 0, 0, tzinfo=UTC),
        ),
        (
            "30 * * * *",
            datetime(2026, 8, 9, 12, 40, tzinfo=UTC),
            datetime(2026, 8, 9, 13, 30, tzinfo=UTC),
        ),
    ],
)
def test_next_run_follows_the_cron_line(cron: str, after: datetime, expected: datetime) -> None:
    assert next_run(cron, after) == expected


def test_next_run_agrees_with_the_line_the_stacks_write() -> None:
    at = datetime(2026, 11, 30, 13, 45, tzinfo=UTC)
    assert next_run(deadline.cron_of(at), datetime(2026, 11, 30, 5, 0, tzinfo=UTC)) == at
    assert next_run("every 5 minutes", at) is None


@pytest.fixture
def cloud() -> Iterator[FakeCloud]:
    with FakeCloud() as fake:
        for service in ("iam", "tpu", "cloudscheduler"):
            call(
                fake.serviceusage.host,
                "POST",
                f"/v1/projects/{PROJECT}/services/{service}.googleapis.com:enable",
                {},
            )
        account = {"accountId": "stop-account", "serviceAccount": {}}
        assert (
            call(fake.iam.host, "POST", f"/v1/projects/{PROJECT}/serviceAccounts", account)[0]
            == 200
        )
        assert (
            call(fake.tpu.host, "POST", f"/v2/{PARENT}/nodes?nodeId=n", {"metadata": {}})[0] == 200
        )
        yield fake


def _job(cloud: FakeCloud, schedule: str = "0 0 1 1 *") -> tuple[int, Any]:
    body = {
        "name": JOB,
        "schedule": schedule,
        "timeZone": "Etc/UTC",
        "httpTarget": {
            "uri": f"https://tpu.googleapis.com/v2/{PARENT}/nodes/n",
            "httpMethod": "DELETE",
            "oauthToken": {"serviceAccountEmail": STOP},
        },
    }
    return call(cloud.cloudscheduler.host, "POST", f"/v1/{JOB.rsplit('/jobs/', 1)[0]}/jobs", body)


def _grant(cloud: FakeCloud, permissions: list[str], condition: str = "") -> None:
    role = {"roleId": "nodeStop", "role": {"title": "t", "includedPermissions": permissions}}
    status, made = call(cloud.iam.host, "POST", f"/v1/projects/{PROJECT}/roles", role)
    assert status == 200
    binding: dict[str, Any] = {"role": made["name"], "members": [f"serviceAccount:{STOP}"]}
    if condition:
        binding["condition"] = {"title": "until-deadline", "expression": condition}
    policy = {"policy": {"version": 3, "bindings": [binding]}}
    assert (
        call(cloud.resourcemanager.host, "POST", f"/v1/projects/{PROJECT}:setIamPolicy", policy)[0]
        == 200
    )


def test_the_job_deletes_the_node_with_its_accounts_one_permission(cloud: FakeCloud) -> None:
    _grant(cloud, ["tpu.nodes.delete"])
    status, job = _job(cloud)
    assert (
        status == 200
        and job["state"] == "ENABLED"
        and job["scheduleTime"].endswith("01-01T00:00:00Z")
    )
    assert cloud.cloudscheduler.fire(JOB) == 200
    assert cloud.tpu.node(f"{PARENT}/nodes/n") is None and cloud.billing() == []
    fired = cloud.cloudscheduler.job(JOB) or {}
    assert "lastAttemptTime" in fired
    # The yearly line's next run: a year after the minute it was due.
    due, following = (
        datetime.fromisoformat(job["scheduleTime"].replace("Z", "+00:00")),
        fired["scheduleTime"],
    )
    assert following.startswith(str(due.year + 1))
    assert deadline.job_view(fired, datetime.now(UTC)).status == "fired"


def test_a_year_later_the_job_fires_again_and_a_grant_that_ended_deletes_nothing(
    cloud: FakeCloud,
) -> None:
    """Issue 36 item 10. Unix-cron has no year: after its first run the job runs again at the
    same minute a year later, and `fire(at=...)` runs it then. A grant conditioned on
    request.time (the stacks' deadline + margin) holds at the first run and not at the second;
    an unconditioned grant (the stacks before issue 36) deletes the node both times."""
    _grant(cloud, ["tpu.nodes.delete"], 'request.time < timestamp("2099-01-01T01:00:00Z")')
    assert _job(cloud, "0 0 1 1 *")[0] == 200
    first = datetime(2099, 1, 1, 0, 0, tzinfo=UTC)
    assert cloud.cloudscheduler.fire(JOB, at=first) == 200
    assert cloud.tpu.node(f"{PARENT}/nodes/n") is None
    again = (cloud.cloudscheduler.job(JOB) or {})["scheduleTime"]
    assert again == "2100-01-01T00:00:00Z"
    # someone's node of the same name, a year on
    assert call(cloud.tpu.host, "POST", f"/v2/{PARENT}/nodes?nodeId=n", {"metadata": {}})[0] == 200
    assert cloud.cloudscheduler.fire(JOB, at=_parse(again)) == 403
    assert cloud.tpu.node(f"{PARENT}/nodes/n") is not None


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.mark.parametrize("permissions", [[], ["tpu.nodes.get"]])
def test_without_tpu_nodes_delete_the_node_stays(cloud: FakeCloud, permissions: list[str]) -> None:
    if permissions:
        _grant(cloud, permissions)
    assert _job(cloud)[0] == 200
    assert cloud.cloudscheduler.fire(JOB) == 403
    assert cloud.tpu.node(f"{PARENT}/nodes/n") is not None


def test_a_job_needs_the_api_an_existing_account_and_a_cron_line(cloud: FakeCloud) -> None:
    status, body = _job(cloud, schedule="every day")
    assert status == 400
    cloud.inventory.enabled[PROJECT].discard("cloudscheduler.googleapis.com")
    status, body = _job(cloud)
    assert status == 403 and "SERVICE_DISABLED" in body["error"]["message"]


def test_a_paused_job_reads_paused_and_resumes(cloud: FakeCloud) -> None:
    assert _job(cloud)[0] == 200
    host = cloud.cloudscheduler.host
    assert call(host, "POST", f"/v1/{JOB}:pause", {})[1]["state"] == "PAUSED"
    assert (
        deadline.job_view(call(host, "GET", f"/v1/{JOB}")[1], datetime.now(UTC)).status == "paused"
    )
    assert call(host, "POST", f"/v1/{JOB}:resume", {})[1]["state"] == "ENABLED"


def test_storage_lists_by_prefix_like_the_json_api(cloud: FakeCloud) -> None:
    call(
        cloud.serviceusage.host,
        "POST",
        f"/v1/projects/{PROJECT}/services/storage.googleapis.com:enable",
        {},
    )
    assert (
        call(cloud.storage.host, "POST", f"/storage/v1/b?project={PROJECT}", {"name": "b-1"})[0]
        == 200
    )
    for name in ("xla/k1/a.tar.gz", "xla/k2/b.tar.gz"):
        request = urllib.request.Request(
            f"http://{cloud.storage.host}/b-1/{name}", data=b"x", method="PUT"
        )
        urllib.request.urlopen(request, timeout=10).close()  # noqa: S310
    status, listed = call(
        cloud.storage.host, "GET", "/storage/v1/b/b-1/o?prefix=xla/k2/&maxResults=1"
    )
    assert status == 200 and [i["name"] for i in listed["items"]] == ["xla/k2/b.tar.gz"]
