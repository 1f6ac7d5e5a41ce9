"""The wake path at `[gke] min_replicas = 0` (the serving stack declares it then, and only then).

Creates: a ConfigMap with the responder (tpudeploy/gke/wake.py, verbatim); the Deployment
`<name>-wake`, one pod on the system pool: the replicas' own front door (the same nginx config,
init script and key loop, so the same certificate, keys and limits) in front of the responder
where vLLM would be, its python3 steps on the small pinned image (never the vLLM image), and no
PodDisruptionBudget (tpudeploy/gke/zero.py says why of both); a Role reading this deployment's
status only, bound to the pod's account; its NetworkPolicy (the replicas' rules) and its
PodMonitoring (the HPA's External gauge). What each value is and why: tpudeploy/gke/zero.py.
"""

from __future__ import annotations

import copy
from typing import Any

from cdktf import TerraformStack
from cdktf_cdktf_provider_kubernetes.config_map_v1 import ConfigMapV1, ConfigMapV1Metadata
from cdktf_cdktf_provider_kubernetes.deployment_v1 import (
    DeploymentV1,
    DeploymentV1Metadata,
    DeploymentV1Spec,
)
from cdktf_cdktf_provider_kubernetes.manifest import Manifest
from cdktf_cdktf_provider_kubernetes.namespace_v1 import NamespaceV1
from cdktf_cdktf_provider_kubernetes.network_policy_v1 import (
    NetworkPolicyV1,
    NetworkPolicyV1Metadata,
    NetworkPolicyV1Spec,
)
from cdktf_cdktf_provider_kubernetes.role_v1 import RoleV1, RoleV1Metadata, RoleV1Rule

from stacks.common import terraform_literal
from stacks.gke.objects import bind_account
from stacks.gke.typed import typed
from tpudeploy import pins
from tpudeploy.config import DeployConfig
from tpudeploy.gke import cache, identifiers, pod, zero
from tpudeploy.gke.manifests import network_policy_spec

_WAKE_SCRIPTS, _TOKEN, _GATE = "wake-scripts", "wake-token", "frontdoor-gate"
# The front door's containers and volumes the wake pod keeps from a replica's pod: its secrets
# (the API keys and the TLS bundle; never the Hugging Face token), its memory volumes, its
# scripts and the gate nginx waits for.
_KEPT_CONTAINERS = ("frontdoor", pod.KEYS_CONTAINER)
_KEPT_VOLUMES = ("frontdoor-secrets", "frontdoor", "scripts", "tmp", _GATE)
# The projected token's lifetime: the kubelet renews it at 80% (kubernetes.io, "Service account
# token volume projection"); an hour is the API's usual expirationSeconds.
_TOKEN_S = 3600


def wake_pod_spec(cfg: DeployConfig, replica_spec: dict[str, Any]) -> dict[str, Any]:
    """A replica's pod spec (ServingStack._pod_spec) less vLLM, its caches, its secrets and its
    TPU node, with the responder where vLLM was: it runs on the system pool."""
    spec = copy.deepcopy(replica_spec)
    locked = spec["init_container"][-1]["security_context"]
    spec["init_container"] = [c for c in spec["init_container"] if c["name"] == "frontdoor-prep"]
    responder: dict[str, Any] = {
        "name": "wake",
        # python3 only: the slim image, pinned by digest (why: tpudeploy/gke/zero.py).
        "image": pins.WAKE_IMAGE,
        "command": zero.wake_command(cfg, cache.GATE_FILE),
        "volume_mount": [
            {"name": _WAKE_SCRIPTS, "mount_path": zero.WAKE_DIR, "read_only": True},
            {"name": _GATE, "mount_path": cache.GATE_DIR},
            # Its own token, in this container only: the front door's get none.
            {
                "name": _TOKEN,
                "mount_path": "/var/run/secrets/kubernetes.io/serviceaccount",
                "read_only": True,
            },
        ],
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "250m", "memory": "128Mi"},
        },
        "security_context": locked,
    }
    kept = [c for c in spec["container"] if c["name"] in _KEPT_CONTAINERS]
    # The replicas run the front door's prep step and key loop on the vLLM image they pull
    # anyway; here they take the responder's small image instead (tpudeploy/gke/zero.py).
    for container in [*spec["init_container"], *kept]:
        if container["image"] == cfg.vllm.image:
            container["image"] = pins.WAKE_IMAGE
    spec["container"] = [responder, *kept]
    spec["volume"] = [
        *(v for v in spec["volume"] if v["name"] in _KEPT_VOLUMES),
        {
            "name": _WAKE_SCRIPTS,
            "config_map": {"name": zero.wake_name(cfg), "default_mode": "0555"},
        },
        {
            "name": _TOKEN,
            "projected": {
                "sources": [
                    {
                        "service_account_token": {
                            "path": "token",
                            "expiration_seconds": _TOKEN_S,
                        }
                    },
                    {
                        "config_map": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                ]
            },
        },
    ]
    # No chip: the system pool takes it (no TPU selector, no TPU toleration).
    spec.pop("node_selector", None)
    spec.pop("toleration", None)
    return spec


def declare_wake(
    stack: TerraformStack,
    cfg: DeployConfig,
    *,
    ns: NamespaceV1,
    replica_spec: dict[str, Any],
    depends_on: list[Any],
) -> None:
    """The wake path's objects (module docstring); at min_replicas 0 only."""
    namespace = identifiers.namespace(cfg)
    meta: dict[str, Any] = {"namespace": ns.metadata.name, "labels": zero.wake_labels(cfg)}
    ConfigMapV1(
        stack,
        "wake-scripts",
        metadata=ConfigMapV1Metadata(name=zero.wake_name(cfg), **meta),
        data={k: terraform_literal(v) for k, v in zero.wake_scripts().items()},
    )
    RoleV1(
        stack,
        "wake-role",
        metadata=RoleV1Metadata(name=zero.wake_name(cfg), **meta),
        rule=[typed(RoleV1Rule, r) for r in zero.wake_role_rules(cfg)],
    )
    bind_account(
        stack,
        "wake-role-binding",
        metadata={"name": zero.wake_name(cfg), "namespace": namespace},
        role=("Role", zero.wake_name(cfg)),
        account=(identifiers.SERVICE_ACCOUNT, namespace),
    )
    DeploymentV1(
        stack,
        "wake",
        metadata=DeploymentV1Metadata(name=zero.wake_name(cfg), **meta),
        wait_for_rollout=False,
        spec=typed(
            DeploymentV1Spec,
            {
                "replicas": "1",
                "selector": {"match_labels": zero.wake_labels(cfg)},
                "template": {
                    "metadata": {
                        "labels": {**zero.wake_labels(cfg), **zero.serves_labels(cfg)},
                        "annotations": pod.template_annotations(cfg),
                    },
                    "spec": wake_pod_spec(cfg, replica_spec),
                },
            },
        ),
        depends_on=depends_on,
    )
    policy = network_policy_spec(cfg)
    policy["pod_selector"] = {"match_labels": zero.wake_labels(cfg)}
    NetworkPolicyV1(
        stack,
        "wake-network-policy",
        metadata=NetworkPolicyV1Metadata(name=zero.wake_name(cfg), **meta),
        spec=typed(NetworkPolicyV1Spec, policy),
    )
    Manifest(
        stack,
        "wake-pod-monitoring",
        manifest=zero.wake_pod_monitoring(cfg, port=pod.METRICS_PORT),
        depends_on=[ns],
    )
