"""Why a pipeline deployment keeps refusing [idle] stop_after (issue 39 item 2), shown on the
synthesized bootstrap (tpudeploy/config/idle_rules.py words the refusal):

- the bootstrap is applied once, before any deploy, so it cannot know a run's deadline; today it
  grants no node account any TPU permission (a grant it added would have no end, and reach every
  node and queued resource of the project: Cloud TPU gives IAM conditions no resource name);
- no identity the pipeline runs as holds resourcemanager.projects.setIamPolicy, so no deploy can
  add the node's grant ending at its deadline, as a local deployment's node stack does. Giving it
  that permission would let the pipeline grant itself any role: no condition narrows it.

If either changes, this test fails and the refusal must be judged again."""

from __future__ import annotations

from typing import Any

from tests.conftest import resources
from tests.gitops.test_gitops_identities import _custom_permissions, _members

# Predefined roles that hold resourcemanager.projects.setIamPolicy (Google's basic roles and the
# IAM admin roles: iam/docs/roles-permissions/resourcemanager, roles/resourcemanager.
# projectIamAdmin "Provides permissions to administer allow policies on projects").
SET_POLICY_PREDEFINED = {
    "roles/owner",
    "roles/resourcemanager.projectIamAdmin",
    "roles/iam.securityAdmin",
}


def _project_grants(boot: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(member's account id, role, the role's permissions when custom) of every project grant."""
    custom = _custom_permissions(boot)
    members = _members(boot)
    return [
        (members.get(g["member"], g["member"]), g["role"], custom.get(g["role"], []))
        for g in resources(boot, "google_project_iam_member").values()
    ]


def test_the_bootstrap_grants_no_node_account_a_tpu_permission(boot: dict[str, Any]) -> None:
    accounts = [
        a["account_id"]
        for a in resources(boot, "google_service_account").values()
        if a["account_id"].endswith("-node")
    ]
    assert accounts, "the bootstrap makes each pipeline deployment's node account"
    for who, role, held in _project_grants(boot):
        if not any(who == a or f"serviceAccount:{a}@" in who for a in accounts):
            continue
        assert not role.startswith("roles/tpu."), (who, role)
        assert not [p for p in held if p.startswith("tpu.")], (who, role, held)


def test_no_pipeline_identity_can_write_the_projects_policy(boot: dict[str, Any]) -> None:
    for who, role, held in _project_grants(boot):
        assert role not in SET_POLICY_PREDEFINED, (who, role)
        assert "resourcemanager.projects.setIamPolicy" not in held, (who, role)
