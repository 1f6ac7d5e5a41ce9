"""Routing objects of the serving stack ([routing] gateway = true): the endpoint picker as typed
objects (ServiceAccount, Role and RoleBinding, ClusterRole and ClusterRoleBinding for its metrics
endpoint's authentication, ConfigMap, Deployment, Service), and the Gateway, HTTPRoute,
InferencePool and its GKE policies as kubernetes_manifest. What they hold comes from
tpudeploy.gke.routing; this module declares them and nothing else.
"""

from __future__ import annotations

from typing import Any

from cdktf_cdktf_provider_kubernetes.cluster_role_v1 import (
    ClusterRoleV1,
    ClusterRoleV1Metadata,
    ClusterRoleV1Rule,
)
from cdktf_cdktf_provider_kubernetes.config_map_v1 import ConfigMapV1, ConfigMapV1Metadata
from cdktf_cdktf_provider_kubernetes.manifest import Manifest
from cdktf_cdktf_provider_kubernetes.role_v1 import RoleV1, RoleV1Metadata, RoleV1Rule
from cdktf_cdktf_provider_kubernetes.service_account_v1 import (
    ServiceAccountV1,
    ServiceAccountV1Metadata,
)
from cdktf_cdktf_provider_kubernetes.service_v1 import ServiceV1, ServiceV1Metadata, ServiceV1Spec
from constructs import Construct

from stacks.gke.objects import bind_account, declare_deployment
from stacks.gke.subnet import proxy_subnet
from stacks.gke.typed import typed
from tpudeploy.config import DeployConfig
from tpudeploy.gke import identifiers, manifests, routing

_READ = ["get", "list", "watch"]
# What the picker watches (its pool, the pods it picks among) in its own namespace.
_NAMESPACED_RULES: list[dict[str, Any]] = [
    {"api_groups": [""], "resources": ["pods"], "verbs": _READ},
    {
        "api_groups": ["inference.networking.k8s.io"],
        "resources": ["inferencepools"],
        "verbs": _READ,
    },
    {
        "api_groups": ["inference.networking.x-k8s.io"],
        "resources": ["inferenceobjectives", "inferencemodelrewrites"],
        "verbs": _READ,
    },
]
# --metrics-endpoint-auth (on by default) checks each scraper's token with the API server.
_CLUSTER_RULES: list[dict[str, Any]] = [
    {"api_groups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {
        "api_groups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    },
]


def _picker_pod(cfg: DeployConfig, name: str) -> dict[str, Any]:
    health = {"grpc": {"port": routing.EPP_HEALTH_PORT, "service": "inference-extension"}}
    return {
        "service_account_name": name,
        "termination_grace_period_seconds": routing.PICKER_GRACE_S,
        "container": [
            {
                "name": "epp",
                "image": cfg.routing.picker_image,
                "args": routing.picker_args(cfg),
                "env": [
                    {
                        "name": "NAMESPACE",
                        "value_from": {"field_ref": {"field_path": "metadata.namespace"}},
                    },
                    {
                        "name": "POD_NAME",
                        "value_from": {"field_ref": {"field_path": "metadata.name"}},
                    },
                ],
                "port": [
                    {"name": "grpc", "container_port": routing.EPP_GRPC_PORT},
                    {"name": "grpc-health", "container_port": routing.EPP_HEALTH_PORT},
                    {"name": "metrics", "container_port": routing.EPP_METRICS_PORT},
                ],
                "resources": routing.EPP_RESOURCES,
                "liveness_probe": {**health, "initial_delay_seconds": 5, "period_seconds": 10},
                "readiness_probe": {**health, "period_seconds": 2},
                "volume_mount": [
                    {"name": "config", "mount_path": routing.PICKER_CONFIG_DIR, "read_only": True}
                ],
                # The image is distroless static:nonroot (the project's Dockerfile, BASE_IMAGE):
                # it runs as uid 65532 and writes nothing.
                "security_context": {
                    "allow_privilege_escalation": False,
                    "read_only_root_filesystem": True,
                    "run_as_non_root": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
        "volume": [{"name": "config", "config_map": {"name": name}}],
    }


def add_routing(
    scope: Construct, cfg: DeployConfig, *, project: str, depends_on: list[Any]
) -> None:
    """Declare the picker and the routing resources in `scope` (the serving stack)."""
    if cfg.routing.proxy_subnet_cidr and not cfg.gitops_managed:
        # Where the Gateway's proxies run; it goes with the serving stack (make destroy), as the
        # load balancer it serves does. A pipeline deployment's is the bootstrap's.
        subnet = proxy_subnet(scope, cfg, project=project)
        depends_on = [*depends_on, subnet]
    name = routing.epp_name(cfg)
    picker_labels = manifests.picker_labels(cfg)
    meta: dict[str, Any] = {"namespace": identifiers.namespace(cfg), "labels": picker_labels}
    ServiceAccountV1(scope, "epp-account", metadata=ServiceAccountV1Metadata(name=name, **meta))
    RoleV1(
        scope,
        "epp-role",
        metadata=RoleV1Metadata(name=name, **meta),
        rule=[typed(RoleV1Rule, r) for r in _NAMESPACED_RULES],
    )
    account = (name, identifiers.namespace(cfg))
    bind_account(
        scope,
        "epp-role-binding",
        metadata={"name": name, **meta},
        role=("Role", name),
        account=account,
    )
    ClusterRoleV1(
        scope,
        "epp-auth-role",
        metadata=ClusterRoleV1Metadata(name=f"{name}-auth", labels=picker_labels),
        rule=[typed(ClusterRoleV1Rule, r) for r in _CLUSTER_RULES],
    )
    bind_account(
        scope,
        "epp-auth-binding",
        metadata={"name": f"{name}-auth", "labels": picker_labels},
        role=("ClusterRole", f"{name}-auth"),
        account=account,
    )
    ConfigMapV1(
        scope,
        "epp-config",
        metadata=ConfigMapV1Metadata(name=name, **meta),
        # JSON is YAML: the EPP reads the file as YAML.
        data={routing.PICKER_CONFIG_FILE: routing.picker_config_text(cfg)},
    )
    # One picker, replaced as upstream's chart does (routing.PICKER_STRATEGY); it fails open,
    # so its restart costs scoring only.
    declare_deployment(
        scope,
        "epp",
        metadata={"name": name, **meta},
        labels=picker_labels,
        pod=_picker_pod(cfg, name),
        replicas=routing.PICKER_REPLICAS,
        pod_annotations=routing.picker_pod_annotations(cfg),
        strategy=routing.PICKER_STRATEGY,
    )
    ServiceV1(
        scope,
        "epp-service",
        metadata=ServiceV1Metadata(name=name, **meta),
        spec=typed(
            ServiceV1Spec,
            {
                "type": "ClusterIP",
                "selector": picker_labels,
                "port": [
                    {
                        "name": "grpc",
                        "port": routing.EPP_GRPC_PORT,
                        "target_port": "grpc",
                        "app_protocol": "http2",
                    }
                ],
            },
        ),
    )
    for key, body in routing.custom_resources(cfg).items():
        Manifest(scope, key, manifest=body, depends_on=depends_on)
