"""What GKE's deadline job deletes, and what it leaves: the cluster, by the container API.

The TPU VM's deadline machinery (tpudeploy/deadline.py, stacks/deadline_job.py) is shared: the value
fixed at deploy time, the Cloud Scheduler job as the deployment's stop account, `make extend`.
On GKE the job sends the container API's projects.locations.clusters.delete: "Deletes the
cluster, including the Kubernetes endpoint and all worker nodes" (the spot and flex-start TPU
nodes and the system node with it), so the management fee, the system node and the TPU
chip-hours all stop. Deleting only the TPU pools would leave the idle floor billing.
https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters/delete
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tpudeploy import deadline_ops
from tpudeploy.config import DeployConfig
from tpudeploy.gke import identifiers

# The deadline job calls the container API's projects.locations.clusters.delete, whose only
# required permission is container.clusters.delete, "on the specified resource name" (the
# cluster; https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/
# projects.locations.clusters/delete). A cluster has no IAM policy of its own: the grant is on
# the project (tools/rehearsal/fakes/iamrules.py keeps the rule), narrowed by a condition on the
# cluster's name (resource_condition). Nothing polls the operation.
STOP_PERMISSIONS = ("container.clusters.delete",)
# In the stop account's and role's descriptions: what the job deletes, one and many.
STOP_NOUNS = ("GKE cluster", "GKE clusters")

# The container API (v1, GA); DELETE v1/{name=projects/*/locations/*/clusters/*}, body empty.
CONTAINER_API = "https://container.googleapis.com/v1"
WHAT = "GKE cluster"

# The same page: "Other Google Compute Engine resources that might be in use by the cluster,
# such as load balancer resources, are not deleted if they weren't present when the cluster was
# initially created." The Service's internal load balancer is created after the cluster, so its
# forwarding rule outlives a deadline; so do the Cloud Router and NAT (the cluster stack's own
# resources, billed per VM using them: nothing once no node is left), the secrets stack and the
# compile cache. `make destroy-all` removes them.
LEFT_AFTER_DEADLINE = (
    "the Service's internal load balancer forwarding rule (GKE leaves load balancers it made "
    "after the cluster; `make destroy-all` or `gcloud compute forwarding-rules delete`)",
    "the Cloud Router and Cloud NAT (bill per VM using them: none are left)",
    "the secrets, the compile-cache bucket and the service accounts (the secrets stack)",
)


def cluster_url(cfg: DeployConfig, project: str) -> str:
    """The cluster's resource URL, as clusters.delete takes it."""
    return (
        f"{CONTAINER_API}/projects/{project}/locations/{cfg.zone}/clusters/"
        f"{identifiers.cluster_name(cfg)}"
    )


def resource_condition(cfg: DeployConfig) -> str:
    """The stop grant's condition on the cluster (CEL): this deployment's cluster only, where a
    project-wide container.clusters.delete would reach every cluster in the project. Google
    Kubernetes Engine is among the services whose resource name attribute "can control access"
    (cloud.google.com/iam/docs/configuring-resource-based-access; the rule and what is not
    confirmed of it: tools/rehearsal/fakes/iamrules.py, ATTRIBUTES). The tail only: the name
    IAM sees begins with the project, by id or by number, and a cluster name follows
    "/clusters/", so another cluster whose name ends with this one's never matches."""
    tail = f"/locations/{cfg.zone}/clusters/{identifiers.cluster_name(cfg)}"
    return f'resource.name.endsWith("{tail}")'


def what(cfg: DeployConfig) -> str:
    return f"{WHAT} {identifiers.cluster_name(cfg)}"


def status_lines(
    cfg: DeployConfig,
    project: str,
    jobs: Callable[[], deadline_ops.Jobs],
    *,
    exists: bool,
    now: datetime | None = None,
) -> list[str]:
    """`make status`: the cluster's deadline as its Cloud Scheduler job shows it, in the words
    the TPU VM's status uses for its node (tpudeploy.deadline_ops reads and judges the job)."""
    target = deadline_ops.Target(
        name="the cluster",
        url=cluster_url(cfg, project),
        exists=exists,
        bills="its idle floor bills until `make destroy-all`, and each TPU node its chip-hours "
        "until `make destroy`",
        stop_now="`make destroy` stops the chips' billing now, `make destroy-all` the rest",
        absent=f"no cluster {identifiers.cluster_name(cfg)}",
    )
    return deadline_ops.status_lines(cfg, project, jobs, target, now=now)
