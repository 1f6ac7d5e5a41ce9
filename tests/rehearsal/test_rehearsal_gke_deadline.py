"""GKE's deadline job against the fakes (issue 36 items 9 and 10): the job's clusters.delete, as
its stop account, under the grant the cluster stack declares (stacks/deadline_job.py: the
deadline plus its margin, and this cluster's name), deletes this cluster at the deadline, no
other cluster ever, and nothing when its cron line fires again a year later."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.rehearsal.test_rehearsal_gke_parts import CLUSTER, call
from tools.rehearsal.fakes.cloud import FakeCloud
from tpudeploy import deadline
from tpudeploy.config import parse_config
from tpudeploy.gke import deadline_target

PROJECT = "rehearsal-unit"
CFG = parse_config({"platform": "gke", "name": "gemma4-gke", "zone": "us-west4-a"})
CLUSTERS = f"/v1beta1/projects/{PROJECT}/locations/{CFG.zone}/clusters"
STOP = f"{CFG.stop_account_id}@{PROJECT}.iam.gserviceaccount.com"
DEADLINE = datetime(2099, 3, 4, 5, 6, tzinfo=UTC)
JOB = f"projects/{PROJECT}/locations/us-central1/jobs/"  # + the job id


def _condition() -> str:
    """The cluster stack's condition as IAM receives it: Terraform evaluated timeadd()."""
    template = deadline.grant_expression("DEADLINE", deadline_target.resource_condition(CFG))

    def add(m: re.Match[str]) -> str:
        ends = DEADLINE + timedelta(hours=int(m[1]))
        return ends.strftime("%Y-%m-%dT%H:%M:%SZ")

    return re.sub(r'\$\{timeadd\(DEADLINE, "(\d+)h"\)\}', add, template)


@pytest.fixture
def cloud() -> Iterator[FakeCloud]:
    with FakeCloud() as fake:
        for service in ("container", "iam", "cloudscheduler"):
            fake.inventory.enable(PROJECT, f"{service}.googleapis.com")
        account = {"accountId": CFG.stop_account_id, "serviceAccount": {}}
        assert (
            call(fake.iam.host, "POST", f"/v1/projects/{PROJECT}/serviceAccounts", account)[0]
            == 200
        )
        role = {
            "roleId": CFG.stop_role_id,
            "role": {"title": "t", "includedPermissions": list(deadline_target.STOP_PERMISSIONS)},
        }
        status, made = call(fake.iam.host, "POST", f"/v1/projects/{PROJECT}/roles", role)
        assert status == 200
        binding = {
            "role": made["name"],
            "members": [f"serviceAccount:{STOP}"],
            "condition": {"title": "until-deadline", "expression": _condition()},
        }
        policy = {"policy": {"version": 3, "bindings": [binding]}}
        path = f"/v1/projects/{PROJECT}:setIamPolicy"
        assert call(fake.resourcemanager.host, "POST", path, policy)[0] == 200
        for name in (CFG.name, f"{CFG.name}-b"):
            _create(fake, name)
        yield fake


def _create(cloud: FakeCloud, name: str) -> None:
    assert (
        call(cloud.container.host, "POST", CLUSTERS, {"cluster": {**CLUSTER, "name": name}})[0]
        == 200
    )


def _exists(cloud: FakeCloud, name: str) -> bool:
    return call(cloud.container.host, "GET", f"{CLUSTERS}/{name}")[0] == 200


def _job(cloud: FakeCloud, cluster: str) -> str:
    cfg = parse_config({"platform": "gke", "name": cluster, "zone": CFG.zone})
    body = {
        "name": JOB + cluster,
        "schedule": deadline.cron_of(DEADLINE),
        "timeZone": deadline.TIME_ZONE,
        "httpTarget": {
            "uri": deadline_target.cluster_url(cfg, PROJECT),
            "httpMethod": "DELETE",
            "oauthToken": {"serviceAccountEmail": STOP},
        },
    }
    assert call(cloud.cloudscheduler.host, "POST", f"/v1/{JOB.rstrip('/')}", body)[0] == 200
    return JOB + cluster


def test_the_job_deletes_its_cluster_at_the_deadline_and_nothing_a_year_later(
    cloud: FakeCloud,
) -> None:
    job = _job(cloud, CFG.name)
    assert cloud.cloudscheduler.fire(job, at=DEADLINE) == 200
    assert not _exists(cloud, CFG.name) and _exists(cloud, f"{CFG.name}-b")
    # unix-cron has no year: the same minute next year, when a cluster of that name exists
    again = (cloud.cloudscheduler.job(job) or {})["scheduleTime"]
    assert again.startswith(str(DEADLINE.year + 1))
    _create(cloud, CFG.name)
    later = datetime.fromisoformat(again.replace("Z", "+00:00"))
    assert cloud.cloudscheduler.fire(job, at=later) == 403
    assert _exists(cloud, CFG.name)


def test_the_stop_account_deletes_no_other_cluster(cloud: FakeCloud) -> None:
    job = _job(cloud, f"{CFG.name}-b")
    assert cloud.cloudscheduler.fire(job, at=DEADLINE) == 403
    assert _exists(cloud, f"{CFG.name}-b")
