"""Nothing bills without an end on GKE: the cluster (spot pool, flex-start pool, idle floor) gets
the TPU VM's deadline machinery, or the user opts out and is told what forgetting costs a month.

Pure tests first (config, cost, the job's request against the container API's discovery
document, the IAM fake's rule), then the synthesized stacks (deployments/gke.toml, the session's
shared synth, and one opt-out synth).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import Synthesizer, gke_local_raw
from tools.rehearsal.fakes import iamrules
from tpudeploy import deadline, facts
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.deadline_ops import extension_seconds
from tpudeploy.gke import deadline_target as gke_deadline
from tpudeploy.gke import summary
from tpudeploy.planner.cost import HOURS_PER_MONTH
from tpudeploy.tpuvm import deadline_target as tpuvm_deadline

RAW = gke_local_raw()  # local mode: tests/conftest.py says why
CFG = parse_config(RAW)
NONE = {**RAW, "max_run_duration": "none"}
PROJECT = "my-proj-123"


def _container_delete() -> tuple[str, dict[str, Any]]:
    """The container API's clusters.delete as its v1 discovery document states it."""
    from googleapiclient import discovery_cache

    doc = json.loads(discovery_cache.get_static_doc("container", "v1") or "{}")
    clusters = doc["resources"]["projects"]["resources"]["locations"]["resources"]["clusters"]
    return doc["rootUrl"], clusters["methods"]["delete"]


# ---- config and cost --------------------------------------------------------------------------


def test_a_gke_deployment_gets_a_deadline_by_default() -> None:
    # the TPU VM's default provisioning (flex-start) is not what ends a cluster's billing
    assert CFG.provisioning == "flex-start"
    assert CFG.deadline_seconds == 8 * 3600
    assert CFG.deadline_stack_name == CFG.gke_stack_name
    assert CFG.stop_role_id == "tpudeployClusterStop_gemma4_gke"


def test_none_opts_out_and_says_what_forgetting_costs_a_month() -> None:
    cfg = parse_config(NONE)
    assert cfg.deadline_seconds is None
    (line,) = [x for x in summary.summary(cfg) if x.startswith("deadline:")]
    # the idle floor plus min_replicas spot chips, each with its NAT share, for a month
    idle = sum(p.per_hour for p in facts.GKE_IDLE_PRICES["us-west4"])
    idle += facts.SYSTEM_NODE_PRICES[("us-west4", "e2-standard-2")].per_hour
    chips = cfg.gke.min_replicas * (facts.PRICES["us-west4"].per_chip_hour["spot"] + 0.0014)
    month = (idle + chips) * HOURS_PER_MONTH
    assert f"${month:,.0f}/month" in line and "nothing deletes the cluster" in line
    assert "make destroy-all" in line


def test_the_deadline_is_printed_when_it_is_on() -> None:
    (line,) = [x for x in summary.summary(CFG) if x.startswith("deadline:")]
    assert CFG.deadline_job_name in line and "+ 8 h" in line and "make extend" in line


def test_a_deadline_too_short_to_create_its_job_is_refused_with_key_value_reason_fix() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({**RAW, "max_run_duration": "10m"})
    text = str(err.value)
    assert "max_run_duration" in text and "10m" in text
    assert "GKE cluster deadline under 15 minutes" in text and 'use at least "15m"' in text


def test_the_deadline_table_is_the_same_and_validated() -> None:
    assert parse_config({**RAW, "deadline": {"region": "us-central1"}}).deadline_region == (
        "us-central1"
    )
    with pytest.raises(ConfigError) as err:
        parse_config({**RAW, "deadline": {"region": "Central US"}})
    assert "deadline.region" in str(err.value) and "Cloud Scheduler location" in str(err.value)


def test_make_extend_applies_to_the_cluster_and_not_to_an_opt_out() -> None:
    assert extension_seconds(CFG, "2h") == 7200
    with pytest.raises(deadline.ExtendError, match="the cluster has no deadline to extend"):
        extension_seconds(parse_config(NONE), "2h")


