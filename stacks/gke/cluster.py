"""Cluster stack (platform = "gke"): the zonal Standard cluster, its pools, NAT, serving IAM.

Creates: a Cloud Router and Cloud NAT (private nodes reach Hugging Face and the image registry
through it); a zonal GKE Standard cluster (Workload Identity, GCS FUSE CSI driver, Managed
Prometheus, Secret Manager add-on, private nodes, shielded nodes, no default pool, deletion
protection behind a variable `make destroy-all` lifts); a small system pool; two TPU pools of
ct5lp-hightpu-1t (one v5e chip, topology 1x1), one spot and one flex-start, each autoscaled
from 0 to [gke] max_replicas, tainted for TPU work and labelled for the ComputeClass; and the
serving Kubernetes service account's read access to its secrets, and to the compile cache the
TPU VM node account's read and conditioned create; the custom metrics adapter's
roles/monitoring.viewer; the deadline (deploy time + max_run_duration) and the Cloud Scheduler
job deleting the cluster then (stacks/deadline_job.py).
"""

from __future__ import annotations

from cdktf import (
    Fn,
    Op,
    Precondition,
    TerraformOutput,
    TerraformResourceLifecycle,
    TerraformStack,
    TerraformVariable,
)
from cdktf_cdktf_provider_google_beta.data_google_container_engine_versions import (
    DataGoogleContainerEngineVersions,
)
from cdktf_cdktf_provider_google_beta.data_google_project import DataGoogleProject
from cdktf_cdktf_provider_google_beta.google_container_cluster import (
    GoogleContainerCluster,
    GoogleContainerClusterAddonsConfig,
    GoogleContainerClusterAddonsConfigGcsFuseCsiDriverConfig,
    GoogleContainerClusterGatewayApiConfig,
    GoogleContainerClusterIpAllocationPolicy,
    GoogleContainerClusterMasterAuth,
    GoogleContainerClusterMasterAuthClientCertificateConfig,
    GoogleContainerClusterMasterAuthorizedNetworksConfig,
    GoogleContainerClusterMasterAuthorizedNetworksConfigCidrBlocks,
    GoogleContainerClusterMonitoringConfig,
    GoogleContainerClusterMonitoringConfigManagedPrometheus,
    GoogleContainerClusterNodePoolDefaults,
    GoogleContainerClusterNodePoolDefaultsNodeConfigDefaults,
    GoogleContainerClusterNodePoolDefaultsNodeConfigDefaultsGcfsConfig,
    GoogleContainerClusterPrivateClusterConfig,
    GoogleContainerClusterReleaseChannel,
    GoogleContainerClusterSecretManagerConfig,
    GoogleContainerClusterWorkloadIdentityConfig,
)
from cdktf_cdktf_provider_google_beta.google_container_node_pool import (
    GoogleContainerNodePool,
    GoogleContainerNodePoolAutoscaling,
    GoogleContainerNodePoolManagement,
    GoogleContainerNodePoolNodeConfig,
    GoogleContainerNodePoolNodeConfigGcfsConfig,
    GoogleContainerNodePoolNodeConfigReservationAffinity,
    GoogleContainerNodePoolNodeConfigShieldedInstanceConfig,
    GoogleContainerNodePoolNodeConfigTaint,
    GoogleContainerNodePoolNodeConfigWorkloadMetadataConfig,
)
from cdktf_cdktf_provider_google_beta.google_project_iam_member import GoogleProjectIamMember
from cdktf_cdktf_provider_google_beta.google_project_service import GoogleProjectService
from cdktf_cdktf_provider_google_beta.google_secret_manager_secret_iam_member import (
    GoogleSecretManagerSecretIamMember,
)
from cdktf_cdktf_provider_google_beta.google_storage_bucket_iam_member import (
    GoogleStorageBucketIamMember,
    GoogleStorageBucketIamMemberCondition,
)
from constructs import Construct

from stacks.common import configure, service_account_email
from stacks.deadline_job import declare_deadline
from stacks.nat import cloud_nat
from tpudeploy import facts, names
from tpudeploy.config import DeployConfig
from tpudeploy.config.gke import version_tuple
from tpudeploy.gke import deadline_target, identifiers, metrics_adapter, reach, vpc
from tpudeploy.platform import platform_for
from tpudeploy.render import cache_bucket_grants


