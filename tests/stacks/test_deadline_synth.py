"""Synthesis: the deadline job of spot and on-demand nodes, its identity, and its absence.

Expected values are written from Google's documented formats (the TPU v2 REST reference's
nodes.delete URL, service-account emails), not read from the code under test.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import Synthesizer, resources
from tools.rehearsal.fakes import iamrules
from tpudeploy.deadline import DEADLINE_JOB_ID

PROJECT = "my-proj-123"
NAME = "gemma4-v5e"
SPOT = {"project": PROJECT, "provisioning": "spot"}
ON_DEMAND = {
    "project": PROJECT,
    "provisioning": "on-demand",
    "network": {"allowed_cidrs": ["203.0.113.0/24"], "enable_external_ip": False},
}
# Opted out, and a shorter deadline: one more configuration each.
SPOT_NONE = {"project": PROJECT, "provisioning": "spot", "max_run_duration": "none"}
SPOT_90M = {"project": PROJECT, "provisioning": "spot", "max_run_duration": "90m"}


def _node(synth: Synthesizer, overrides: dict[str, Any]) -> dict[str, Any]:
    stack: dict[str, Any] = synth(overrides)[f"{NAME}-node"]
    return stack


def _secrets(synth: Synthesizer, overrides: dict[str, Any]) -> dict[str, Any]:
    stack: dict[str, Any] = synth(overrides)[f"{NAME}-secrets"]
    return stack


@pytest.mark.parametrize("overrides", [SPOT, ON_DEMAND], ids=["spot", "on-demand"])
def test_the_job_deletes_this_node_as_the_stop_account(
    synth: Synthesizer, overrides: dict[str, Any]
) -> None:
    node = _node(synth, overrides)
    job = resources(node, "google_cloud_scheduler_job")[DEADLINE_JOB_ID]
    target = job["http_target"]
    assert target["http_method"] == "DELETE"
    # nodes.delete: DELETE https://tpu.googleapis.com/v2/{name=projects/*/locations/*/nodes/*};
    # the project is the stack's variable, whose default is the config's project.
    assert node["variable"]["project"]["default"] == PROJECT
    assert target["uri"] == (
        "https://tpu.googleapis.com/v2/projects/${var.project}/locations/us-west4-a/nodes/" + NAME
    )
    assert "body" not in target  # the request body must be empty
    token = target["oauth_token"]
    assert token["service_account_email"] == f"{NAME}-stop@${{var.project}}.iam.gserviceaccount.com"
    assert token["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    assert job["name"] == f"{NAME}-deadline"
    assert job["time_zone"] == "Etc/UTC"
    assert job["paused"] is False
    assert job["retry_config"]["retry_count"] >= 3
    # No dependency on the node: make extend's -target would pull the VM into its apply.
    assert "depends_on" not in job


@pytest.mark.parametrize(
    ("overrides", "seconds"), [(SPOT, 8 * 3600), (SPOT_90M, 90 * 60)], ids=["8h", "90m"]
)
def test_the_schedule_comes_from_deploy_time_plus_the_duration(
    synth: Synthesizer, overrides: dict[str, Any], seconds: int
) -> None:
    node = _node(synth, overrides)
    job = resources(node, "google_cloud_scheduler_job")[DEADLINE_JOB_ID]
    (held_id,) = [
        k for k, v in resources(node, "terraform_data").items() if "timestamp()" in v["input"]
    ]
    held = resources(node, "terraform_data")[held_id]
    assert f'timeadd(timestamp(), "{seconds}s")' in held["input"]
    # Computed once, replaced when the duration changes.
    assert held["lifecycle"] == {"ignore_changes": ["input"]}
    assert held["triggers_replace"] == [str(seconds)]
    # The cron line is the deadline's minute, hour, day and month (checked against real
    # Terraform in tests/stacks/test_terraform_deadline.py).
    assert job["schedule"] == f"${{formatdate(\"m h D M '*'\", terraform_data.{held_id}.output)}}"
    assert node["output"]["deadline"]["value"] == f"${{terraform_data.{held_id}.output}}"


@pytest.mark.parametrize("overrides", [SPOT, ON_DEMAND], ids=["spot", "on-demand"])
def test_the_stop_account_holds_one_permission_until_the_deadline(
    synth: Synthesizer, overrides: dict[str, Any]
) -> None:
    """The role (secrets stack, long-lived) holds tpu.nodes.delete only; its one grant is the
    node stack's, with the job, and conditioned on the deadline (issue 36 item 10)."""
    secrets, node = _secrets(synth, overrides), _node(synth, overrides)
    accounts = {
        a["account_id"]: cid for cid, a in resources(secrets, "google_service_account").items()
    }
    stop = accounts[f"{NAME}-stop"]
    email = f"{NAME}-stop@${{var.project}}.iam.gserviceaccount.com"
    ((_, role),) = resources(secrets, "google_project_iam_custom_role").items()
    assert role["permissions"] == ["tpu.nodes.delete"]

    def grants(stack: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            g
            for rtype, items in stack["resource"].items()
            if rtype.endswith(("_iam_member", "_iam_binding", "_iam_policy"))
            for g in items.values()
            if f"google_service_account.{stop}." in json.dumps(g) or email in json.dumps(g)
        ]

    assert grants(secrets) == []
    (grant,) = grants(node)
    assert grant["role"] == f"projects/${{var.project}}/roles/{role['role_id']}"
    assert grant["member"] == f"serviceAccount:{email}"
    assert "request.time" in grant["condition"]["expression"]


