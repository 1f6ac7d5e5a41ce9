"""The TPU VM's part of a GitOps deploy identity (tpudeploy/identities.py holds what both
platforms share): its TPU node or queued resource, its firewall rules, the operations it polls,
and its deadline job's one permission."""

from __future__ import annotations

from tpudeploy import opsagent
from tpudeploy.config import DeployConfig
from tpudeploy.grants import (
    PROJECT,
    Condition,
    Grant,
    ProjectMember,
    Unscopable,
    cel_string,
    one_of,
)
from tpudeploy.names import service_account_email
from tpudeploy.tpuvm.deadline_target import STOP_PERMISSIONS

FIREWALL_TYPE = "compute.googleapis.com/Firewall"
STOP_ROLE = "tpudeployNodeStop"

ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    # google_compute_firewall: creating, updating or deleting a rule also needs updatePolicy on its
    # network (https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/insert), and a
    # network carries no resource.name in IAM conditions (only its resource.type): see the
    # guard form in grants() below.
    "tpudeployFirewall": (
        "A deployment's own firewall rules",
        (
            "compute.firewalls.create",
            "compute.firewalls.delete",
            "compute.firewalls.get",
            "compute.firewalls.update",
            "compute.networks.updatePolicy",
        ),
    ),
    # google_tpu_v2_vm (spot, on-demand) and the flex-start client
    # (tpudeploy.tpuvm.queued_resource).
    # No tpu.nodes.update: a pipeline deployment replaces its node instead (stacks/tpuvm/node.py),
    # because the TPU API cannot scope update to one node and a rewritten startup script runs as
    # that node's account.
    "tpudeployTpu": (
        "Create and delete TPU nodes and queued resources (the TPU API has no per-node IAM)",
        (
            "tpu.nodes.create",
            "tpu.nodes.delete",
            "tpu.nodes.get",
            "tpu.queuedResources.create",
            "tpu.queuedResources.delete",
            "tpu.queuedResources.get",
        ),
    ),
    # The deadline job's own identity (<name>-stop), granted to that account only.
    STOP_ROLE: ("Delete TPU nodes: the deadline jobs' identity", STOP_PERMISSIONS),
    # Terraform and the flex-start client poll the operations they start. Read-only.
    "tpudeployOperations": (
        "Poll Compute and TPU operations",
        ("compute.globalOperations.get", "tpu.operations.get"),
    ),
}

UNSCOPABLE = {
    "tpudeployTpu": Unscopable(
        "tpu.",
        "Cloud TPU is not among the services that evaluate resource attributes in IAM Conditions "
        "and TPU nodes have no IAM policy of their own, so a deploy identity can create, read "
        "and delete any TPU node or queued resource in the project (never run one as another "
        "deployment's account: actAs is on its own node account only)",
    ),
    STOP_ROLE: Unscopable(
        "tpu.",
        "the same for the deadline job's account: it can delete any TPU node in the project; "
        "only Cloud Scheduler jobs whose creator may act as it obtain its token",
    ),
}


def firewall_names(dep: DeployConfig, project: str) -> tuple[str, ...]:
    return tuple(
        f"projects/{project}/global/firewalls/{name}" for name in dep.firewall_rule_names.values()
    )


def grants(dep: DeployConfig, *, project: str) -> list[Grant]:
    who = f"deploy:{dep.name}"
    return [
        Grant(
            who,
            "tpudeployFirewall",
            PROJECT,
            "its firewall rules (deny-all, API port, IAP SSH), and updatePolicy on their network",
            Condition(
                f"{dep.name} firewall",
                # The documented guard form (conditions-attribute-reference, "support for
                # inherited conditions": scope a condition by resource.type so that a resource
                # lacking an attribute is judged by the part it provides). A network provides
                # resource.type but not resource.name, so the old `|| resource.name == network`
                # branch never granted updatePolicy; here every non-firewall resource the role
                # reaches (networks, for updatePolicy alone) passes the guard, and firewalls only
                # by their exact names.
                f"resource.type != {cel_string(FIREWALL_TYPE)} || "
                f"{one_of(firewall_names(dep, project))}",
                "this deployment's firewall rules; updatePolicy on any network (alone it changes "
                "nothing: every rule change also needs the firewall permission)",
            ),
        ),
        Grant(
            who,
            "tpudeployTpu",
            PROJECT,
            "create and delete its TPU VM or flex-start queued resource; not scoped (see "
            "residual risks)",
        ),
        Grant(who, "tpudeployOperations", PROJECT, "poll the operations it starts (read-only)"),
    ]


def stop_grant(dep: DeployConfig) -> Grant:
    """The deadline job's account (<name>-stop): the TPU API's nodes.delete and nothing else."""
    return Grant(
        f"stop:{dep.name}",
        STOP_ROLE,
        PROJECT,
        "the deadline job deletes the spot or on-demand node when its max_run_duration is "
        "over; not scoped (see residual risks)",
    )


def project_members(dep: DeployConfig, *, project: str, project_number: str) -> list[ProjectMember]:
    """The node account's log and metric writers (tpudeploy/opsagent.NODE_PROJECT_ROLES: the Ops
    Agent ships the node's logs and vLLM's metrics); its other grants are on its own secrets and
    cache bucket."""
    node = f"serviceAccount:{service_account_email(dep.service_account_id, project)}"
    return [
        ProjectMember(role, node, "the Ops Agent writes the node's logs and vLLM's metrics")
        for role in opsagent.NODE_PROJECT_ROLES
    ]