class GkeStack(TerraformStack):
    """The cluster and its pools: see the module docstring."""

    def __init__(self, scope: Construct, id_: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id_)
        cfg = config
        project = configure(self, cfg)
        # A pipeline deployment's APIs are the GitOps bootstrap's (Platform.apis: a deploy
        # identity holds no serviceusage.services.enable, which could disable any API).
        services = (
            []
            if cfg.gitops_managed
            else [
                GoogleProjectService(
                    self,
                    "service-container",
                    service="container.googleapis.com",
                    disable_on_destroy=False,
                )
            ]
        )
        # On by default; `make destroy-all` applies false first, then destroys (Terraform refuses
        # to delete a cluster whose deletion_protection is true).
        protection = TerraformVariable(
            self,
            "deletion_protection",
            type="bool",
            default=True,
            description="Refuse to delete the cluster (make destroy-all sets false first).",
        )
        network = cfg.network.network
        if platform_for(cfg).declares_nat(cfg) and not cfg.gitops_managed:
            # A pipeline deployment's router and NAT are the GitOps bootstrap's.
            cloud_nat(self, cfg)
        versions = DataGoogleContainerEngineVersions(
            self, "versions", project=project, location=cfg.zone, depends_on=services
        )
        channel_default = versions.release_channel_default_version.lookup(cfg.gke.release_channel)
        # Authorized networks from allowed_cidrs' IPv4 ranges; with none the API server takes
        # any address, and `make check` warns so (tpudeploy.gke.reach, issue 36 item 7).
        nets = reach.authorized_networks(cfg)
        authorized = (
            GoogleContainerClusterMasterAuthorizedNetworksConfig(
                cidr_blocks=[
                    GoogleContainerClusterMasterAuthorizedNetworksConfigCidrBlocks(
                        cidr_block=cidr, display_name=f"allowed-{i}"
                    )
                    for i, cidr in enumerate(nets)
                ]
            )
            if nets
            else None
        )
        self.cluster = GoogleContainerCluster(
            self,
            "cluster",
            name=identifiers.cluster_name(cfg),
            # Zonal: one zone is where the v5e pools are (facts.GKE_V5E_ZONES), and GKE's free
            # tier credits one zonal cluster's management fee.
            location=cfg.zone,
            network=network,
            subnetwork=cfg.network.subnetwork or None,
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=protection.boolean_value,
            # The release channel's default version in this zone, as GKE offers it today
            # (getServerConfig): an exact build such as [gke] min_version's is refused once
            # GKE retires it ("Master version ... is unsupported"). min_version stays the floor,
            # checked against what GKE offers before the create (the precondition).
            min_master_version=channel_default,
            release_channel=GoogleContainerClusterReleaseChannel(channel=cfg.gke.release_channel),
            workload_identity_config=GoogleContainerClusterWorkloadIdentityConfig(
                workload_pool=identifiers.workload_pool(project)
            ),
            addons_config=GoogleContainerClusterAddonsConfig(
                gcs_fuse_csi_driver_config=GoogleContainerClusterAddonsConfigGcsFuseCsiDriverConfig(
                    enabled=True
                )
            ),
            # Secrets reach the pod as files through the add-on's CSI driver, never as a
            # Kubernetes Secret made from state (tpudeploy.gke.pod).
            secret_manager_config=GoogleContainerClusterSecretManagerConfig(enabled=True),
            # A Standard cluster runs GKE's Gateway controller only once the Gateway API is
            # enabled on it (cloud.google.com/kubernetes-engine/docs/how-to/deploying-gateways,
            # "Enable the Gateway API in your cluster"); [routing] gateway needs it.
            gateway_api_config=(
                GoogleContainerClusterGatewayApiConfig(channel="CHANNEL_STANDARD")
                if cfg.routing.gateway
                else None
            ),
            monitoring_config=GoogleContainerClusterMonitoringConfig(
                enable_components=["SYSTEM_COMPONENTS"],
                managed_prometheus=GoogleContainerClusterMonitoringConfigManagedPrometheus(
                    enabled=True
                ),
            ),
            private_cluster_config=GoogleContainerClusterPrivateClusterConfig(
                enable_private_nodes=True,
                # The Kubernetes provider of the serving stack reaches the control plane from
                # the operator's machine; authorized networks narrow it to allowed_cidrs.
                enable_private_endpoint=False,
                # One /28 per deployment: two clusters of a network may not share one (GKE:
                # "must not overlap with any other ranges in use within the cluster's network").
                master_ipv4_cidr_block=vpc.control_plane_cidr(cfg),
            ),
            master_authorized_networks_config=authorized,
            ip_allocation_policy=GoogleContainerClusterIpAllocationPolicy(),
            enable_shielded_nodes=True,
            # No client certificates: the control plane takes Google identities only.
            master_auth=GoogleContainerClusterMasterAuth(
                client_certificate_config=GoogleContainerClusterMasterAuthClientCertificateConfig(
                    issue_client_certificate=False
                )
            ),
            enable_intranode_visibility=True,
            datapath_provider="ADVANCED_DATAPATH",  # Dataplane V2 enforces the NetworkPolicy
            node_pool_defaults=GoogleContainerClusterNodePoolDefaults(
                node_config_defaults=GoogleContainerClusterNodePoolDefaultsNodeConfigDefaults(
                    gcfs_config=GoogleContainerClusterNodePoolDefaultsNodeConfigDefaultsGcfsConfig(
                        enabled=True
                    )
                )
            ),
            resource_labels={"deployment": cfg.name},
            depends_on=services,
            lifecycle=TerraformResourceLifecycle(
                precondition=[
                    Precondition(
                        condition=Op.gte(_version_number(channel_default), _minimum(cfg)),
                        error_message=(
                            f"GKE's {cfg.gke.release_channel} channel offers no version at or "
                            f"above [gke] min_version = {cfg.gke.min_version} in {cfg.zone} "
                            "(the version a flex-start TPU pool and the ComputeClass need): "
                            'choose release_channel = "RAPID", or wait for the channel'
                        ),
                    )
                ]
            ),
        )
        account = service_account_email(cfg, project)
        GoogleContainerNodePool(
            self,
            "system",
            name="system",
            cluster=self.cluster.id,
            location=cfg.zone,
            node_count=1,
            management=GoogleContainerNodePoolManagement(auto_repair=True, auto_upgrade=True),
            node_config=self._node_config(account, machine_type=cfg.gke.system_machine_type),
        )
        self.pools = {
            capacity: self._tpu_pool(cfg, capacity, account) for capacity in cfg.gke.capacity_order
        }
        self._serving_access(cfg, project)
        self._deadline(cfg, project)
        TerraformOutput(self, "cluster_name", value=self.cluster.name)
        TerraformOutput(self, "cluster_location", value=self.cluster.location)
        TerraformOutput(self, "tpu_pools", value=[p.name for p in self.pools.values()])

    @staticmethod
    def _node_config(
        account: str,
        *,
        machine_type: str,
        spot: bool = False,
        flex_start: bool = False,
        max_run_duration: str | None = None,
        labels: dict[str, str] | None = None,
        taints: list[GoogleContainerNodePoolNodeConfigTaint] | None = None,
    ) -> GoogleContainerNodePoolNodeConfig:
        return GoogleContainerNodePoolNodeConfig(
            machine_type=machine_type,
            service_account=account,
            oauth_scopes=[names.CLOUD_PLATFORM_SCOPE],
            # Pods see GKE's metadata server, which hands out the pod's own identity, never the
            # node's (Workload Identity).
            workload_metadata_config=GoogleContainerNodePoolNodeConfigWorkloadMetadataConfig(
                mode="GKE_METADATA"
            ),
            shielded_instance_config=GoogleContainerNodePoolNodeConfigShieldedInstanceConfig(
                enable_secure_boot=True, enable_integrity_monitoring=True
            ),
            # Image streaming: a multi-GB serving image starts before it is fully pulled.
            gcfs_config=GoogleContainerNodePoolNodeConfigGcfsConfig(enabled=True),
            spot=spot or None,
            flex_start=flex_start or None,
            max_run_duration=max_run_duration,
            reservation_affinity=(
                GoogleContainerNodePoolNodeConfigReservationAffinity(
                    consume_reservation_type="NO_RESERVATION"
                )
                if flex_start
                else None
            ),
            labels=labels,
            taint=taints,
        )

    def _tpu_pool(self, cfg: DeployConfig, capacity: str, account: str) -> GoogleContainerNodePool:
        flex = capacity == "flex-start"
        pool_name = identifiers.pool_name(capacity)
        return GoogleContainerNodePool(
            self,
            pool_name,
            name=pool_name,
            cluster=self.cluster.id,
            location=cfg.zone,
            initial_node_count=0,
            # From 0: a pool with no pod asking for google.com/tpu bills nothing.
            autoscaling=GoogleContainerNodePoolAutoscaling(
                min_node_count=0, max_node_count=cfg.gke.max_replicas, location_policy="ANY"
            ),
            management=GoogleContainerNodePoolManagement(auto_repair=True, auto_upgrade=True),
            node_config=self._node_config(
                account,
                machine_type=facts.V5E.machine_type,
                spot=not flex,
                flex_start=flex,
                # GKE recycles a flex-start node at its run's end: the node stops billing.
                max_run_duration=f"{cfg.gke.max_run_duration_seconds}s" if flex else None,
                labels=identifiers.pool_labels(cfg, capacity),
                taints=[
                    GoogleContainerNodePoolNodeConfigTaint(key=k, value=v, effect=e)
                    for k, v, e in identifiers.pool_taints(cfg)
                ],
            ),
        )

    def _deadline(self, cfg: DeployConfig, project: str) -> None:
        """Spot TPU nodes and the idle floor bill until deleted: the deadline job deletes the
        cluster (pools, nodes, fee; tpudeploy.gke.deadline_target says what it leaves), unless
        max_run_duration = "none" opted out. deletion_protection is Terraform's own guard (the
        provider's, not the API's): the job's clusters.delete is not refused by it. Creating the
        cluster again (a deploy after the job deleted it) starts a new deadline."""
        if cfg.deadline_seconds is None:
            TerraformOutput(
                self,
                "billing",
                value="GKE: nothing deletes the cluster but `make destroy-all` (max_run_duration "
                '= "none"); make check prints what forgetting it costs a month',
            )
            return
        declare_deadline(
            self,
            cfg,
            project,
            cfg.deadline_seconds,
            what=deadline_target.what(cfg),
            uri=deadline_target.cluster_url(cfg, project),
            renew_on=[self.cluster.id],
            resource_condition=deadline_target.resource_condition(cfg),
        )

    def _serving_access(self, cfg: DeployConfig, project: str) -> None:
        """The pods' Kubernetes service account reads its two secrets and reads and creates
        (never replaces) compile-cache objects, like the TPU VM's account. Granted here, after
        the cluster: the Workload Identity pool exists only once a cluster uses it."""
        number = DataGoogleProject(self, "project-number", project_id=project).number
        # The custom metrics adapter reads Cloud Monitoring as its own Kubernetes service
        # account: the HPA's signal (tpudeploy.gke.metrics_adapter). Project-level, as GKE
        # documents it; a pipeline deployment's is the bootstrap's (granting it takes
        # setIamPolicy on the project: tpudeploy/gke/pipeline.py project_members).
        if not cfg.gitops_managed:
            GoogleProjectIamMember(
                self,
                "metrics-adapter-viewer",
                project=project,
                role=metrics_adapter.IAM_ROLE,
                member=metrics_adapter.principal(project=project, project_number=number),
                depends_on=[self.cluster],
            )
        member = identifiers.serving_principal(cfg, project=project, project_number=number)
        for secret, _ in platform_for(cfg).secrets(cfg):
            GoogleSecretManagerSecretIamMember(
                self,
                f"{secret.removeprefix(cfg.name + '-')}-serving-accessor",
                project=project,
                secret_id=secret,
                role="roles/secretmanager.secretAccessor",
                member=member,
                depends_on=[self.cluster],
            )
        # The TPU VM's node account's grants, by the same function: create is conditioned on
        # this key's archives (an unconditioned objectCreator would let a replica plant an
        # archive for any configuration that shares the bucket).
        bucket = cfg.compile_cache_bucket(project)
        for id_, (role, condition) in cache_bucket_grants(cfg, bucket).items():
            GoogleStorageBucketIamMember(
                self,
                f"compile-cache-serving-{id_}",
                bucket=bucket,
                role=role,
                member=member,
                condition=GoogleStorageBucketIamMemberCondition(**condition) if condition else None,
                depends_on=[self.cluster],
            )


def _version_number(version: str) -> object:
    """A GKE version `1.X.Y-gke.N` as one number Terraform can compare (1XXXYYYNNNNNNNNNN;
    Terraform's numbers are arbitrary-precision, so 17 digits stay exact); the same order as
    tpudeploy.config.gke.version_tuple."""
    parts = Fn.regex("^([0-9]+)[.]([0-9]+)[.]([0-9]+)-gke[.]([0-9]+)$", version)
    return Fn.tonumber(Fn.format("%d%03d%03d%010d", [Fn.element(parts, i) for i in range(4)]))


def _minimum(cfg: DeployConfig) -> int:
    major, minor, patch, gke = version_tuple(cfg.gke.min_version)
    return int(f"{major}{minor:03d}{patch:03d}{gke:010d}")
