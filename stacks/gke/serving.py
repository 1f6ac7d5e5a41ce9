"""Serving stack (platform = "gke"): the Kubernetes objects that run the replicas.

Creates: the namespace and the replicas' service account (Workload Identity: the cluster stack
grants it its secrets and the compile cache); the SecretProviderClass of the Secret Manager
add-on; a ConfigMap with the front door's nginx config (the TPU VM's, same template) and its
prep script and the compile cache's script; the ComputeClass ordering spot before flex-start; the
Deployment (one pod per chip: the compile cache restored before vLLM starts, vLLM with the TPU
VM's serve line, the cache saved once it is ready, then nginx in front); a PodDisruptionBudget;
the Service (an internal load balancer, only [network] allowed_cidrs as sources); a PodMonitoring
for vLLM's metrics; the HorizontalPodAutoscaler on vllm:num_requests_waiting, and the Custom
Metrics Stackdriver Adapter that serves it (stacks/gke/adapter.py). `kubernetes_manifest` only
for the custom resources; the Kubernetes provider is configured from the cluster (data
sources), since the cluster is another stack's.
"""

from __future__ import annotations

from typing import Any

from cdktf import TerraformStack
from cdktf_cdktf_provider_google_beta.data_google_client_config import DataGoogleClientConfig
from cdktf_cdktf_provider_google_beta.data_google_container_cluster import (
    DataGoogleContainerCluster,
)
from cdktf_cdktf_provider_kubernetes.config_map_v1 import ConfigMapV1, ConfigMapV1Metadata
from cdktf_cdktf_provider_kubernetes.deployment_v1 import (
    DeploymentV1,
    DeploymentV1Metadata,
    DeploymentV1Spec,
)
from cdktf_cdktf_provider_kubernetes.horizontal_pod_autoscaler_v2 import (
    HorizontalPodAutoscalerV2,
    HorizontalPodAutoscalerV2Metadata,
    HorizontalPodAutoscalerV2Spec,
)
from cdktf_cdktf_provider_kubernetes.manifest import Manifest
from cdktf_cdktf_provider_kubernetes.namespace_v1 import NamespaceV1, NamespaceV1Metadata
from cdktf_cdktf_provider_kubernetes.network_policy_v1 import (
    NetworkPolicyV1,
    NetworkPolicyV1Metadata,
    NetworkPolicyV1Spec,
)
from cdktf_cdktf_provider_kubernetes.pod_disruption_budget_v1 import (
    PodDisruptionBudgetV1,
    PodDisruptionBudgetV1Metadata,
    PodDisruptionBudgetV1Spec,
)
from cdktf_cdktf_provider_kubernetes.provider import KubernetesProvider
from cdktf_cdktf_provider_kubernetes.service_account_v1 import (
    ServiceAccountV1,
    ServiceAccountV1Metadata,
)
from cdktf_cdktf_provider_kubernetes.service_v1 import (
    ServiceV1,
    ServiceV1Metadata,
    ServiceV1Spec,
    ServiceV1SpecPort,
)
from constructs import Construct

from stacks.common import configure, terraform_literal
from stacks.gke.adapter import declare_adapter
from stacks.gke.typed import typed
from stacks.watch import alerts
from tpudeploy.config import DeployConfig
from tpudeploy.gke import cache, identifiers, pod, reach, zero
from tpudeploy.gke.manifests import (
    custom_resources,
    hpa_kv_metric_name,
    hpa_metric_name,
    labels,
    network_policy_spec,
)

# Where the tpudeploy.gke.pod paths are mounted from.
_VLLM_SECRETS, _FRONTDOOR_SECRETS, _FRONTDOOR, _SCRIPTS, _CACHE, _SHM, _TMP = (
    "vllm-secrets",
    "frontdoor-secrets",
    "frontdoor",
    "scripts",
    "xla-cache",
    "dshm",
    "tmp",
)
# Where the tpudeploy.gke.cache paths are mounted from.
_CACHE_RUN, _CACHE_SCRATCH, _GATE = "cache-run", "cache-scratch", "frontdoor-gate"


