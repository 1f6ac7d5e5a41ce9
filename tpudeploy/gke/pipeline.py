"""GKE's part of a GitOps deploy identity (tpudeploy/identities.py holds what both platforms
share): its own cluster and node pools, the Kubernetes objects of its serving stack inside that
cluster, and its deadline job's delete of that cluster.

Where GKE checks each permission (https://cloud.google.com/kubernetes-engine/docs/reference/
api-permissions): clusters.create needs container.clusters.create "on the containing Cloud
project" and actAs on the nodes' account; clusters.get, update and delete, and nodePools.create,
delete (container.clusters.update) and get (container.clusters.get) are checked "on the
requested cluster"; operations.get on the operation. A cluster has no IAM policy of its own, so
every grant is on the project; the cluster's own permissions, and the Kubernetes permissions GKE
checks against the cluster (tpudeploy/gke/kube_iam.py), are conditioned on its name. The
create, checked on the project, carries no cluster name any condition could match.
"""

from __future__ import annotations

from tpudeploy.config import DeployConfig
from tpudeploy.gke import identifiers, kube_iam, metrics_adapter
from tpudeploy.gke.deadline_target import STOP_PERMISSIONS
from tpudeploy.grants import PROJECT, Condition, Grant, ProjectMember, Unscopable, cel_string
from tpudeploy.names import service_account_email

CLUSTER_TYPE = "container.googleapis.com/Cluster"
STOP_ROLE = "tpudeployClusterStop"
CLUSTER_ROLE = "tpudeployGkeCluster"
CREATE_ROLE = "tpudeployGkeCreate"
PROJECT_ROLE = "tpudeployProjectGet"
PLAN_ROLE = "tpudeployPlannerGke"

ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    # Its own cluster, by name: read it (the serving stack reads its endpoint and CA), update it
    # and its pools, delete it (destroy-all, destroy-cluster); and inside it, exactly the
    # Kubernetes objects the serving stack declares.
    CLUSTER_ROLE: (
        "A deployment's own GKE cluster, its node pools and its serving objects",
        (
            "container.clusters.delete",
            "container.clusters.get",
            "container.clusters.getCredentials",
            "container.clusters.update",
            *kube_iam.deploy_permissions(),
        ),
    ),
    # Checked on the project (create) or on an operation (get), neither of which names a
    # cluster. clusters.list: google_container_engine_versions reads the zone's serverConfig
    # (the versions GKE offers, the cluster's version; tools/rehearsal/fakes for the rule).
    CREATE_ROLE: (
        "Create GKE clusters and poll GKE operations (checked on the project)",
        ("container.clusters.create", "container.clusters.list", "container.operations.get"),
    ),
    # The cluster stack reads the project's number (the pods' Workload Identity principal names
    # it): projects.get needs resourcemanager.projects.get on the project (Resource Manager
    # reference, projects/get). Read-only.
    PROJECT_ROLE: ("Read the project's metadata (its number)", ("resourcemanager.projects.get",)),
    # The plan identity's refresh of every GKE deployment's cluster and serving objects: reads
    # only, of the kinds the serving stack declares (never roles/container.viewer, which reads
    # every kind in every cluster of the project).
    PLAN_ROLE: (
        "Read GKE clusters and the serving stack's Kubernetes objects (Terraform refresh)",
        ("container.clusters.get", "container.clusters.list", *kube_iam.plan_permissions()),
    ),
    # The deadline job's own identity (<name>-stop), conditioned on its cluster's name.
    STOP_ROLE: ("Delete GKE clusters: the deadline jobs' identity", STOP_PERMISSIONS),
}

UNSCOPABLE = {
    CREATE_ROLE: Unscopable(
        "container.",
        "clusters.create is checked on the project, which carries no cluster name, and an "
        "operation gives IAM Conditions no name either: a deploy identity can create a GKE "
        "cluster of any name in the project (spend; never as another deployment's node account: "
        "actAs is on its own only), list the project's clusters and poll their operations",
    ),
}


def cluster_condition(dep: DeployConfig, *, title: str) -> Condition:
    """This deployment's cluster only. `==` on the type, not the guard form: a permission GKE
    checked on anything else (the project) must never pass through this grant. The name's tail
    only: IAM may name the project by id or by number (tpudeploy/gke/deadline_target.py)."""
    tail = f"/locations/{dep.zone}/clusters/{identifiers.cluster_name(dep)}"
    return Condition(
        title,
        f"resource.type == {cel_string(CLUSTER_TYPE)} && "
        f"resource.name.endsWith({cel_string(tail)})",
        f"cluster {identifiers.cluster_name(dep)} in {dep.zone} only",
    )


def grants(dep: DeployConfig, *, project: str) -> list[Grant]:
    who = f"deploy:{dep.name}"
    return [
        Grant(
            who,
            CLUSTER_ROLE,
            PROJECT,
            "its own cluster and node pools, and inside it the Kubernetes objects its serving "
            "stack declares (GKE checks these on the cluster: the condition names it)",
            cluster_condition(dep, title=f"{dep.name} cluster"),
        ),
        Grant(
            who,
            CREATE_ROLE,
            PROJECT,
            "create its cluster, read the versions GKE offers, poll GKE operations; not scoped "
            "(see residual risks)",
        ),
        Grant(who, PROJECT_ROLE, PROJECT, "read the project's number (read-only)"),
    ]


def stop_grant(dep: DeployConfig) -> Grant:
    """The deadline job's account: container.clusters.delete on this deployment's cluster."""
    return Grant(
        f"stop:{dep.name}",
        STOP_ROLE,
        PROJECT,
        "the deadline job deletes the cluster when [gke] max_run_duration is over; its own "
        "cluster only",
        cluster_condition(dep, title=f"{dep.name} cluster stop"),
    )


def project_members(dep: DeployConfig, *, project: str, project_number: str) -> list[ProjectMember]:
    """Project roles a GKE deployment needs that only setIamPolicy on the project could grant:
    the nodes' account's (identifiers.NODE_PROJECT_ROLES) and the custom metrics adapter's
    reader (metrics_adapter.IAM_ROLE; one principal per project, shared by every cluster's
    adapter, so one binding serves every GKE deployment)."""
    node = f"serviceAccount:{service_account_email(dep.service_account_id, project)}"
    members = [
        ProjectMember(role, node, "the nodes' system logs and metrics (GKE's minimum node role)")
        for role in identifiers.NODE_PROJECT_ROLES
    ]
    members.append(
        ProjectMember(
            metrics_adapter.IAM_ROLE,
            metrics_adapter.principal(project=project, project_number=project_number),
            "the custom metrics adapter reads vllm:num_requests_waiting for the HPA",
        )
    )
    return members
