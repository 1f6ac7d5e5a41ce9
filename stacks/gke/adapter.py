"""The Custom Metrics Stackdriver Adapter's Kubernetes objects (the serving stack declares them).

Creates: its namespace and service account; the two built-in roles every aggregated API server
is bound to (auth-delegator, extension-apiserver-authentication-reader); the manifest's
resource-reader ClusterRole and its binding; the Deployment (one replica on the system pool),
its Service, and the APIServices registering custom.metrics.k8s.io v1beta1 and v1beta2.
Its IAM (roles/monitoring.viewer) is the cluster stack's. What each value is and where it comes
from: tpudeploy/gke/metrics_adapter.py.
"""

from __future__ import annotations

from typing import Any

from cdktf import TerraformStack
from cdktf_cdktf_provider_kubernetes.api_service_v1 import (
    ApiServiceV1,
    ApiServiceV1Metadata,
    ApiServiceV1Spec,
    ApiServiceV1SpecService,
)
from cdktf_cdktf_provider_kubernetes.cluster_role_v1 import (
    ClusterRoleV1,
    ClusterRoleV1Metadata,
    ClusterRoleV1Rule,
)
from cdktf_cdktf_provider_kubernetes.namespace_v1 import NamespaceV1, NamespaceV1Metadata
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

from stacks.gke.objects import bind_account, declare_deployment
from tpudeploy.gke import metrics_adapter

_CERTS = "serving-cert"


def declare_adapter(stack: TerraformStack, *, external: bool = False) -> None:
    """Every object of the adapter, under construct ids starting with `metrics-adapter`."""
    ns = NamespaceV1(
        stack, "metrics-adapter-ns", metadata=NamespaceV1Metadata(name=metrics_adapter.NAMESPACE)
    )
    namespace = ns.metadata.name
    sa = ServiceAccountV1(
        stack,
        "metrics-adapter-sa",
        metadata=ServiceAccountV1Metadata(
            name=metrics_adapter.SERVICE_ACCOUNT, namespace=namespace
        ),
    )
    account = (sa.metadata.name, namespace)
    bind_account(
        stack,
        "metrics-adapter-auth-delegator",
        metadata={"name": f"{metrics_adapter.NAMESPACE}:{metrics_adapter.AUTH_DELEGATOR}"},
        role=("ClusterRole", metrics_adapter.AUTH_DELEGATOR),
        account=account,
    )
    bind_account(
        stack,
        "metrics-adapter-auth-reader",
        metadata={
            "name": f"{metrics_adapter.NAMESPACE}-auth-reader",
            "namespace": metrics_adapter.AUTH_READER_NAMESPACE,
        },
        role=("Role", metrics_adapter.AUTH_READER),
        account=account,
    )
    reader = ClusterRoleV1(
        stack,
        "metrics-adapter-resource-reader",
        metadata=ClusterRoleV1Metadata(name=metrics_adapter.RESOURCE_READER),
        rule=[
            ClusterRoleV1Rule(
                api_groups=list(r.api_groups), resources=list(r.resources), verbs=list(r.verbs)
            )
            for r in metrics_adapter.RESOURCE_READER_RULES
        ],
    )
    bind_account(
        stack,
        "metrics-adapter-resource-reader-binding",
        metadata={"name": metrics_adapter.RESOURCE_READER},
        role=("ClusterRole", reader.metadata.name),
        account=account,
    )
    deployment = declare_deployment(
        stack,
        "metrics-adapter",
        metadata={
            "name": metrics_adapter.NAME,
            "namespace": namespace,
            "labels": dict(metrics_adapter.LABELS),
        },
        labels=dict(metrics_adapter.LABELS),
        pod=_pod_spec(sa.metadata.name),
    )
    ServiceV1(
        stack,
        "metrics-adapter-service",
        metadata=ServiceV1Metadata(
            name=metrics_adapter.NAME, namespace=namespace, labels=dict(metrics_adapter.LABELS)
        ),
        spec=ServiceV1Spec(
            type="ClusterIP",
            selector=dict(metrics_adapter.LABELS),
            port=[
                ServiceV1SpecPort(
                    name="https", port=metrics_adapter.PORT, target_port="https", protocol="TCP"
                )
            ],
        ),
    )
    for group, version, priority in metrics_adapter.api_services(external=external):
        ApiServiceV1(
            stack,
            # The custom metrics APIs keep their first ids; the external one has its own.
            f"metrics-adapter-api-{version}"
            if group != metrics_adapter.EXTERNAL_API_SERVICE[0]
            else f"metrics-adapter-external-api-{version}",
            metadata=ApiServiceV1Metadata(name=metrics_adapter.api_service_name(group, version)),
            spec=ApiServiceV1Spec(
                group=group,
                version=version,
                group_priority_minimum=metrics_adapter.GROUP_PRIORITY_MINIMUM,
                version_priority=priority,
                # As the manifest: the adapter serves a self-signed certificate it makes at
                # start (no CA bundle exists before it runs); the API server reaches it over
                # the cluster network only.
                insecure_skip_tls_verify=True,
                service=ApiServiceV1SpecService(
                    name=metrics_adapter.NAME, namespace=namespace, port=metrics_adapter.PORT
                ),
            ),
            depends_on=[deployment],
        )


def _pod_spec(service_account: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "adapter",
        "image": metrics_adapter.image(),
        "command": list(metrics_adapter.COMMAND),
        "port": [{"name": "https", "container_port": metrics_adapter.PORT, "protocol": "TCP"}],
        "resources": metrics_adapter.RESOURCES,
        "readiness_probe": {
            "http_get": {"path": "/healthz", "port": "https", "scheme": "HTTPS"},
            "initial_delay_seconds": 40,
            "period_seconds": 10,
            "timeout_seconds": 5,
        },
        # The image (distroless/static) runs as root to bind 443: every capability dropped but
        # that one, no escalation, nothing written outside its certificate volume.
        "security_context": {
            "allow_privilege_escalation": False,
            "read_only_root_filesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        },
        "volume_mount": [{"name": _CERTS, "mount_path": metrics_adapter.CERT_DIR}],
    }
    return {
        "service_account_name": service_account,
        # No tolerations: the adapter stays on the system pool. On a TPU node it would hold a
        # node billed per chip-hour (the manifest tolerates TPU and GPU taints; ours are others).
        "container": [container],
        "volume": [{"name": _CERTS, "empty_dir": {"medium": "Memory", "size_limit": "1Mi"}}],
    }
