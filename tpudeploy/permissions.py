"""What your own account needs to deploy: each resource type a stack declares -> the IAM
permissions that create it and the predefined role that grants them, with the documentation
that says so. docs/deploying.md's role list is generated from here (tools/readme.py), tests
hold it to the resource types the stacks actually declare, and `make preflight` checks the
permissions with your credentials (Resource Manager projects.testIamPermissions:
tpudeploy/gcp/resourcemanager.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tpudeploy.config import DeployConfig


@dataclass(frozen=True, slots=True)
class Need:
    permissions: tuple[str, ...]
    role: str
    source: str
    # actAs is granted on one service account, which a project-level test cannot see.
    project_level: bool = True


_CRUD = ("create", "get", "update", "delete")
# Not a Terraform type: what the flex-start terraform_data's provisioner does through the TPU API.
QUEUED_RESOURCE = "queued resource (the flex-start client)"


def _crud(prefix: str, *extra: str) -> tuple[str, ...]:
    return tuple(f"{prefix}.{verb}" for verb in _CRUD) + extra


NEEDS: dict[str, Need] = {
    "google_project_service": Need(
        ("serviceusage.services.enable", "serviceusage.services.get"),
        "roles/serviceusage.serviceUsageAdmin",
        "https://cloud.google.com/service-usage/docs/access-control",
    ),
    "google_service_account": Need(
        _crud("iam.serviceAccounts"),
        "roles/iam.serviceAccountAdmin",
        "https://cloud.google.com/iam/docs/service-accounts-create#permissions",
    ),
    "google_project_iam_custom_role": Need(
        _crud("iam.roles"),
        "roles/iam.roleAdmin",
        "https://cloud.google.com/iam/docs/creating-custom-roles#required-roles",
    ),
    "google_project_iam_member": Need(
        ("resourcemanager.projects.getIamPolicy", "resourcemanager.projects.setIamPolicy"),
        "roles/resourcemanager.projectIamAdmin",
        "https://cloud.google.com/iam/docs/granting-changing-revoking-access#required-permissions",
    ),
    "google_secret_manager_secret": Need(
        _crud("secretmanager.secrets"),
        "roles/secretmanager.admin",
        "https://cloud.google.com/secret-manager/docs/access-control",
    ),
    "google_secret_manager_secret_iam_member": Need(
        ("secretmanager.secrets.getIamPolicy", "secretmanager.secrets.setIamPolicy"),
        "roles/secretmanager.admin",
        "https://cloud.google.com/secret-manager/docs/access-control",
    ),
    "google_storage_bucket": Need(
        _crud("storage.buckets"),
        "roles/storage.admin",
        "https://cloud.google.com/storage/docs/access-control/iam-permissions",
    ),
    "google_storage_bucket_iam_member": Need(
        ("storage.buckets.getIamPolicy", "storage.buckets.setIamPolicy"),
        "roles/storage.admin",
        "https://cloud.google.com/storage/docs/access-control/iam-permissions",
    ),
    "google_compute_firewall": Need(
        (*_crud("compute.firewalls"), "compute.networks.updatePolicy"),
        "roles/compute.securityAdmin",
        "https://cloud.google.com/compute/docs/access/iam",
    ),
    # A private node's egress (issue 21): the Cloud NAT is a part of its Cloud Router, created
    # and changed through the router (routers.insert / patch).
    "google_compute_router": Need(
        _crud("compute.routers"),
        "roles/compute.networkAdmin",
        "https://cloud.google.com/compute/docs/access/iam-permissions",
    ),
    "google_compute_router_nat": Need(
        ("compute.routers.get", "compute.routers.update"),
        "roles/compute.networkAdmin",
        "https://cloud.google.com/nat/docs/set-up-manage-network-address-translation",
    ),
    # The dashboard (Monitoring API v1) and the alert policies and their email channels (v3):
    # "This method requires the monitoring.dashboards.create permission on the specified
    # project" (monitoring.v1 discovery document, projects.dashboards.create); the roles'
    # lowest grantable resource is the project (cloud.google.com/iam/docs/roles-permissions/
    # monitoring).
    "google_monitoring_dashboard": Need(
        _crud("monitoring.dashboards"),
        "roles/monitoring.dashboardEditor",
        "https://cloud.google.com/iam/docs/roles-permissions/monitoring",
    ),
    # The dashboard's log-based metrics (Logging API v2 projects.metrics): created under "the
    # resource name of the project in which to create the metric" (the discovery document);
    # roles/logging.configWriter holds logging.logMetrics.* (the roles page was not in the
    # stored corpus: the role rests on the reading).
    "google_logging_metric": Need(
        _crud("logging.logMetrics"),
        "roles/logging.configWriter",
        "https://cloud.google.com/iam/docs/roles-permissions/logging",
    ),
    "google_monitoring_alert_policy": Need(
        _crud("monitoring.alertPolicies"),
        "roles/monitoring.alertPolicyEditor",
        "https://cloud.google.com/iam/docs/roles-permissions/monitoring",
    ),
    "google_monitoring_notification_channel": Need(
        _crud("monitoring.notificationChannels"),
        "roles/monitoring.notificationChannelEditor",
        "https://cloud.google.com/iam/docs/roles-permissions/monitoring",
    ),
    "google_tpu_v2_vm": Need(
        ("tpu.nodes.create", "tpu.nodes.get", "tpu.nodes.delete", "tpu.operations.get"),
        "roles/tpu.admin",
        "https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes",
    ),
    # Terraform's own resource (the deadline, the node spec): no Google API call of its own.
    "terraform_data": Need(
        (),
        "none",
        "https://developer.hashicorp.com/terraform/language/resources/terraform-data",
    ),
    # Flex-start: a terraform_data's provisioners run the project's own client, which calls
    # queuedResources.create/get/delete (tpudeploy/tpuvm/queued_resource/).
    QUEUED_RESOURCE: Need(
        (
            "tpu.queuedResources.create",
            "tpu.queuedResources.get",
            "tpu.queuedResources.delete",
            "tpu.nodes.get",
            "tpu.operations.get",
        ),
        "roles/tpu.admin",
        "https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/projects.locations.queuedResources",
    ),
    "google_cloud_scheduler_job": Need(
        (*_crud("cloudscheduler.jobs"), "cloudscheduler.jobs.enable"),
        "roles/cloudscheduler.admin",
        "https://cloud.google.com/scheduler/docs/access-control",
    ),
    # GKE (platform = "gke"). The cluster and its pools: projects.locations.clusters.create
    # needs container.clusters.create and actAs on the nodes' account; nodePools.create/delete
    # need container.clusters.update on the cluster
    # (https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions).
    "google_container_cluster": Need(
        (*_crud("container.clusters"), "container.operations.get"),
        "roles/container.clusterAdmin",
        "https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions",
    ),
    "google_container_node_pool": Need(
        ("container.clusters.get", "container.clusters.update", "container.operations.get"),
        "roles/container.clusterAdmin",
        "https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions",
    ),
    # Data sources: the project's number (the Workload Identity principal) and the cluster's
    # endpoint and CA for the serving stack's kubernetes provider (clusters.get; the CA is
    # part of the credentials container.clusters.getCredentials shows).
    "data_google_project": Need(
        ("resourcemanager.projects.get",),
        "roles/browser",
        "https://cloud.google.com/resource-manager/docs/access-control-proj",
    ),
    "data_google_container_cluster": Need(
        ("container.clusters.get", "container.clusters.getCredentials"),
        "roles/container.clusterViewer",
        "https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions",
    ),
    # The zone's serverConfig (the release channel's default version the cluster asks for):
    # projects.locations.getServerConfig. GKE's API-permissions table lists no permission for
    # it (the stored page's rows stop at clusters, node pools and operations): the project-level
    # read of clusters is what this assumes, and roles/container.clusterViewer holds it.
    "data_google_container_engine_versions": Need(
        ("container.clusters.list",),
        "roles/container.clusterViewer",
        "https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions",
    ),
    # Your own access token for the kubernetes provider: no API call.
    "data_google_client_config": Need(
        (),
        "none",
        "https://registry.terraform.io/providers/hashicorp/google/latest/docs/data-sources/client_config",
    ),
    # The serving stack's Kubernetes objects: GKE maps each Kubernetes verb on a resource to
    # the IAM permission container.<resource>.<verb> (custom resources: thirdPartyObjects),
    # all in roles/container.developer
    # (https://cloud.google.com/iam/docs/roles-permissions/container).
    **{
        f"kubernetes_{kind}": Need(
            _crud(f"container.{plural}"),
            "roles/container.developer",
            "https://cloud.google.com/iam/docs/roles-permissions/container",
        )
        for kind, plural in (
            ("namespace_v1", "namespaces"),
            ("service_account_v1", "serviceAccounts"),
            ("config_map_v1", "configMaps"),
            ("deployment_v1", "deployments"),
            ("pod_disruption_budget_v1", "podDisruptionBudgets"),
            ("network_policy_v1", "networkPolicies"),
            ("service_v1", "services"),
            ("horizontal_pod_autoscaler_v2", "horizontalPodAutoscalers"),
            ("manifest", "thirdPartyObjects"),
        )
    },
    # RBAC objects and APIServices (the metrics adapter, the endpoint picker): GKE's Developer
    # role cannot create them; creating or binding a role also needs its bind/escalate
    # permissions. All are in roles/container.admin
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/iam#predefined).
    **{
        f"kubernetes_{kind}": Need(
            _crud(f"container.{plural}", *extra),
            "roles/container.admin",
            "https://cloud.google.com/iam/docs/roles-permissions/container",
        )
        for kind, plural, extra in (
            ("role_v1", "roles", ("container.roles.bind", "container.roles.escalate")),
            ("role_binding_v1", "roleBindings", ()),
            (
                "cluster_role_v1",
                "clusterRoles",
                ("container.clusterRoles.bind", "container.clusterRoles.escalate"),
            ),
            ("cluster_role_binding_v1", "clusterRoleBindings", ()),
            ("api_service_v1", "apiServices", ()),
        )
    },
    # The region's proxy-only subnet a regional Gateway needs ([routing] proxy_subnet_cidr).
    "google_compute_subnetwork": Need(
        _crud("compute.subnetworks"),
        "roles/compute.networkAdmin",
        "https://cloud.google.com/compute/docs/access/iam-permissions",
    ),
}
# Attaching an account to the TPU VM (the node's) or to the deadline job (NAME-stop) is actAs on
# that account (https://cloud.google.com/iam/docs/service-accounts-actas).
ACT_AS = Need(
    ("iam.serviceAccounts.actAs",),
    "roles/iam.serviceAccountUser",
    "https://cloud.google.com/iam/docs/service-accounts-actas",
    project_level=False,
)

# What `make` commands other than Terraform ask of your own account, on one secret each (so
# projects.testIamPermissions cannot see them: granted on the secret, or inherited).
COMMAND_NEEDS: dict[str, tuple[Need, ...]] = {
    # The first key: addVersion; a rotation reads the current key (access), lists the versions
    # and disables the earlier ones ("To get the permissions that you need to disable a secret
    # version, ask your administrator to grant you the Secret Manager Secret Version Manager
    # (roles/secretmanager.secretVersionManager) IAM role on a secret").
    "make api-key CLIENT=x [ROTATE=1]": (
        Need(
            (
                "secretmanager.versions.add",
                "secretmanager.versions.list",
                "secretmanager.versions.disable",
            ),
            "roles/secretmanager.secretVersionManager",
            "https://cloud.google.com/secret-manager/docs/disable-secret-version",
            project_level=False,
        ),
        Need(
            ("secretmanager.versions.access",),
            "roles/secretmanager.secretAccessor",
            "https://cloud.google.com/secret-manager/docs/access-control",
            project_level=False,
        ),
    ),
}

# The resource types each stack declares (tests/commands/test_permissions.py holds these to the
# stacks' own imports and to the synthesized JSON), and which provisioning models declare them.
STACK_RESOURCES: dict[str, tuple[str, ...]] = {
    "secrets (all models)": (
        "google_project_service",
        "google_service_account",
        "google_secret_manager_secret",
        "google_storage_bucket",
    ),
    # The TPU VM's node account reads its secrets and cache; on GKE the pods' own identity does
    # (the cluster stack grants it), and the nodes' account holds node roles only.
    "secrets (tpu vm: the node account's access)": (
        "google_secret_manager_secret_iam_member",
        "google_storage_bucket_iam_member",
    ),
    "secrets (gke: the nodes' account's project roles)": ("google_project_iam_member",),
    # The Ops Agent's log and metric writers (tpudeploy/opsagent.py; the bootstrap's for a
    # pipeline deployment).
    "secrets (tpu vm: the node account's log and metric writers)": ("google_project_iam_member",),
    # The account and its role; the grant is the billing stack's, with the job.
    "secrets (a deadline job's account and role: spot, on-demand, GKE)": (
        "google_service_account",
        "google_project_iam_custom_role",
    ),
    # The dashboard is the long-lived stack's; the alert policies end with the billing stack
    # (stacks/watch.py). Not declared for a pipeline deployment.
    "secrets (the dashboard)": ("google_monitoring_dashboard", "google_logging_metric"),
    "billing (the alert policies)": ("google_monitoring_alert_policy",),
    "billing ([alerts] emails: their channels)": ("google_monitoring_notification_channel",),
    "node (all models)": ("google_compute_firewall",),
    "node (flex-start)": ("terraform_data", QUEUED_RESOURCE),
    "node (spot, on-demand)": (
        "google_tpu_v2_vm",
        "terraform_data",
        "google_cloud_scheduler_job",
        # The stop account's grant, ending with the deadline (stacks/deadline_job.py).
        "google_project_iam_member",
    ),
    "node (no external address)": ("google_compute_router", "google_compute_router_nat"),
    "cluster (gke)": (
        "google_project_service",
        "google_compute_router",
        "google_compute_router_nat",
        "google_container_cluster",
        "google_container_node_pool",
        "data_google_project",
        "data_google_container_engine_versions",
        "google_secret_manager_secret_iam_member",
        "google_storage_bucket_iam_member",
    ),
    "cluster (gke: the deadline job)": (
        "google_cloud_scheduler_job",
        "terraform_data",
        "google_project_iam_member",
    ),
    "serving (gke)": (
        "data_google_container_cluster",
        "data_google_client_config",
        "kubernetes_namespace_v1",
        "kubernetes_service_account_v1",
        "kubernetes_config_map_v1",
        "kubernetes_deployment_v1",
        "kubernetes_pod_disruption_budget_v1",
        "kubernetes_network_policy_v1",
        "kubernetes_service_v1",
        "kubernetes_horizontal_pod_autoscaler_v2",
        "kubernetes_manifest",
    ),
    "serving (gke: the custom metrics adapter)": (
        "kubernetes_namespace_v1",
        "kubernetes_service_account_v1",
        "kubernetes_cluster_role_v1",
        "kubernetes_cluster_role_binding_v1",
        "kubernetes_role_binding_v1",
        "kubernetes_deployment_v1",
        "kubernetes_service_v1",
        "kubernetes_api_service_v1",
    ),
    "serving (gke, [routing] gateway: the endpoint picker)": (
        "kubernetes_service_account_v1",
        "kubernetes_config_map_v1",
        "kubernetes_deployment_v1",
        "kubernetes_service_v1",
        "kubernetes_role_v1",
        "kubernetes_role_binding_v1",
        "kubernetes_cluster_role_v1",
        "kubernetes_cluster_role_binding_v1",
        "kubernetes_manifest",
        "google_compute_subnetwork",
    ),
}


def resource_types(cfg: DeployConfig, purpose: str) -> list[str]:
    """The resource types `make <purpose>` creates for this config (the platform names the
    parts: tpudeploy.platform)."""
    from tpudeploy.platform import platform_for

    keys = platform_for(cfg).permission_parts(cfg, purpose)
    return sorted({t for k in keys for t in STACK_RESOURCES[k]})


def needs(cfg: DeployConfig, purpose: str) -> list[Need]:
    found = [NEEDS[t] for t in resource_types(cfg, purpose)]
    if purpose == "deploy":
        found.append(ACT_AS)
    return found


def project_permissions(cfg: DeployConfig, purpose: str) -> list[str]:
    """What projects.testIamPermissions can check: every project-level permission needed."""
    return sorted({p for n in needs(cfg, purpose) if n.project_level for p in n.permissions})


def roles_for(missing: Iterable[str], cfg: DeployConfig, purpose: str) -> list[str]:
    """The predefined roles that grant the missing permissions."""
    wanted = set(missing)
    return sorted({n.role for n in needs(cfg, purpose) if wanted & set(n.permissions)})


def role_table() -> str:
    """docs/deploying.md's least-privilege list: per stack part, what it declares and needs."""
    lines = ["| part | resource type | role | permissions | source |", "|---|---|---|---|---|"]
    for part, types in STACK_RESOURCES.items():
        for rtype in types:
            n = NEEDS[rtype]
            perms = ", ".join(n.permissions) or "-"
            role = f"`{n.role}`" if n.permissions else "-"
            name = rtype if rtype == QUEUED_RESOURCE else f"`{rtype}`"
            lines.append(f"| {part} | {name} | {role} | {perms} | [docs]({n.source}) |")
    a = ACT_AS
    lines.append(
        f"| node | (the node's account on the VM; `NAME-stop` on the deadline job) | `{a.role}` "
        f"on those two accounts | {', '.join(a.permissions)} | [docs]({a.source}) |"
    )
    for command, command_needs in COMMAND_NEEDS.items():
        for n in command_needs:
            lines.append(
                f"| `{command}` | (each client's key secret) | `{n.role}` | "
                f"{', '.join(n.permissions)} | [docs]({n.source}) |"
            )
    return "\n".join(lines)
