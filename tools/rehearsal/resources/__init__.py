"""What the stand-in provider does for each google-beta resource type: the REST calls the real
provider makes (same API, same resource names), sent to the loopback fakes.

Each class maps Terraform attributes to one API's request bodies and reads back the values the
real provider reports as computed. Adding a resource type means one class here and its routes in
a fake; its schema is generated from the bindings like the others (tools/rehearsal/schema.py).
"""

from __future__ import annotations

from tools.rehearsal.resources.base import ApiError, DataSource, ProviderConfig, Resource
from tools.rehearsal.resources.cloudscheduler import CloudSchedulerJob
from tools.rehearsal.resources.compute import (
    ComputeFirewall,
    ComputeRouter,
    ComputeRouterNat,
    ComputeSubnetwork,
)
from tools.rehearsal.resources.container import (
    ClientConfigData,
    ContainerCluster,
    ContainerClusterData,
    ContainerNodePool,
    EngineVersionsData,
    ProjectData,
)
from tools.rehearsal.resources.iam import ServiceAccount
from tools.rehearsal.resources.logging import LoggingMetric
from tools.rehearsal.resources.monitoring import (
    MonitoringAlertPolicy,
    MonitoringDashboard,
    MonitoringNotificationChannel,
)
from tools.rehearsal.resources.resourcemanager import ProjectIamCustomRole, ProjectIamMember
from tools.rehearsal.resources.secretmanager import (
    SecretManagerSecret,
    SecretManagerSecretIamMember,
)
from tools.rehearsal.resources.serviceusage import ProjectService
from tools.rehearsal.resources.storage import StorageBucket, StorageBucketIamMember
from tools.rehearsal.resources.tpu import TpuV2Vm

__all__ = [
    "DATA_SOURCES",
    "RESOURCES",
    "VALIDATE_ONLY",
    "ApiError",
    "DataSource",
    "ProviderConfig",
    "Resource",
]

RESOURCES: dict[str, type[Resource]] = {
    cls.type_name: cls
    for cls in (
        ProjectService,
        ServiceAccount,
        SecretManagerSecret,
        SecretManagerSecretIamMember,
        StorageBucket,
        StorageBucketIamMember,
        ComputeFirewall,
        ComputeRouter,
        ComputeRouterNat,
        ComputeSubnetwork,
        TpuV2Vm,
        CloudSchedulerJob,
        ProjectIamCustomRole,
        ProjectIamMember,
        MonitoringDashboard,
        MonitoringAlertPolicy,
        MonitoringNotificationChannel,
        LoggingMetric,
        # platform = "gke"
        ContainerCluster,
        ContainerNodePool,
    )
}
DATA_SOURCES: dict[str, type[DataSource]] = {
    cls.type_name: cls
    for cls in (ContainerClusterData, EngineVersionsData, ClientConfigData, ProjectData)
}
# In the stand-in's schema without a fake: `terraform validate` judges them against the schema
# (with tools/rehearsal/provider.VALIDATE_ONLY_ENV naming them), and any plan of one fails. None
# now: the routed serving stack's proxy-only subnet has its fake (ComputeSubnetwork).
VALIDATE_ONLY: tuple[str, ...] = ()
