"""How IAM decides a call in the fake cloud, as Google documents it, kept as data with sources.

Two tables and one evaluation:

- CHECKED_ON: the resource type each permission is checked on. A create is checked on the
  parent when the API says so (Secret Manager, Cloud Storage buckets), so a condition naming the
  new resource can never grant it;
- ATTRIBUTES: the resource attributes each resource type provides to IAM Conditions. A type that
  is not listed provides none (Cloud TPU, Cloud Scheduler, IAM service accounts);
- a binding grants when its member matches, its role holds the permission and its condition,
  evaluated by CEL over the attributes provided and the request's time (`request.time`), is
  true. "If part of a condition uses an
  attribute that isn't available for a resource, that part is never interpreted as granting
  access" (https://cloud.google.com/iam/docs/conditions-attribute-reference, "Support for
  inherited conditions"): an absent attribute is a CEL error, and an error never grants (CEL's
  `true || error` is true, so the documented guard form `resource.type != T || resource.name
  ...` grants on a resource of another type that provides resource.type).

A grant on a resource's own policy, or on its project's, reaches it (the resource hierarchy).

Checked against the stored pages (search tool, 2026-12-01): the Secret Manager create reference
(parent), the conditions attribute reference (an unavailable attribute never grants; the
`resource.type != ... || ...` guard), the conditions resource attributes page (resource
attributes only for the services it lists). Not found in the stored corpus and taken from the
issue's reading of Google's pages: which Compute Engine types provide resource.name, that a
network provides resource.type, the firewall permissions' need for networks.updatePolicy, and
the Cloud Storage buckets.insert and objects rows. A live project is the only full proof.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import celpy
from celpy.evaluation import CELEvalError

from tpudeploy.gke import kube_iam

PROJECT = "cloudresourcemanager.googleapis.com/Project"
SECRET = "secretmanager.googleapis.com/Secret"  # noqa: S105 (a resource type)
BUCKET = "storage.googleapis.com/Bucket"
OBJECT = "storage.googleapis.com/Object"
FIREWALL = "compute.googleapis.com/Firewall"
NETWORK = "compute.googleapis.com/Network"
OPERATION = "compute.googleapis.com/GlobalOperation"
ROUTER = "compute.googleapis.com/Router"
SUBNETWORK = "compute.googleapis.com/Subnetwork"
TPU_NODE = "tpu.googleapis.com/Node"
TPU_LOCATION = "tpu.googleapis.com/Location"
TPU_OPERATION = "tpu.googleapis.com/Operation"
TPU_QUEUED_RESOURCE = "tpu.googleapis.com/QueuedResource"
SCHEDULER_JOB = "cloudscheduler.googleapis.com/Job"
GKE_CLUSTER = "container.googleapis.com/Cluster"
GKE_OPERATION = "container.googleapis.com/Operation"
SCHEDULER_LOCATION = "cloudscheduler.googleapis.com/Location"
SERVICE_ACCOUNT = "iam.googleapis.com/ServiceAccount"

# Which resource IAM checks each permission on.
CHECKED_ON: dict[str, str] = {
    # projects.secrets.create: "Authorization requires the following IAM permission on the
    # specified resource parent: secretmanager.secrets.create", the parent being projects/*
    # (https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets/create).
    "secretmanager.secrets.create": PROJECT,
    # get, patch, delete, getIamPolicy, setIamPolicy name the secret itself (same reference,
    # projects.secrets.{get,patch,delete,getIamPolicy,setIamPolicy}: "on the specified resource").
    "secretmanager.secrets.get": SECRET,
    "secretmanager.secrets.update": SECRET,
    "secretmanager.secrets.delete": SECRET,
    "secretmanager.secrets.getIamPolicy": SECRET,
    "secretmanager.secrets.setIamPolicy": SECRET,
    # buckets.insert needs storage.buckets.create in the project the bucket goes to; the bucket
    # has no name to match before it exists
    # (https://cloud.google.com/storage/docs/json_api/v1/buckets/insert, "Authorization").
    "storage.buckets.create": PROJECT,
    "storage.buckets.get": BUCKET,
    "storage.buckets.update": BUCKET,
    "storage.buckets.delete": BUCKET,
    "storage.buckets.getIamPolicy": BUCKET,
    "storage.buckets.setIamPolicy": BUCKET,
    # Objects: list is checked on the bucket, the rest on the object
    # (https://cloud.google.com/storage/docs/access-control/iam-permissions).
    "storage.objects.list": BUCKET,
    "storage.objects.get": OBJECT,
    "storage.objects.create": OBJECT,
    "storage.objects.delete": OBJECT,
    # Compute Engine checks a firewall permission on the rule (its name is known at create:
    # https://cloud.google.com/compute/docs/access/iam-conditions, "resource names"), and every
    # create, patch and delete of a rule also needs compute.networks.updatePolicy on the rule's
    # network (https://cloud.google.com/compute/docs/access/iam-permissions, firewalls.insert /
    # patch / delete).
    "compute.firewalls.create": FIREWALL,
    "compute.firewalls.get": FIREWALL,
    "compute.firewalls.update": FIREWALL,
    "compute.firewalls.delete": FIREWALL,
    "compute.networks.updatePolicy": NETWORK,
    "compute.networks.get": NETWORK,
    "compute.globalOperations.get": OPERATION,
    # A private node's Cloud Router and NAT: routers.insert/get/patch/delete check
    # compute.routers.* on the router (https://cloud.google.com/compute/docs/access/
    # iam-permissions, routers). Routers are not among the Compute types that page lists as
    # providing resource.name to conditions: a condition never grants them (ATTRIBUTES).
    "compute.routers.create": ROUTER,
    "compute.routers.get": ROUTER,
    "compute.routers.update": ROUTER,
    "compute.routers.delete": ROUTER,
    # A Gateway's proxy-only subnet: subnetworks.insert / get / delete check compute.subnetworks.
    # create / get / delete on the subnetwork. Google's page for these rows was NOT FOUND in the
    # stored corpus: the names are Compute Engine's pattern (as for routers above) and appear in
    # roles/compute.networkAdmin's listings in public repositories; whether insert also needs
    # compute.networks.updatePolicy on the network is not modelled (unverified).
    "compute.subnetworks.create": SUBNETWORK,
    "compute.subnetworks.get": SUBNETWORK,
    "compute.subnetworks.delete": SUBNETWORK,
    # Cloud TPU: nodes.create on the location (parent), get and delete on the node
    # (https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes).
    # nodes.getGuestAttributes (make wait, make status) checks tpu.nodes.get on the node, and
    # nodes.patch tpu.nodes.update. Both method pages' "IAM Permissions" sections are cut from
    # the stored excerpts, so this is read from two stored pages: Cloud TPU's roles page
    # (https://docs.cloud.google.com/iam/docs/roles-permissions/tpu) lists every tpu.nodes.*
    # permission, and none names guest attributes: the only per-node read there is
    # tpu.nodes.get, the only in-place write tpu.nodes.update; the audit-logging page
    # (https://cloud.google.com/tpu/docs/audit-logs) puts GetGuestAttributes in ADMIN_READ
    # beside GetNode.
    "tpu.nodes.create": TPU_LOCATION,
    "tpu.nodes.get": TPU_NODE,
    "tpu.nodes.update": TPU_NODE,
    "tpu.nodes.delete": TPU_NODE,
    "tpu.operations.get": TPU_OPERATION,
    # A flex-start node's idle stop deletes its queued resource (issue 39): queuedResources.delete
    # names the queued resource ("DELETE https://tpu.googleapis.com/v2/{name=projects/*/
    # locations/*/queuedResources/*}", tpu/docs/reference/rest/v2/projects.locations.
    # queuedResources/delete, stored). The page's "IAM Permissions" section is cut from the
    # stored excerpt: the permission's name is the one the project's deploy role already holds
    # (tpudeploy/tpuvm/pipeline.py, tpudeployTpu), checked on the queued resource like
    # nodes.delete on the node. Like a node it holds no policy and gives conditions no name
    # (ATTRIBUTES lists no Cloud TPU type): only a project grant reaches it.
    "tpu.queuedResources.delete": TPU_QUEUED_RESOURCE,
    # GKE: clusters.delete "on the specified resource name" (projects/*/locations/*/clusters/*;
    # https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/
    # projects.locations.clusters/delete), the cluster, which holds no IAM policy of its own:
    # only a project grant reaches it (GKE's deadline job, tpudeploy/gke/deadline_target.py).
    "container.clusters.delete": GKE_CLUSTER,
    # The rest of GKE's API (https://cloud.google.com/kubernetes-engine/docs/reference/
    # api-permissions, "Google Kubernetes Engine API permissions"): clusters.create needs
    # "container.clusters.create on the containing Cloud project, and iam.serviceAccounts.actAs
    # on the specified service account"; clusters.get "container.clusters.get on the requested
    # cluster"; clusters.update, nodePools.create and nodePools.delete "container.clusters.update
    # on the requested cluster"; nodePools.get and nodePools.list "container.clusters.get on the
    # requested cluster".
    "container.clusters.create": PROJECT,
    "container.clusters.get": GKE_CLUSTER,
    # "... and container.clusters.getCredentials to see the cluster's credentials" (same row).
    "container.clusters.getCredentials": GKE_CLUSTER,
    "container.clusters.update": GKE_CLUSTER,
    # projects.locations.getServerConfig (the google_container_engine_versions data source):
    # its reference page (kubernetes-engine/docs/reference/rest/v1beta1/projects.locations/
    # getServerConfig, stored) names no IAM permission, and the stored excerpt of the
    # api-permissions table stops before it. NOT FOUND in the stored corpus: this rests on the
    # issue's reading (container.clusters.list on the project, which roles/container.viewer
    # and every GKE role hold). A live project is the only proof.
    "container.clusters.list": PROJECT,
    # projects.locations.operations.get: "Authorization requires the following IAM permission
    # on the specified resource name: container.operations.get" (kubernetes-engine/docs/
    # reference/rest/v1beta1/projects.locations.operations/get), the operation.
    "container.operations.get": GKE_OPERATION,
    # Cloud Scheduler: jobs.create on the location, the rest on the job
    # (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs).
    "cloudscheduler.jobs.create": SCHEDULER_LOCATION,
    "cloudscheduler.jobs.get": SCHEDULER_JOB,
    "cloudscheduler.jobs.update": SCHEDULER_JOB,
    "cloudscheduler.jobs.delete": SCHEDULER_JOB,
    "cloudscheduler.jobs.enable": SCHEDULER_JOB,
    "cloudscheduler.jobs.pause": SCHEDULER_JOB,
    # jobs.run ("Forces a job to run now"): "Authorization requires the following IAM permission
    # on the specified resource name: cloudscheduler.jobs.run" (scheduler/docs/reference/rest/
    # v1/projects.locations.jobs/run, stored). The job holds no policy and gives conditions no
    # name (ATTRIBUTES): only a project grant reaches it, so the idle stop does not use it
    # (stacks/deadline_job.py, self_stop_email).
    "cloudscheduler.jobs.run": SCHEDULER_JOB,
    # locations.list names the project ("name: The resource that owns the locations
    # collection", projects.locations/list; roles/cloudscheduler.viewer holds it): preflight.
    "cloudscheduler.locations.list": PROJECT,
    # Attaching an account to a TPU node, a Scheduler job or GKE nodes: actAs on that account
    # (https://cloud.google.com/iam/docs/service-accounts-actas).
    "iam.serviceAccounts.actAs": SERVICE_ACCOUNT,
    # Resource Manager: projects.getIamPolicy and projects.setIamPolicy, "Authorization requires
    # the following IAM permission on the specified resource": resourcemanager.projects.
    # getIamPolicy / setIamPolicy, the resource being the project
    # (https://cloud.google.com/resource-manager/reference/rest/v1/projects/setIamPolicy and
    # .../getIamPolicy; the stored excerpts stop before the permission line: the names are the
    # issue's reading, and the ones roles/resourcemanager.projectIamAdmin holds).
    "resourcemanager.projects.getIamPolicy": PROJECT,
    # projects.get (the google_project data source the GKE cluster stack reads the project
    # number with): "Authorization requires the following IAM permission on the specified
    # resource projectId: resourcemanager.projects.get" (resource-manager/reference/rest/v1/
    # projects/get, stored). testIamPermissions (make preflight) answers what the caller holds
    # and needs no permission of its own: left unchecked.
    "resourcemanager.projects.get": PROJECT,
    "resourcemanager.projects.setIamPolicy": PROJECT,
    # Service Usage (https://cloud.google.com/service-usage/docs/access-control, "IAM
    # permissions"): "services.enable  On the project: serviceusage.services.enable",
    # "services.disable  On the project: serviceusage.services.disable", "services.get  On the
    # project: serviceusage.services.get". (enable also needs servicemanagement.services.bind on
    # the service, which every caller of a public Google API holds: not modelled.)
    "serviceusage.services.enable": PROJECT,
    "serviceusage.services.disable": PROJECT,
    "serviceusage.services.get": PROJECT,
    # IAM (https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts):
    # create "requires the following IAM permission on the specified resource name:
    # iam.serviceAccounts.create", the name being the project (projects.serviceAccounts/create);
    # get, patch, delete, getIamPolicy and setIamPolicy name the account
    # (iam.serviceAccounts.get / update / delete / getIamPolicy / setIamPolicy).
    "iam.serviceAccounts.create": PROJECT,
    "iam.serviceAccounts.get": SERVICE_ACCOUNT,
    "iam.serviceAccounts.update": SERVICE_ACCOUNT,
    "iam.serviceAccounts.delete": SERVICE_ACCOUNT,
    "iam.serviceAccounts.getIamPolicy": SERVICE_ACCOUNT,
    "iam.serviceAccounts.setIamPolicy": SERVICE_ACCOUNT,
    # Project custom roles (https://cloud.google.com/iam/docs/reference/rest/v1/projects.roles):
    # create on the parent project (iam.roles.create), get / patch / delete on the role
    # (iam.roles.get / update / delete). A custom role holds no IAM policy of its own and gives
    # conditions no attributes: only the project's policy reaches it, so it is checked as the
    # project here (a condition sees the same nothing either way).
    "iam.roles.create": PROJECT,
    "iam.roles.get": PROJECT,
    "iam.roles.update": PROJECT,
    "iam.roles.delete": PROJECT,
}
# Inside a GKE cluster, GKE authorizes a Kubernetes API request with IAM's container.<resource>.
# <verb> (tpudeploy/gke/kube_iam.py, with its sources; the Kubernetes fake, fakes/k8s_iam.py,
# checks them), each on the cluster the request is sent to: the project's policy reaches it and
# a condition sees the cluster's name, so a grant conditioned on cluster A never admits a
# request to cluster B. Every permission the table can produce is registered here.
for _permission in kube_iam.deploy_permissions():
    CHECKED_ON[_permission] = GKE_CLUSTER

# Which resource attributes (resource.service, resource.type, resource.name) each resource type
# provides to IAM Conditions: https://cloud.google.com/iam/docs/conditions-resource-attributes
# ("Resource attributes are available for the Google Cloud services and resource types that are
# listed on this page. Other services and resource types do not recognize resource
# attributes."). resource.name is provided by Secret Manager secrets, Cloud Storage buckets and
# objects, and for Compute Engine only by the types that page lists (backend services, disks,
# firewalls, forwarding rules, images, instances, instance templates, snapshots, target
# proxies): a network provides its type and service, not its name, and so does a project.
# Cloud TPU, Cloud Scheduler and IAM are not among the listed services: they provide nothing.
ATTRIBUTES: dict[str, frozenset[str]] = {
    SECRET: frozenset({"service", "type", "name"}),
    BUCKET: frozenset({"service", "type", "name"}),
    OBJECT: frozenset({"service", "type", "name"}),
    FIREWALL: frozenset({"service", "type", "name"}),
    NETWORK: frozenset({"service", "type"}),
    # Not among the Compute types the page lists as providing resource.name.
    SUBNETWORK: frozenset({"service", "type"}),
    OPERATION: frozenset({"service", "type"}),
    PROJECT: frozenset({"service", "type"}),
    # GKE clusters (the deadline job's container.clusters.delete, issue 36 item 9). The
    # attribute reference lists "Google Kubernetes Engine" among the services the resource
    # service attribute supports (docs.cloud.google.com/iam/docs/conditions-attribute-reference,
    # stored .md.txt, "Resource attributes"), the resource attributes page lists
    # container.googleapis.com among its resource service values, and the resource-based access
    # guide lists Google Kubernetes Engine among the services whose "resource name attribute can
    # control access" (cloud.google.com/iam/docs/configuring-resource-based-access, stored copy,
    # Italian: "L'attributo nome risorsa può controllare l'accesso ai seguenti servizi ...
    # Google Kubernetes Engine"). The rows giving a cluster's type and name format were not in
    # the stored excerpts: the name is taken as the clusters.delete resource name
    # (projects/*/locations/*/clusters/*), and the stacks' condition matches its tail only
    # (endsWith "/locations/ZONE/clusters/NAME"), which holds whether IAM names the project by
    # id or by number. A live project is the only full proof.
    GKE_CLUSTER: frozenset({"service", "type", "name"}),
    # A GKE operation: no source found that it gives IAM Conditions any attribute (the
    # resource attributes page lists no container.googleapis.com/Operation type), so none.
    GKE_OPERATION: frozenset(),
}

# Request attributes. "request.time": the date/time attributes work for every service (the
# attribute reference, "Date/time attributes"; the stored excerpts stop before that table, so
# this rests on the reading of the page). The fake's request time is the machine's
# clock, or the time a token was minted for (the rehearsal's clock: the Cloud Scheduler fake
# fires a job "a year later" with a token of that time, fakes/cloudscheduler.py). condition_grants
# gives every condition request.time, and nothing else of the request.

# What a GKE node calls as its own service account (issue 36 item 6), checked on the project:
# GKE runs "system tasks like logging and monitoring" as the node's service account, which must
# hold at least "the Kubernetes Engine Default Node Service Account
# (roles/container.defaultNodeServiceAccount) role on the project"
# (cloud.google.com/kubernetes-engine/security/configure-node-service-accounts, "Grant the
# minimum required role for GKE"; the stored copies are ja and zh-cn, translated here). The
# permissions below are the
# writes of the logging and monitoring agents on the node, and of Managed Prometheus's managed
# collectors, which write the vLLM metric the HPA scales on (PodMonitoring, tpudeploy/gke/
# manifests.py) from the nodes. The role's exact permission list was not in the stored corpus:
# these rest on the reading and on the role's predecessor minimum (logging.logWriter,
# monitoring.metricWriter, monitoring.viewer: CIS GKE Benchmark 5.2.1, tenable.com copy).
NODE_CALLS: dict[str, str] = {
    "logging.logEntries.create": "the node's system and container logs (the logging agent)",
    "monitoring.timeSeries.create": "system metrics, and the managed collectors' samples (the "
    "HPA's vLLM metric)",
    "monitoring.metricDescriptors.create": "the first sample of a new metric",
    "monitoring.metricDescriptors.list": "the agents' metric lookups",
}
for _permission in NODE_CALLS:
    CHECKED_ON[_permission] = PROJECT

# Predefined roles the fakes check, with the permissions Google documents them to hold that
# matter here (https://cloud.google.com/iam/docs/understanding-roles).
PREDEFINED_ROLES: dict[str, frozenset[str]] = {
    "roles/owner": frozenset({"*"}),
    "roles/editor": frozenset({"*"}),
    "roles/iam.serviceAccountUser": frozenset({"iam.serviceAccounts.actAs"}),
    "roles/container.defaultNodeServiceAccount": frozenset(NODE_CALLS),
    # The plan identity's read-only roles (tpudeploy/identities.py PLAN_PROJECT_ROLES), what a
    # Terraform refresh of a GKE deployment asks of them. Secret Manager Viewer: metadata, IAM
    # policy and the version list, never a payload ("Listing secret versions requires the
    # Secret Manager Viewer role", secret-manager/docs/view-secret-version; the stored roles page
    # cuts off before the viewer's row, so the list rests on that reading).
    "roles/secretmanager.viewer": frozenset(
        {
            "secretmanager.locations.get",
            "secretmanager.locations.list",
            "secretmanager.secrets.get",
            "secretmanager.secrets.getIamPolicy",
            "secretmanager.secrets.list",
            "secretmanager.versions.get",
            "secretmanager.versions.list",
        }
    ),
    # Cloud Scheduler Viewer: read jobs and locations (iam/docs/roles-permissions/
    # cloudscheduler; not in the stored corpus: the role's name and "viewer" convention).
    "roles/cloudscheduler.viewer": frozenset(
        {
            "cloudscheduler.jobs.get",
            "cloudscheduler.jobs.list",
            "cloudscheduler.locations.get",
            "cloudscheduler.locations.list",
        }
    ),
}


@functools.cache
def _env() -> celpy.Environment:
    """Built on the first condition, not at import: building the CEL grammar's parser costs
    ~0.3 s of CPU, and most processes that import the fakes never evaluate a condition."""
    return celpy.Environment()


@dataclass(frozen=True)
class Checked:
    """The resource one permission is checked on: its type, its name in the form IAM Conditions
    see it (secrets by project number, buckets under projects/_) and the policies that reach it
    (its own, if it has one, then its project's)."""

    type: str
    name: str
    policies: tuple[str, ...]

    def attributes(self) -> dict[str, str]:
        provided = ATTRIBUTES.get(self.type, frozenset())
        values = {"service": self.type.split("/", 1)[0], "type": self.type, "name": self.name}
        return {k: v for k, v in values.items() if k in provided}


def condition_grants(expression: str, resource: Checked, at: datetime | None = None) -> bool:
    """CEL over the attributes the resource provides and the request's time (`at`, else now);
    only a boolean true grants."""
    env = _env()
    program = env.program(env.compile(expression))
    when = (at or datetime.now(UTC)).astimezone(UTC)
    activation: Any = {
        "resource": celpy.json_to_cel(resource.attributes()),  # type: ignore[attr-defined]
        "request": celpy.celtypes.MapType(
            {celpy.celtypes.StringType("time"): celpy.celtypes.TimestampType(when)}
        ),
    }
    try:
        result = program.evaluate(activation)
    except CELEvalError:
        return False
    return isinstance(result, celpy.celtypes.BoolType) and bool(result)


def binding_grants(
    binding: Mapping[str, Any],
    principal: str,
    permission: str,
    resource: Checked,
    role_permissions: frozenset[str],
    at: datetime | None = None,
) -> bool:
    if principal not in binding.get("members", []):
        return False
    service = permission.split(".", 1)[0]
    if not ({"*", f"{service}.*", permission} & role_permissions):
        return False
    condition = binding.get("condition")
    if not condition:
        return True
    return condition_grants(str(condition.get("expression", "")), resource, at)


# ---- the resources of the fake cloud's one project, as IAM sees them

# Secret Manager names secrets by project number in IAM conditions; the fake project has this one
# (the storage fake answers it as a bucket's projectNumber too).
PROJECT_NUMBER = "123456789012"


def _project_policy(project: str) -> str:
    return f"cloudresourcemanager/projects/{project}"


def project(project: str) -> Checked:
    return Checked(PROJECT, f"projects/{project}", (_project_policy(project),))


def secret(project: str, secret_id: str) -> Checked:
    return Checked(
        SECRET,
        f"projects/{PROJECT_NUMBER}/secrets/{secret_id}",
        (f"secretmanager/projects/{project}/secrets/{secret_id}", _project_policy(project)),
    )


def bucket(project: str, name: str) -> Checked:
    return Checked(
        BUCKET, f"projects/_/buckets/{name}", (f"storage/b/{name}", _project_policy(project))
    )


def compute(kind: str, project: str, name: str) -> Checked:
    """A global Compute Engine resource: FIREWALL, NETWORK or OPERATION."""
    collection = {FIREWALL: "firewalls", NETWORK: "networks", OPERATION: "operations"}[kind]
    return Checked(
        kind, f"projects/{project}/global/{collection}/{name}", (_project_policy(project),)
    )


def router(project: str, region: str, name: str) -> Checked:
    """A regional Cloud Router (and the NAT it carries: NATs are part of the router)."""
    path = f"projects/{project}/regions/{region}/routers/{name}"
    return Checked(ROUTER, path, (_project_policy(project),))


def subnetwork(project: str, region: str, name: str) -> Checked:
    path = f"projects/{project}/regions/{region}/subnetworks/{name}"
    return Checked(SUBNETWORK, path, (_project_policy(project),))


def located(kind: str, project: str, location: str, name: str = "") -> Checked:
    """A TPU or Cloud Scheduler resource (no policy of its own: the project's reaches it)."""
    path = f"projects/{project}/locations/{location}" + (f"/{name}" if name else "")
    return Checked(kind, path, (_project_policy(project),))


def service_account(project: str, email: str) -> Checked:
    name = f"projects/{project}/serviceAccounts/{email}"
    return Checked(SERVICE_ACCOUNT, name, (f"iam/{name}", _project_policy(project)))


def gke_cluster(project: str, location: str, name: str) -> Checked:
    """A GKE cluster: no IAM policy of its own, so only the project's policy reaches it."""
    path = f"projects/{project}/locations/{location}/clusters/{name}"
    return Checked(GKE_CLUSTER, path, (_project_policy(project),))


def gke_operation(project: str, location: str, operation: str) -> Checked:
    """A GKE long-running operation (no policy of its own: the project's reaches it)."""
    path = f"projects/{project}/locations/{location}/operations/{operation}"
    return Checked(GKE_OPERATION, path, (_project_policy(project),))