class ServingStack(TerraformStack):
    """The Kubernetes objects: see the module docstring."""

    def __init__(self, scope: Construct, id_: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id_)
        cfg = config
        project = configure(self, cfg)
        cluster = DataGoogleContainerCluster(
            self, "cluster", name=identifiers.cluster_name(cfg), location=cfg.zone, project=project
        )
        token = DataGoogleClientConfig(self, "client").access_token
        KubernetesProvider(
            self,
            "kubernetes",
            host=f"https://{cluster.endpoint}",
            token=token,
            cluster_ca_certificate=(
                "${base64decode(" + cluster.fqn + ".master_auth[0].cluster_ca_certificate)}"
            ),
        )
        # The HPA's signal: nothing serves the custom metrics API until the adapter runs.
        declare_adapter(self, external=zero.scaled_to_zero(cfg))
        # Here, not with the cluster: make destroy removes this stack and keeps the cluster, and
        # the no-server policy must end with the replicas it watches.
        if not cfg.gitops_managed:  # its deploy identity holds no Monitoring permissions
            alerts(self, cfg, project)
        ns = NamespaceV1(
            self, "namespace", metadata=NamespaceV1Metadata(name=identifiers.namespace(cfg))
        )
        meta: dict[str, Any] = {"namespace": ns.metadata.name, "labels": labels(cfg)}
        serves = zero.serves_labels(cfg) if zero.scaled_to_zero(cfg) else {}
        ServiceAccountV1(
            self,
            "service-account",
            metadata=ServiceAccountV1Metadata(name=identifiers.SERVICE_ACCOUNT, **meta),
            automount_service_account_token=False,
        )
        ConfigMapV1(
            self,
            "scripts",
            metadata=ConfigMapV1Metadata(name=f"{cfg.name}-frontdoor", **meta),
            # Terraform would read the scripts' ${...} and %{...} as its own expressions.
            data={
                name: terraform_literal(text)
                for name, text in {**pod.scripts(cfg), **cache.scripts(cfg)}.items()
            },
        )
        # The custom resources name their namespace as a literal, not through the namespace
        # resource: without the dependency Terraform creates them beside the namespace and the
        # API server refuses them (namespaces "tpudeploy" not found; make rehearse PLATFORM=gke).
        crs = {
            key: Manifest(self, key, manifest=body, depends_on=[ns])
            for key, body in custom_resources(cfg, project=project).items()
        }
        deployment = DeploymentV1(
            self,
            "deployment",
            metadata=DeploymentV1Metadata(name=cfg.name, **meta),
            # A rollout waits for a TPU node and a compile (minutes): `make wait` follows it.
            wait_for_rollout=False,
            spec=typed(
                DeploymentV1Spec,
                {
                    "replicas": str(cfg.gke.min_replicas),
                    "progress_deadline_seconds": pod.progress_deadline_s(),
                    "selector": {"match_labels": labels(cfg)},
                    # A new replica comes up before an old one goes: max one chip over.
                    "strategy": {
                        "type": "RollingUpdate",
                        "rolling_update": {"max_surge": "1", "max_unavailable": "0"},
                    },
                    "template": {
                        "metadata": {
                            # At zero, also the label the Service selects (zero.SERVES_LABEL).
                            "labels": {**labels(cfg), **serves},
                            "annotations": pod.template_annotations(cfg),
                        },
                        "spec": self._pod_spec(cfg),
                    },
                },
            ),
            depends_on=[
                *(crs[f"secret-provider-class-{reader}"] for reader in pod.SECRET_READERS),
                crs["compute-class"],
            ],
        )
        # The HPA owns the replica count after the first apply.
        deployment.add_override("lifecycle.ignore_changes", ["spec[0].replicas"])
        # Who reaches each front door port (manifests.network_policy_spec; Dataplane V2 enforces).
        NetworkPolicyV1(
            self,
            "network-policy",
            metadata=NetworkPolicyV1Metadata(name=cfg.name, **meta),
            spec=typed(NetworkPolicyV1Spec, network_policy_spec(cfg)),
        )
        PodDisruptionBudgetV1(
            self,
            "pdb",
            metadata=PodDisruptionBudgetV1Metadata(name=cfg.name, **meta),
            spec=typed(
                PodDisruptionBudgetV1Spec,
                {
                    "max_unavailable": str(pod.pdb_max_unavailable(cfg)),
                    "selector": {"match_labels": labels(cfg)},
                },
            ),
        )
        ServiceV1(
            self,
            "service",
            metadata=ServiceV1Metadata(
                name=cfg.name,
                # Internal passthrough load balancer: clients of the VPC in its region (every
                # region with [gke] global_access), never the internet; allowed_cidrs narrows
                # the sources further (tpudeploy.gke.reach says who, with sources).
                annotations=reach.service_annotations(cfg),
                **meta,
            ),
            spec=ServiceV1Spec(
                type="LoadBalancer",
                selector=serves if zero.scaled_to_zero(cfg) else labels(cfg),
                load_balancer_source_ranges=list(cfg.network.allowed_cidrs) or None,
                external_traffic_policy="Local",
                port=[
                    ServiceV1SpecPort(
                        name="https",
                        port=cfg.proxy.port,
                        target_port="https",
                        protocol="TCP",
                    )
                ],
            ),
        )
        if cfg.routing.gateway:
            from stacks.gke.routing_objects import add_routing

            add_routing(self, cfg, project=project, depends_on=[ns])
        waiting = pod.hpa_waiting_target(cfg)
        HorizontalPodAutoscalerV2(
            self,
            "hpa",
            metadata=HorizontalPodAutoscalerV2Metadata(name=cfg.name, **meta),
            spec=typed(
                HorizontalPodAutoscalerV2Spec,
                {
                    "min_replicas": cfg.gke.min_replicas,
                    "max_replicas": cfg.gke.max_replicas,
                    "scale_target_ref": {
                        "api_version": "apps/v1",
                        "kind": "Deployment",
                        "name": deployment.metadata.name,
                    },
                    # Two signals, the larger proposal wins (HPA v2): the queue, and the KV
                    # pool's use at the planner's KV wall, which fills before anything waits.
                    "metric": [
                        {
                            "type": "Pods",
                            "pods": {
                                "metric": {"name": hpa_metric_name()},
                                "target": {"type": "AverageValue", "average_value": str(waiting)},
                            },
                        },
                        {
                            "type": "Pods",
                            "pods": {
                                "metric": {"name": hpa_kv_metric_name()},
                                "target": {
                                    "type": "AverageValue",
                                    "average_value": pod.hpa_kv_target(cfg),
                                },
                            },
                        },
                        # At zero: the wake gauge, which exists with no replica (an HPA at
                        # minReplicas 0 needs an External or Object metric; zero.RULES).
                        *([zero.hpa_external_metric(cfg)] if zero.scaled_to_zero(cfg) else []),
                    ],
                    "behavior": {
                        # A replica that goes costs a compile to bring back (warm boot 497 s).
                        "scale_down": {
                            "stabilization_window_seconds": pod.scale_down_window_s(),
                            "select_policy": "Min",
                            "policy": [{"type": "Pods", "value": 1, "period_seconds": 60}],
                        },
                        "scale_up": {
                            "stabilization_window_seconds": 0,
                            "select_policy": "Max",
                            "policy": [{"type": "Pods", "value": 1, "period_seconds": 60}],
                        },
                    },
                },
            ),
        )

        if zero.scaled_to_zero(cfg):
            from stacks.gke.wake_objects import declare_wake

            declare_wake(
                self,
                cfg,
                ns=ns,
                replica_spec=self._pod_spec(cfg),
                depends_on=[crs["secret-provider-class-frontdoor"]],
            )

    @staticmethod
    def _pod_spec(cfg: DeployConfig) -> dict[str, Any]:
        locked: dict[str, Any] = {
            "allow_privilege_escalation": False,
            "read_only_root_filesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        vllm: dict[str, Any] = {
            "name": pod.VLLM_CONTAINER,
            "image": cfg.vllm.image,
            "command": pod.serve_command(cfg),
            "env": [{"name": k, "value": v} for k, v in sorted(pod.vllm_env(cfg).items())],
            "resources": pod.vllm_resources(),
            "volume_mount": [
                # The Hugging Face token only (pod.secret_files): never the API or TLS key.
                {"name": _VLLM_SECRETS, "mount_path": pod.SECRETS_DIR, "read_only": True},
                {"name": _CACHE, "mount_path": pod.CACHE_DIR},
                {"name": _SHM, "mount_path": pod.SHM_DIR},
            ],
            "security_context": {
                "allow_privilege_escalation": False,
                "capabilities": {"drop": ["NET_RAW"]},
            },
            "startup_probe": {"exec": {"command": pod.health_exec(cfg)}, **pod.startup_probe()},
            # After startup: an engine that died answers 503 and leaves the Service.
            "readiness_probe": {
                "exec": {"command": pod.health_exec(cfg)},
                "period_seconds": 10,
                "failure_threshold": 2,
                "timeout_seconds": 5,
            },
            "lifecycle": {"pre_stop": {"exec": {"command": pod.vllm_pre_stop()}}},
        }
        frontdoor: dict[str, Any] = {
            "name": "frontdoor",
            "image": cfg.proxy.image,
            # The image's nginx is the pinned version first (as on the TPU VM), then the gate;
            # beside nginx, the watcher that reloads it when the key map changes.
            "command": pod.nginx_version_checked(
                cfg, pod.key_reload_watched(cache.frontdoor_command())
            ),
            "port": [
                {"name": "https", "container_port": cfg.proxy.port, "protocol": "TCP"},
                {"name": "metrics", "container_port": pod.METRICS_PORT, "protocol": "TCP"},
                *(
                    [{"name": "pool", "container_port": port, "protocol": "TCP"}]
                    if (port := pod.pool_port(cfg))
                    else []
                ),
            ],
            "volume_mount": [
                {"name": _FRONTDOOR, "mount_path": pod.FRONTDOOR_DIR, "read_only": True},
                # nginx's usage counter (pod.USAGE_JS), read from the ConfigMap.
                {"name": _SCRIPTS, "mount_path": pod.SCRIPTS_DIR, "read_only": True},
                {"name": _TMP, "mount_path": pod.TMP_DIR},
                {"name": _GATE, "mount_path": cache.GATE_DIR, "read_only": True},
            ],
            "resources": {
                "requests": {"cpu": "250m", "memory": "128Mi"},
                "limits": {"cpu": "1", "memory": "256Mi"},
            },
            # As on the TPU VM: no privileges beyond switching to nginx's worker user.
            "security_context": {
                **locked,
                "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "SETUID", "SETGID"]},
            },
            # /health through the front door: nginx up and vLLM's engine alive (200; 502 while
            # vLLM compiles, 503 if its engine died).
            "readiness_probe": {
                "http_get": {"path": "/health", "port": "https", "scheme": "HTTPS"},
                "period_seconds": 5,
                "failure_threshold": 2,
            },
            "lifecycle": {"pre_stop": {"exec": {"command": pod.frontdoor_pre_stop()}}},
        }
        # The front door's secrets (read-only), its memory volume (written) and the scripts: what
        # both the init container and the key loop need, and nothing else.
        frontdoor_mounts = [
            {"name": _FRONTDOOR_SECRETS, "mount_path": pod.SECRETS_DIR, "read_only": True},
            {"name": _FRONTDOOR, "mount_path": pod.FRONTDOOR_DIR},
            {"name": _SCRIPTS, "mount_path": pod.SCRIPTS_DIR, "read_only": True},
        ]
        prep: dict[str, Any] = {
            "name": "frontdoor-prep",
            "image": cfg.vllm.image,
            "command": pod.prep_command(),
            "volume_mount": frontdoor_mounts,
            "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"},
                "limits": {"cpu": "500m", "memory": "128Mi"},
            },
            "security_context": locked,
        }
        # Keeps the key map current from the add-on's refreshed files (pod.KEY_LOOP_S): the
        # vLLM image for its python3 (the nginx image has none), the front door's secrets only.
        keys: dict[str, Any] = {
            "name": pod.KEYS_CONTAINER,
            "image": cfg.vllm.image,
            "command": pod.keys_command(),
            "volume_mount": frontdoor_mounts,
            "resources": {
                "requests": {"cpu": "50m", "memory": "64Mi"},
                "limits": {"cpu": "250m", "memory": "128Mi"},
            },
            "security_context": locked,
        }
        restore, save, cache_volumes = ServingStack._cache_parts(cfg, locked)
        return {
            "service_account_name": identifiers.SERVICE_ACCOUNT,
            "automount_service_account_token": False,
            "termination_grace_period_seconds": pod.termination_grace_s(),
            "node_selector": {
                identifiers.COMPUTE_CLASS_KEY: identifiers.compute_class_name(cfg),
                **identifiers.tpu_node_selector(),
            },
            "toleration": [
                {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}
                for key, value, _ in identifiers.pool_taints(cfg)
            ],
            "init_container": [restore, prep],
            "container": [vllm, frontdoor, keys, save],
            "volume": [
                *(
                    {
                        "name": volume,
                        "csi": {
                            "driver": pod.SECRETS_CSI_DRIVER,
                            "read_only": True,
                            "volume_attributes": {
                                "secretProviderClass": pod.secret_provider_class_name(cfg, reader)
                            },
                        },
                    }
                    for volume, reader in (
                        (_VLLM_SECRETS, "vllm"),
                        (_FRONTDOOR_SECRETS, "frontdoor"),
                    )
                ),
                {"name": _FRONTDOOR, "empty_dir": {"medium": "Memory", "size_limit": "16Mi"}},
                {
                    "name": _SCRIPTS,
                    "config_map": {"name": f"{cfg.name}-frontdoor", "default_mode": "0555"},
                },
                # Node-local: a GCS-backed JAX cache directory was seen to miss every time.
                {"name": _CACHE, "empty_dir": {}},
                {"name": _SHM, "empty_dir": {"medium": "Memory", "size_limit": pod.SHM_SIZE}},
                {"name": _TMP, "empty_dir": {"medium": "Memory", "size_limit": pod.TMP_SIZE}},
                *cache_volumes,
            ],
        }

    @staticmethod
    def _cache_parts(
        cfg: DeployConfig, locked: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        """The compile cache (tpudeploy/gke/cache.py): restored into the node-local cache
        volume before vLLM starts, saved create-only after it is ready, then the front door
        opens. Both steps run on the vLLM image (bash, curl, python3 for the guard) as the
        pod's Kubernetes service account (Workload Identity)."""
        scripts = {"name": _SCRIPTS, "mount_path": pod.SCRIPTS_DIR, "read_only": True}
        run = {"name": _CACHE_RUN, "mount_path": cache.RUNTIME_DIR}
        scratch = {"name": _CACHE_SCRATCH, "mount_path": cache.SCRATCH_DIR}
        restore: dict[str, Any] = {
            "name": "cache-restore",
            "image": cfg.vllm.image,
            "command": cache.restore_command(),
            "volume_mount": [
                scripts,
                run,
                scratch,
                {"name": _CACHE, "mount_path": pod.CACHE_DIR},
            ],
            "resources": cache.cache_resources(),
            "security_context": locked,
        }
        save: dict[str, Any] = {
            "name": "cache-save",
            "image": cfg.vllm.image,
            "command": cache.save_command(),
            "volume_mount": [
                scripts,
                run,
                scratch,
                # Read only: the save packs what vLLM compiled and never writes the cache.
                {"name": _CACHE, "mount_path": pod.CACHE_DIR, "read_only": True},
                {"name": _GATE, "mount_path": cache.GATE_DIR},
            ],
            "resources": cache.cache_resources(),
            "security_context": locked,
        }
        volumes = [
            {"name": _CACHE_RUN, "empty_dir": {"medium": "Memory", "size_limit": "1Mi"}},
            {"name": _CACHE_SCRATCH, "empty_dir": {"size_limit": cache.scratch_size()}},
            {"name": _GATE, "empty_dir": {"medium": "Memory", "size_limit": "1Mi"}},
        ]
        return restore, save, volumes