def _at(expression: str, deadline: datetime) -> str:
    """The condition as IAM gets it once Terraform evaluated the deadline's timeadd()."""

    def add(m: re.Match[str]) -> str:
        return (deadline + timedelta(hours=int(m["hours"]))).strftime("%Y-%m-%dT%H:%M:%SZ")

    pattern = r'\$\{timeadd\(terraform_data\.deadline-time\.output, "(?P<hours>\d+)h"\)\}'
    out = re.sub(pattern, add, expression)
    assert "${" not in out, out
    return out


def test_a_year_later_the_stop_grant_deletes_nothing(synth: Synthesizer) -> None:
    """Cloud Scheduler's cron line has no year: the job fires again a year after the deadline.
    The IAM fake evaluates the synthesized condition: the delete is granted at the deadline and
    during its retries, refused a year later (and a day later)."""
    (grant,) = resources(_node(synth, SPOT), "google_project_iam_member").values()
    deadline = datetime(2026, 8, 9, 16, 0, tzinfo=UTC)
    expression = _at(grant["condition"]["expression"], deadline)
    node = iamrules.located(iamrules.TPU_NODE, PROJECT, "us-west4-a", f"nodes/{NAME}")
    member = grant["member"]
    binding = {"role": grant["role"], "members": [member], "condition": {"expression": expression}}
    held = frozenset({"tpu.nodes.delete"})

    def granted(at: datetime) -> bool:
        return iamrules.binding_grants(binding, member, "tpu.nodes.delete", node, held, at)

    assert granted(deadline)
    assert granted(deadline + timedelta(minutes=40))  # the job's retries
    assert not granted(deadline + timedelta(days=1))
    assert not granted(deadline.replace(year=2027))


def test_none_means_no_job_no_deadline_and_no_stop_account(synth: Synthesizer) -> None:
    node, secrets = _node(synth, SPOT_NONE), _secrets(synth, SPOT_NONE)
    assert resources(node, "google_cloud_scheduler_job") == {}
    # No deadline: the only terraform_data is the node's spec, whose change replaces the VM
    # (issue 21: a metadata patch never re-runs the boot).
    assert sorted(resources(node, "terraform_data")) == ["node-spec"]
    assert sorted(node["variable"]) == ["project"]
    assert "deadline" not in node["output"]
    assert "nothing stops the billing" in node["output"]["billing"]["value"]
    assert f"{NAME}-stop" not in json.dumps(secrets)
    assert resources(secrets, "google_project_iam_custom_role") == {}


def test_flex_start_has_no_job(node_stack: dict[str, Any], secrets_stack: dict[str, Any]) -> None:
    assert resources(node_stack, "google_cloud_scheduler_job") == {}
    assert "-stop" not in json.dumps(resources(secrets_stack, "google_service_account"))


def test_a_pipeline_deployment_uses_the_bootstraps_stop_account(synth: Synthesizer) -> None:
    """Same data as tests/gitops/test_gitops_identities.py's spot staging (one synth for both)."""
    import tomllib

    from tests.conftest import REPO_ROOT

    data = {
        **tomllib.loads((REPO_ROOT / "deployments/staging.toml").read_text()),
        "provisioning": "spot",
    }
    stacks = synth(json.loads(json.dumps(data)))
    node = stacks[f"{data['name']}-node"]
    job = resources(node, "google_cloud_scheduler_job")[DEADLINE_JOB_ID]
    assert job["http_target"]["oauth_token"]["service_account_email"] == (
        f"{data['name']}-stop@${{var.project}}.iam.gserviceaccount.com"
    )
    secrets = stacks[f"{data['name']}-secrets"]
    assert resources(secrets, "google_service_account") == {}
    assert resources(secrets, "google_project_iam_custom_role") == {}
    # The bootstrap grants the pipeline's stop account (the deploy identity holds no project
    # IAM rights): no grant of its own here.
    assert resources(node, "google_project_iam_member") == {}
