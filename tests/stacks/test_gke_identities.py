"""Two GKE deployments in one project: who may read each one's secrets and compile cache.

Issue 36 items 13, 14 and 6, read off the synthesized cdk.tf.json of deployments/gke.toml and of
a second deployment beside it (tests/conftest.py, gke_pair). The Workload Identity pool is the
project's: a Kubernetes service account is the principal ns/<namespace>/sa/<name> in every
cluster of the project, so a principal is compared by that subject, never by cluster. What the
pods and nodes of a deployment run as is read from its own stacks (the Deployments' namespace and
service account, the node pools' service_account), not from the functions that made them.
"""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import SECOND_GKE_NAME, Stacks, resources
from tools.rehearsal.fakes import iamrules

_REF = re.compile(r"^\$\{(?P<type>[a-z0-9_]+)\.(?P<id>[^.]+)\.(?P<rest>.+)\}$")


def _block(value: Any) -> dict[str, Any]:
    """A nested block as cdktf writes it: a dict, or a one-element list of one."""
    if isinstance(value, list):
        return dict(value[0]) if value else {}
    return dict(value or {})


def _resolve(stack: dict[str, Any], value: str) -> str:
    """A reference to another resource of the stack (a namespace's or a Kubernetes account's
    name, a Google account's email, a secret's id, a bucket's name) as its literal value."""
    m = _REF.match(value)
    if m is None:
        return value
    target = resources(stack, m["type"])[m["id"]]
    if m["rest"] == "metadata[0].name":
        return _resolve(stack, str(_block(target["metadata"])["name"]))
    if m["type"] == "google_service_account" and m["rest"] == "email":
        return f"{target['account_id']}@${{var.project}}.iam.gserviceaccount.com"
    if m["rest"] in ("secret_id", "name"):
        return str(target[m["rest"]])
    raise AssertionError(f"unexpected reference {value}")


def _principal(stack: dict[str, Any], member: str) -> str:
    """A member as the identity it names: "ns/N/sa/S" for a Kubernetes service account of the
    project's pool, "serviceAccount:EMAIL" for a Google service account."""
    if member.startswith("principal://"):
        return member.split("/subject/", 1)[1]
    kind, _, who = member.partition(":")
    return f"{kind}:{_resolve(stack, who)}"


def _runs_as(stacks: Stacks) -> tuple[set[str], set[str]]:
    """(what the deployment's pods run as, what its nodes run as)."""
    pods, nodes = set(), set()
    for stack in stacks.values():
        for dep in resources(stack, "kubernetes_deployment_v1").values():
            ns = _resolve(stack, str(_block(dep["metadata"])["namespace"]))
            spec = _block(_block(_block(dep["spec"])["template"])["spec"])
            account = _resolve(stack, str(spec.get("service_account_name") or "default"))
            pods.add(f"ns/{ns}/sa/{account}")
        for pool in resources(stack, "google_container_node_pool").values():
            nodes.add(f"serviceAccount:{_block(pool['node_config'])['service_account']}")
    return pods, nodes


def _reach(owner: Stacks, everyone: list[Stacks]) -> set[str]:
    """Every identity granted anything on `owner`'s secrets or compile-cache bucket, by any
    stack of any deployment."""
    secrets, buckets = set(), set()
    for stack in owner.values():
        secrets |= {
            s["secret_id"] for s in resources(stack, "google_secret_manager_secret").values()
        }
        buckets |= {b["name"] for b in resources(stack, "google_storage_bucket").values()}
    assert secrets and buckets, "the deployment declares no secret or bucket"
    granted = set()
    for stacks in everyone:
        for stack in stacks.values():
            for grant in resources(stack, "google_secret_manager_secret_iam_member").values():
                if _resolve(stack, grant["secret_id"]) in secrets:
                    granted.add(_principal(stack, grant["member"]))
            for grant in resources(stack, "google_storage_bucket_iam_member").values():
                if _resolve(stack, grant["bucket"]) in buckets:
                    granted.add(_principal(stack, grant["member"]))
    return granted


def test_no_deployment_reaches_anothers_secrets_or_cache(gke_pair: tuple[Stacks, Stacks]) -> None:
    """Item 13: no member granted on A's secrets or cache objects is an identity B's pods or
    nodes run as, and the other way round."""
    a, b = gke_pair
    assert any(SECOND_GKE_NAME in name for name in b), "the second deployment is not synthesized"
    for owner, other in ((a, b), (b, a)):
        reach = _reach(owner, [a, b])
        own_pods, _ = _runs_as(owner)
        other_pods, other_nodes = _runs_as(other)
        # Not vacuous: the owner's own replicas do read its secrets.
        assert reach & own_pods, (reach, own_pods)
        assert not reach & (other_pods | other_nodes), reach & (other_pods | other_nodes)


def test_the_nodes_read_no_secret_and_no_cache(gke_pair: tuple[Stacks, Stacks]) -> None:
    """Item 14: the node pools' account is granted nothing on the deployment's secrets or
    compile cache; only the pods' own identity is."""
    for stacks in gke_pair:
        pods, nodes = _runs_as(stacks)
        assert nodes and len(nodes) == 1, nodes
        reach = _reach(stacks, [stacks])
        assert not reach & nodes, reach & nodes
        assert reach <= pods, reach - pods


def test_the_node_account_holds_the_documented_minimum_and_nothing_more(
    gke_pair: tuple[Stacks, Stacks],
) -> None:
    """Item 6: every call the fake IAM says a node makes as itself (iamrules.NODE_CALLS, with
    the source) is granted to the nodes' account on the project, by the one documented role."""
    for stacks in gke_pair:
        _, nodes = _runs_as(stacks)
        (node,) = nodes
        roles: list[str] = []
        for stack in stacks.values():
            for grant in resources(stack, "google_project_iam_member").values():
                if _principal(stack, grant["member"]) == node:
                    assert not grant.get("condition"), grant
                    roles.append(grant["role"])
        assert roles == ["roles/container.defaultNodeServiceAccount"], roles
        project = iamrules.project("p")
        for permission in iamrules.NODE_CALLS:
            assert iamrules.CHECKED_ON[permission] == iamrules.PROJECT
            binding = {"role": roles[0], "members": [node]}
            held = iamrules.PREDEFINED_ROLES[roles[0]]
            assert iamrules.binding_grants(binding, node, permission, project, held), permission
