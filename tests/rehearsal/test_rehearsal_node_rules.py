"""The fakes refuse and do what Google does to a running node (issue 21): a metadata patch changes
the stored node and boots nothing; a mask outside the documented fields is refused; Cloud
Scheduler has only the locations its page lists, and preflight asks it before a deploy."""

# ruff: noqa: S310 - every URL opened here is a loopback fake started by the test

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.boot_sandbox import PROJECT as BOOT_PROJECT
from tests.boot_sandbox import Node
from tests.fake_tpu_api import FakeTpuApi
from tools.rehearsal.fakes.cloud import FakeCloud
from tools.rehearsal.fakes.cloudscheduler import LOCATIONS, FakeCloudScheduler
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.tpu_rules import PATCH_REBOOTS
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.gcp.apis import CLOUD_SCHEDULER
from tpudeploy.gcp.scheduler import SchedulerApi
from tpudeploy.preflight import check_scheduler_location

PROJECT = "rules-unit"
PARENT = f"projects/{PROJECT}/locations/us-west4-a"
NODE = f"{PARENT}/nodes/n"


def call(host: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://{host}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.fixture
def tpu() -> Iterator[FakeTpuApi]:
    with FakeTpuApi() as fake:
        yield fake


def _create(tpu: FakeTpuApi, script: str) -> None:
    body = {"acceleratorType": "v5litepod-1", "metadata": {"startup-script": script}}
    status, _ = call(tpu.host, "POST", f"/v2/{PARENT}/nodes?nodeId=n", body)
    assert status == 200


def test_a_metadata_patch_changes_the_node_and_boots_nothing(tpu: FakeTpuApi) -> None:
    _create(tpu, "vllm serve --old")
    assert tpu.boots(NODE) == 1
    body = {"metadata": {"startup-script": "vllm serve --new"}, "labels": {"x": "y"}}
    status, _ = call(tpu.host, "PATCH", f"/v2/{NODE}?updateMask=metadata", body)
    assert status == 200
    node = tpu.node(NODE) or {}
    assert node["metadata"]["startup-script"] == "vllm serve --new"
    assert "labels" not in node  # only the masked field changes
    assert tpu.boots(NODE) == 1 and PATCH_REBOOTS is False
    # A new VM of the same name does boot (delete, then create: a replacement).
    assert call(tpu.host, "DELETE", f"/v2/{NODE}")[0] == 200
    _create(tpu, "vllm serve --new")
    assert tpu.boots(NODE) == 2


@pytest.mark.parametrize("mask", ["acceleratorType", "metadata,runtimeVersion", ""])
def test_a_patch_outside_the_documented_fields_is_refused(tpu: FakeTpuApi, mask: str) -> None:
    _create(tpu, "vllm serve")
    status, answer = call(tpu.host, "PATCH", f"/v2/{NODE}?updateMask={mask}", {"metadata": {}})
    assert status == 400
    assert "updateMask" in answer["error"]["message"]
    assert (tpu.node(NODE) or {})["metadata"] == {"startup-script": "vllm serve"}


# ---- Cloud Scheduler: only the locations its page lists (defect 7)


@pytest.fixture
def scheduler(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCloudScheduler]:
    with FakeCloudScheduler(Inventory()) as fake:
        fake.inventory.enable(PROJECT, "cloudscheduler.googleapis.com")
        monkeypatch.setenv(CLOUD_SCHEDULER.emulator_env, fake.host)
        yield fake


def test_the_scheduler_fake_lists_its_locations_and_refuses_a_job_elsewhere(
    scheduler: FakeCloudScheduler,
) -> None:
    assert SchedulerApi(num_retries=0).location_ids(PROJECT) == list(LOCATIONS)
    assert "us-west4" not in LOCATIONS  # unconfirmed: the stored page stops at us-east4
    job = {"name": f"projects/{PROJECT}/locations/us-west4/jobs/j", "schedule": "0 1 2 3 *"}
    status, answer = call(
        scheduler.host, "POST", f"/v1/projects/{PROJECT}/locations/us-west4/jobs", job
    )
    assert status == 404 and "us-west4" in answer["error"]["message"]


def test_preflight_fails_in_a_second_when_the_deadline_region_has_no_scheduler(
    scheduler: FakeCloudScheduler,
) -> None:
    cfg = parse_config({"project": PROJECT, "provisioning": "spot"})  # us-west4-a
    check = check_scheduler_location(cfg, SchedulerApi(num_retries=0))
    assert not check.ok
    assert "Cloud Scheduler has no location us-west4" in check.line
    assert '[deadline] region = "us-central1"' in check.line
    moved = parse_config({**cfg.model_dump(), "deadline": {"region": "us-central1"}})
    assert check_scheduler_location(moved, SchedulerApi(num_retries=0)).ok
    assert moved.deadline_region == "us-central1" and cfg.deadline_region == "us-west4"


def test_preflight_only_notes_a_location_list_it_may_not_read(
    scheduler: FakeCloudScheduler,
) -> None:
    scheduler.inventory.enabled[PROJECT].discard("cloudscheduler.googleapis.com")
    cfg = parse_config({"project": PROJECT, "provisioning": "on-demand"})
    check = check_scheduler_location(cfg, SchedulerApi(num_retries=0))
    assert check.ok and check.note and "cannot list Cloud Scheduler locations" in check.line


def test_a_deadline_region_that_is_not_a_region_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"provisioning": "spot", "deadline": {"region": "us-west4-a"}})
    (problem,) = err.value.problems
    assert problem.startswith("deadline.region = 'us-west4-a': not a region name")
    assert "gcloud scheduler locations list" in problem