def test_the_shared_lifecycle_speaks_of_the_cluster() -> None:
    now = datetime(2026, 8, 9, 12, tzinfo=UTC)
    fired = deadline.JobView("fired", now - timedelta(hours=1))
    assert "deleted the cluster" in fired.describe(now, what=CFG.deadline_target)
    with pytest.raises(deadline.ExtendError, match="the job deleted the cluster"):
        deadline.extended(fired, 3600, now, what=CFG.deadline_target)


# ---- the job's request against the documented API -------------------------------------------


def test_the_cluster_url_is_the_documented_clusters_delete() -> None:
    root, method = _container_delete()
    assert method["id"] == "container.projects.locations.clusters.delete"
    assert method["httpMethod"] == "DELETE"
    assert "request" not in method  # the body must be empty
    template = re.escape(root + method["flatPath"])
    for param in ("projectsId", "locationsId", "clustersId"):
        template = template.replace(re.escape("{" + param + "}"), f"(?P<{param}>[^/]+)")
    found = re.fullmatch(template, gke_deadline.cluster_url(CFG, PROJECT))
    assert found is not None
    assert found.groupdict() == {
        "projectsId": PROJECT,
        "locationsId": CFG.zone,
        "clustersId": CFG.name,
    }
    name = gke_deadline.cluster_url(CFG, PROJECT).removeprefix(root + "v1/")
    assert re.fullmatch(method["parameters"]["name"]["pattern"], name)


def test_the_stop_role_holds_the_one_documented_permission() -> None:
    assert gke_deadline.STOP_PERMISSIONS == ("container.clusters.delete",)
    # the IAM fake checks it on the cluster, which only the project's policy reaches
    assert iamrules.CHECKED_ON["container.clusters.delete"] == iamrules.GKE_CLUSTER
    cluster = iamrules.gke_cluster(PROJECT, CFG.zone, CFG.name)
    assert cluster.policies == (f"cloudresourcemanager/projects/{PROJECT}",)
    stop = f"serviceAccount:{CFG.stop_account_id}@{PROJECT}.iam.gserviceaccount.com"
    binding = {"role": "projects/p/roles/r", "members": [stop]}
    perms = frozenset(gke_deadline.STOP_PERMISSIONS)
    assert iamrules.binding_grants(binding, stop, "container.clusters.delete", cluster, perms)
    node_role = frozenset(tpuvm_deadline.STOP_PERMISSIONS)
    assert not iamrules.binding_grants(
        binding, stop, "container.clusters.delete", cluster, node_role
    )


# ---- the synthesized stacks -------------------------------------------------------------------


@pytest.fixture
def stacks(synth: Synthesizer) -> dict[str, dict[str, Any]]:
    return synth(RAW)


def test_the_job_deletes_the_cluster_as_the_stop_account(
    stacks: dict[str, dict[str, Any]],
) -> None:
    _, method = _container_delete()
    res = stacks[CFG.gke_stack_name]["resource"]
    job = res["google_cloud_scheduler_job"][deadline.DEADLINE_JOB_ID]
    target = job["http_target"]
    assert target["http_method"] == method["httpMethod"]
    assert target["uri"] == gke_deadline.cluster_url(CFG, "${var.project}")
    # an OAuth token for a *.googleapis.com API (never OIDC), with a scope the method takes
    assert "oidc_token" not in target and "body" not in target
    assert target["oauth_token"]["scope"] in method["scopes"]
    assert target["oauth_token"]["service_account_email"] == (
        f"{CFG.stop_account_id}@${{var.project}}.iam.gserviceaccount.com"
    )
    assert (
        job["schedule"]
        == "${" + deadline.cron_expression(f"terraform_data.{deadline.DEADLINE_ID}.output") + "}"
    )
    held = res["terraform_data"][deadline.DEADLINE_ID]
    # renewed when a deploy creates the cluster again (after the job deleted it)
    assert held["triggers_replace"] == ["28800", "${google_container_cluster.cluster.id}"]
    # the job itself depends on nothing it deletes
    assert "depends_on" not in job


