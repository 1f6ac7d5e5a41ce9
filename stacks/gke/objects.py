"""Kubernetes objects that more than one part of the serving stack declares the same way: a
role bound to one service account, and a Deployment whose pods carry its selector's labels (the
metrics adapter, stacks/gke/adapter.py; the endpoint picker, stacks/gke/routing_objects.py)."""

from __future__ import annotations

from typing import Any

from cdktf_cdktf_provider_kubernetes.cluster_role_binding_v1 import (
    ClusterRoleBindingV1,
    ClusterRoleBindingV1Metadata,
    ClusterRoleBindingV1RoleRef,
    ClusterRoleBindingV1Subject,
)
from cdktf_cdktf_provider_kubernetes.deployment_v1 import (
    DeploymentV1,
    DeploymentV1Metadata,
    DeploymentV1Spec,
)
from cdktf_cdktf_provider_kubernetes.role_binding_v1 import (
    RoleBindingV1,
    RoleBindingV1Metadata,
    RoleBindingV1RoleRef,
    RoleBindingV1Subject,
)
from constructs import Construct

from stacks.gke.typed import typed

RBAC = "rbac.authorization.k8s.io"


def bind_account(
    scope: Construct,
    construct_id: str,
    *,
    metadata: dict[str, Any],
    role: tuple[str, str],
    account: tuple[str, str],
) -> None:
    """Bind `role` (kind, name) to the service account `account` (name, namespace): a
    RoleBinding when `metadata` names a namespace, a ClusterRoleBinding when it does not."""
    role_ref = {"api_group": RBAC, "kind": role[0], "name": role[1]}
    subject = {"kind": "ServiceAccount", "name": account[0], "namespace": account[1]}
    kinds: tuple[Any, Any, Any, Any] = (
        (RoleBindingV1, RoleBindingV1Metadata, RoleBindingV1RoleRef, RoleBindingV1Subject)
        if "namespace" in metadata
        else (
            ClusterRoleBindingV1,
            ClusterRoleBindingV1Metadata,
            ClusterRoleBindingV1RoleRef,
            ClusterRoleBindingV1Subject,
        )
    )
    binding, meta_cls, ref_cls, subject_cls = kinds
    binding(
        scope,
        construct_id,
        metadata=typed(meta_cls, metadata),
        role_ref=typed(ref_cls, role_ref),
        subject=[typed(subject_cls, subject)],
    )


def declare_deployment(
    scope: Construct,
    construct_id: str,
    *,
    metadata: dict[str, Any],
    labels: dict[str, str],
    pod: dict[str, Any],
    replicas: int = 1,
    pod_annotations: dict[str, str] | None = None,
    strategy: str | None = None,
) -> DeploymentV1:
    """A Deployment of `replicas` pods labelled `labels`, the labels its selector matches,
    replaced by `strategy` ("Recreate"; None leaves Kubernetes' default, RollingUpdate)."""
    template_metadata: dict[str, Any] = {"labels": labels}
    if pod_annotations:
        template_metadata["annotations"] = pod_annotations
    return DeploymentV1(
        scope,
        construct_id,
        metadata=typed(DeploymentV1Metadata, metadata),
        spec=typed(
            DeploymentV1Spec,
            {
                "replicas": str(replicas),
                **({"strategy": {"type": strategy}} if strategy else {}),
                "selector": {"match_labels": labels},
                "template": {"metadata": template_metadata, "spec": pod},
            },
        ),
    )