# ---- a private node: Google APIs always, anything else only through a Cloud NAT (defect 4)


def test_a_subnetwork_has_egress_only_once_a_nat_for_it_exists() -> None:
    with FakeCloud() as cloud:
        cloud.inventory.enable(PROJECT, "compute.googleapis.com")
        base = f"/compute/v1/projects/{PROJECT}/regions/us-west4/routers"
        assert not cloud.compute.nat_serves(PROJECT, "us-west4", "default")
        router = {"name": "r", "network": "default"}
        assert call(cloud.compute.host, "POST", base, router)[0] == 200
        assert not cloud.compute.nat_serves(PROJECT, "us-west4", "default")  # a router is no NAT
        nat = {
            "name": "n",
            "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
            "subnetworks": [{"name": "other", "sourceIpRangesToNat": ["ALL_IP_RANGES"]}],
        }
        assert call(cloud.compute.host, "PATCH", f"{base}/r", {"nats": [nat]})[0] == 200
        assert not cloud.compute.nat_serves(PROJECT, "us-west4", "default")  # another subnet
        nat["subnetworks"] = [{"name": "default", "sourceIpRangesToNat": ["ALL_IP_RANGES"]}]
        assert call(cloud.compute.host, "PATCH", f"{base}/r", {"nats": [nat]})[0] == 200
        assert cloud.compute.nat_serves(PROJECT, "us-west4", "default")
        assert not cloud.compute.nat_serves(PROJECT, "us-central1", "default")  # regional
        assert call(cloud.compute.host, "DELETE", f"{base}/r")[0] == 200
        assert not cloud.compute.nat_serves(PROJECT, "us-west4", "default")


def test_a_boot_without_egress_stops_at_the_image_pull_with_the_reason(tmp_path: Path) -> None:
    cfg = parse_config({"project": BOOT_PROJECT})
    node = Node(tmp_path, cfg, internet=False)
    assert node.run().returncode != 0
    assert node.phases()[-1] == "failed" and "starting-vllm" not in node.phases()
    assert f"docker pull {cfg.vllm.image} failed" in node.reasons()[-1]
    # The Google APIs it did reach: the metadata server and Secret Manager (reading-secrets).
    assert "pulling-image" in node.phases()


def test_a_private_config_declares_its_nat_and_a_shared_vpc_one_is_refused() -> None:
    cfg = parse_config({"network": {"enable_external_ip": False}})
    assert cfg.declares_nat and cfg.nat_subnetwork == "default"
    assert not parse_config({}).declares_nat
    assert not parse_config({"network": {"enable_external_ip": False, "nat": False}}).declares_nat
    shared = {"network": "projects/host-proj-1/global/networks/vpc", "enable_external_ip": False}
    with pytest.raises(ConfigError) as err:
        parse_config({"network": shared})
    (problem,) = err.value.problems
    assert problem.startswith("network.nat = true: a private node on a shared VPC")
    assert "nat = false" in problem


def test_a_private_pipeline_deployment_gets_its_nat_from_the_bootstrap() -> None:
    """Issue 41: the bootstrap declares a pipeline deployment's router and NAT (its owner holds
    compute.routers.*, which no condition can narrow to one router), so a private pipeline node
    is accepted; tests/gitops/test_gke_pipeline_identities.py holds its stacks free of the
    router and the bootstrap holding it."""
    data = {
        "state_bucket": "tfstate-bucket-1",
        "pipeline": True,
        "network": {"enable_external_ip": False},
    }
    assert parse_config(data).declares_nat