def test_the_stop_identity_holds_container_clusters_delete_only(
    stacks: dict[str, dict[str, Any]],
) -> None:
    res = stacks[CFG.secrets_stack_name]["resource"]
    (role,) = res["google_project_iam_custom_role"].values()
    assert role["permissions"] == ["container.clusters.delete"]
    assert role["role_id"] == CFG.stop_role_id
    assert res["google_service_account"]["stop-sa"]["account_id"] == CFG.stop_account_id


def test_opting_out_declares_no_job_and_no_stop_identity(synth: Synthesizer) -> None:
    cfg = parse_config(NONE)
    stacks = synth(NONE)
    cluster = stacks[cfg.gke_stack_name]
    assert "google_cloud_scheduler_job" not in cluster["resource"]
    assert "nothing deletes the cluster" in cluster["output"]["billing"]["value"]
    assert "google_project_iam_custom_role" not in stacks[cfg.secrets_stack_name]["resource"]


def test_the_stop_grant_reaches_this_cluster_only_and_only_until_the_deadline(
    stacks: dict[str, dict[str, Any]],
) -> None:
    """Items 9 and 10: the project-level grant of container.clusters.delete is conditioned on
    this cluster's name (GKE clusters give IAM conditions resource.name: iamrules.ATTRIBUTES,
    with the source) and on the request's time. The IAM fake evaluates the synthesized
    condition once Terraform's timeadd() is evaluated."""
    res = stacks[CFG.gke_stack_name]["resource"]
    (grant,) = [g for g in res["google_project_iam_member"].values() if "-stop@" in g["member"]]
    assert (
        grant["member"]
        == f"serviceAccount:{CFG.stop_account_id}@${{var.project}}.iam.gserviceaccount.com"
    )
    assert grant["role"] == f"projects/${{var.project}}/roles/{CFG.stop_role_id}"
    deadline_at = datetime(2026, 8, 9, 16, 0, tzinfo=UTC)
    hours = re.search(
        r'timeadd\(terraform_data\.deadline-time\.output, "(\d+)h"\)',
        grant["condition"]["expression"],
    )
    assert hours is not None
    expression = re.sub(
        r'\$\{timeadd\(terraform_data\.deadline-time\.output, "\d+h"\)\}',
        (deadline_at + timedelta(hours=int(hours[1]))).strftime("%Y-%m-%dT%H:%M:%SZ"),
        grant["condition"]["expression"],
    )
    member = grant["member"]
    binding = {"role": grant["role"], "members": [member], "condition": {"expression": expression}}
    held = frozenset(gke_deadline.STOP_PERMISSIONS)

    def granted(cluster: str, at: datetime, project: str = PROJECT) -> bool:
        checked = iamrules.gke_cluster(project, CFG.zone, cluster)
        return iamrules.binding_grants(
            binding, member, "container.clusters.delete", checked, held, at
        )

    assert granted(CFG.name, deadline_at)
    # IAM may name the project by number: the tail still matches
    assert granted(CFG.name, deadline_at, project=iamrules.PROJECT_NUMBER)
    # every other cluster of the project: another deployment's, a name ending with this one's
    for other in (f"{CFG.name}-b", f"x-{CFG.name}", "prod"):
        assert not granted(other, deadline_at), other
    # a year later the cron line fires again: nothing is deleted
    assert not granted(CFG.name, deadline_at.replace(year=2027))
    # were clusters to give conditions no name, the grant would never hold (fail closed)
    nameless = iamrules.Checked("container.googleapis.com/Unlisted", "x", ())
    assert not iamrules.condition_grants(expression, nameless, deadline_at)
