"""Synthesis of a flex-start node's idle stop (issue 39): the node's own account holds the
deployment's stop role, which then holds tpu.queuedResources.delete (flex-start has no deadline
job: nothing else), under a condition ending an hour after the run's end; the end is fixed when
the queued resource is created and renewed with it. The IAM fake evaluates the condition."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.conftest import Synthesizer, resources
from tools.rehearsal.fakes import iamrules
from tpudeploy.tpuvm.addresses import IDLE_END_ID, QUEUED_RESOURCE_ID

PROJECT = "my-proj-123"
NAME = "gemma4-v5e"
FLEX_IDLE = {
    "project": PROJECT,
    "provisioning": "flex-start",
    "zone": "us-central1-a",
    "max_run_duration": "4h",
    "idle": {"stop_after": "30m"},
}
NODE_ACCOUNT = f"serviceAccount:{NAME}-node@${{var.project}}.iam.gserviceaccount.com"


def _evaluated(expression: str, end: datetime) -> str:
    """The condition as IAM gets it once Terraform evaluated timeadd() on the grant's end."""

    def add(m: re.Match[str]) -> str:
        return (end + timedelta(hours=int(m["hours"]))).strftime("%Y-%m-%dT%H:%M:%SZ")

    pattern = rf'\$\{{timeadd\(terraform_data\.{IDLE_END_ID}\.output, "(?P<hours>\d+)h"\)\}}'
    out, n = re.subn(pattern, add, expression)
    assert n == 1, expression
    return out


def test_the_node_may_delete_queued_resources_until_its_runs_end(synth: Synthesizer) -> None:
    stacks = synth(FLEX_IDLE)
    node, secrets = stacks[f"{NAME}-node"], stacks[f"{NAME}-secrets"]
    (role,) = resources(secrets, "google_project_iam_custom_role").values()
    assert role["role_id"] == "tpudeployNodeStop_gemma4_v5e"
    assert role["permissions"] == ["tpu.queuedResources.delete"]  # nothing else

    (grant,) = resources(node, "google_project_iam_member").values()
    assert grant["member"] == NODE_ACCOUNT
    assert grant["role"] == f"projects/${{var.project}}/roles/{role['role_id']}"
    assert "resource.name" not in grant["condition"]["expression"]  # never grants on Cloud TPU

    end = resources(node, "terraform_data")[IDLE_END_ID]
    assert 'timeadd(timestamp(), "14400s")' in end["input"]  # max_run_duration 4 h
    assert end["lifecycle"]["ignore_changes"] == ["input"]
    # Renewed exactly when the queued resource is created again (a new run).
    assert end["triggers_replace"] == [f"${{terraform_data.{QUEUED_RESOURCE_ID}.id}}"]

    run_end = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)
    binding = {
        "role": grant["role"],
        "members": [NODE_ACCOUNT],
        "condition": {"expression": _evaluated(grant["condition"]["expression"], run_end)},
    }
    own = iamrules.located(
        iamrules.TPU_QUEUED_RESOURCE, PROJECT, "us-central1-a", f"queuedResources/{NAME}-qr"
    )
    held = frozenset(role["permissions"])

    def granted(at: datetime) -> bool:
        return iamrules.binding_grants(
            binding, NODE_ACCOUNT, "tpu.queuedResources.delete", own, held, at
        )

    assert granted(run_end - timedelta(hours=3))  # idle an hour into the run
    assert not granted(run_end + timedelta(hours=2))  # after the end and its margin: never


def test_the_stop_role_holds_what_each_rung_needs() -> None:
    """A ladder's role lives in the long-lived secrets stack: it holds every rung's stop."""
    from tpudeploy.config import parse_config
    from tpudeploy.tpuvm.deadline_target import stop_role_permissions

    def role(data: dict[str, Any]) -> tuple[str, ...]:
        return stop_role_permissions(parse_config({"project": PROJECT, **data}))

    spot = {"provisioning": "spot", "zone": "us-west4-a"}
    flex = {"provisioning": "flex-start", "zone": "us-central1-a"}
    idle = {"idle": {"stop_after": "30m"}}
    assert role(spot) == ("tpu.nodes.delete",)
    assert role({**spot, **idle}) == ("tpu.nodes.delete",)
    assert role(flex) == ()  # no deadline job, no idle stop: no role at all
    assert role({**flex, **idle}) == ("tpu.queuedResources.delete",)
    assert role({"capacity": [spot, flex], **idle}) == (
        "tpu.nodes.delete",
        "tpu.queuedResources.delete",
    )
    assert role({"capacity": [spot, flex]}) == ("tpu.nodes.delete",)
