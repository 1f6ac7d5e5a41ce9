"""Synthesis of the idle stop's grant (issue 39): with [idle], the node's own account holds the
deployment's stop role (tpu.nodes.delete) under the stop account's condition, so the node can
delete itself until the deadline plus the margin and never after; without [idle] it holds none.
The IAM fake (tools/rehearsal/fakes/iamrules.py) evaluates the synthesized conditions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.conftest import Synthesizer, resources
from tests.stacks.test_deadline_synth import NAME, PROJECT, SPOT, _at
from tools.rehearsal.fakes import iamrules

IDLE = {**SPOT, "idle": {"stop_after": "30m"}}
NODE_ACCOUNT = f"serviceAccount:{NAME}-node@${{var.project}}.iam.gserviceaccount.com"


def _grants(synth: Synthesizer, overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resources(synth(overrides)[f"{NAME}-node"], "google_project_iam_member")


def _node_account(synth: Synthesizer, overrides: dict[str, Any]) -> str:
    secrets = synth(overrides)[f"{NAME}-secrets"]
    ids = [a["account_id"] for a in resources(secrets, "google_service_account").values()]
    (node,) = [i for i in ids if i.endswith("-node")]
    return f"serviceAccount:{node}@${{var.project}}.iam.gserviceaccount.com"


def test_the_node_holds_the_stop_role_under_the_deadlines_condition(synth: Synthesizer) -> None:
    assert _node_account(synth, IDLE) == NODE_ACCOUNT
    grants = _grants(synth, IDLE)
    (mine,) = [g for g in grants.values() if g["member"] == NODE_ACCOUNT]
    (stop,) = [g for g in grants.values() if g["member"] != NODE_ACCOUNT]
    assert (
        mine["role"] == stop["role"] == "projects/${var.project}/roles/tpudeployNodeStop_gemma4_v5e"
    )
    assert mine["condition"]["expression"] == stop["condition"]["expression"]

    deadline = datetime(2026, 8, 9, 16, 0, tzinfo=UTC)
    binding = {
        "role": mine["role"],
        "members": [NODE_ACCOUNT],
        "condition": {"expression": _at(mine["condition"]["expression"], deadline)},
    }
    own = iamrules.located(iamrules.TPU_NODE, PROJECT, "us-west4-a", f"nodes/{NAME}")
    held = frozenset({"tpu.nodes.delete"})

    def granted(at: datetime) -> bool:
        return iamrules.binding_grants(binding, NODE_ACCOUNT, "tpu.nodes.delete", own, held, at)

    assert granted(deadline - timedelta(hours=7))  # idle an hour after the deploy
    assert not granted(deadline + timedelta(days=1))  # the grant ends with the deadline


def test_without_idle_the_node_holds_no_delete(synth: Synthesizer) -> None:
    grants = _grants(synth, SPOT)
    assert NODE_ACCOUNT not in json.dumps(grants)


def test_a_condition_on_the_nodes_name_could_never_grant() -> None:
    """Why the grant is project-wide: Cloud TPU gives IAM conditions no resource name, so the
    narrow condition one would write is never true (an absent attribute never grants)."""
    own = iamrules.located(iamrules.TPU_NODE, PROJECT, "us-west4-a", f"nodes/{NAME}")
    narrow = f'resource.name.endsWith("/nodes/{NAME}")'
    assert not iamrules.condition_grants(narrow, own)
    # The same form on a type that does give its name (a secret) grants: the rule, not the CEL.
    secret = iamrules.secret(PROJECT, "s")
    assert iamrules.condition_grants('resource.name.endsWith("/secrets/s")', secret)
