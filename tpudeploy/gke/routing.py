"""Inference-aware routing ([routing] gateway = true): a Gateway, an HTTPRoute to an InferencePool
over the replicas, and the endpoint picker (EPP) that scores them on vLLM's own metrics.

Custom resources are plain manifests (the stack declares them with kubernetes_manifest); the
picker's Deployment, Service, ServiceAccount and Role are provider-shaped dicts that the stack
builds as typed objects (stacks/gke/routing_objects.py). Which of these a real cluster has run:
none yet (docs/scale-out.md, "Routing and scale to zero").
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from tpudeploy import facts
from tpudeploy.config import DeployConfig
from tpudeploy.config.routing_table import PROXY_SUBNET_EXAMPLE
from tpudeploy.gke import identifiers, metrics, picker_interface, pod, scaleplan
from tpudeploy.gke.manifests import labels
from tpudeploy.planner import Finding

# GKE's Gateway classes (cloud.google.com/kubernetes-engine/docs/concepts/gateway-api, "GatewayClass
# capabilities"): gke-l7-rilb is the regional internal Application Load Balancer, reachable from
# the VPC only; gke-l7-regional-external-managed the regional external one.
INTERNAL_CLASS = "gke-l7-rilb"
EXTERNAL_CLASS = "gke-l7-regional-external-managed"
# The Gateway reads a Certificate Manager certificate by this TLS option (GKE "Secure a
# Gateway": networking.gke.io/cert-manager-certs); the key never enters Terraform state.
CERT_OPTION = "networking.gke.io/cert-manager-certs"
HTTPS_PORT = 443
# The EPP's own defaults (gateway-api-inference-extension cmd/epp/runner/options.go): ext_proc
# gRPC, its gRPC health service, its Prometheus metrics.
EPP_GRPC_PORT, EPP_HEALTH_PORT, EPP_METRICS_PORT = 9002, 9003, 9090
# "If you are using the regional or cross-region GatewayClasses, you must enable a proxy-only
# subnet" (cloud.google.com/kubernetes-engine/docs/how-to/configure-gateway-resources): purpose
# REGIONAL_MANAGED_PROXY, one ACTIVE per region and VPC, at least 64 addresses
# (cloud.google.com/load-balancing/docs/proxy-only-subnets).
PROXY_SUBNET_PURPOSE = "REGIONAL_MANAGED_PROXY"


def proxy_subnet_name(cfg: DeployConfig) -> str:
    return f"{cfg.name}-proxy-only"


# Fail open: the picker is a routing optimisation, not a guard. Each replica's front door checks
# the key on every path whatever picks it, so failing open loses the scoring and never the
# authentication; failing closed would make one small picker pod an outage for every replica.
FAILURE_MODE = "FailOpen"
# Prefix affinity: agent turns resend a long common system prompt and tool definitions, so the
# prefix scorer weighs most. The EPP hashes prompts in blocks of the engine's KV block size (64
# tokens at max-model-len 32768, build log), which it reads from vllm:cache_config_info.
SCORER_WEIGHTS = {"queue-scorer": 2, "kv-cache-utilization-scorer": 2, "prefix-cache-scorer": 3}
# Requests sized for one picker over a pool of a few replicas (the upstream chart asks 8 CPU /
# 8 GiB for large pools); not measured here.
EPP_RESOURCES = {
    "requests": {"cpu": "250m", "memory": "256Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}
# The slowest stream the sweep measured (per-stream tok/s, 8K context, 64 clients): a request
# of max_model_len tokens at that pace bounds how long the load balancer must keep it open.
_SLOWEST_STREAM_TOK_S = min(facts.PER_STREAM_TOK_S.values())


def gateway_class(cfg: DeployConfig) -> str:
    """Internal unless the user listed the ranges that may reach it."""
    return EXTERNAL_CLASS if cfg.network.allowed_cidrs else INTERNAL_CLASS


def pool_name(cfg: DeployConfig) -> str:
    return f"{cfg.name}-pool"


def epp_name(cfg: DeployConfig) -> str:
    return f"{cfg.name}-epp"


def backend_timeout_s(cfg: DeployConfig) -> int:
    """The load balancer's per-request timeout (default 30 s, which cuts a long stream)."""
    return math.ceil(cfg.vllm.max_model_len / _SLOWEST_STREAM_TOK_S)


def _meta(cfg: DeployConfig, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": identifiers.namespace(cfg)}


def gateway(cfg: DeployConfig) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": _meta(cfg, cfg.name),
        "spec": {
            "gatewayClassName": gateway_class(cfg),
            "listeners": [
                {
                    "name": "https",
                    "protocol": "HTTPS",
                    "port": HTTPS_PORT,
                    "tls": {"mode": "Terminate", "options": {CERT_OPTION: cfg.routing.certificate}},
                    "allowedRoutes": {"namespaces": {"from": "Same"}},
                }
            ],
        },
    }


def http_route(cfg: DeployConfig) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": _meta(cfg, cfg.name),
        "spec": {
            "parentRefs": [{"name": cfg.name, "sectionName": "https"}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {
                            "group": "inference.networking.k8s.io",
                            "kind": "InferencePool",
                            "name": pool_name(cfg),
                        }
                    ],
                }
            ],
        },
    }


def inference_pool(cfg: DeployConfig) -> dict[str, Any]:
    return {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": _meta(cfg, pool_name(cfg)),
        "spec": {
            "selector": {"matchLabels": labels(cfg)},
            "targetPorts": [{"number": pod.POOL_PORT}],
            # No appProtocol: it first appears in the inference extension's v1.4.0 API, GKE
            # installs the CRD and names no release (tools/rehearsal/fakes/k8s_rules.py,
            # INFERENCE_POOL_GA_SPEC), and its default, "http", is what the pool port speaks.
            "endpointPickerRef": {
                "name": epp_name(cfg),
                "port": {"number": EPP_GRPC_PORT},
                "failureMode": FAILURE_MODE,
            },
        },
    }


def _pool_target(cfg: DeployConfig) -> dict[str, str]:
    return {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool_name(cfg)}


def health_check_policy(cfg: DeployConfig) -> dict[str, Any]:
    """The load balancer's own check: /health through the front door (200 only when vLLM's
    engine is alive)."""
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "HealthCheckPolicy",
        "metadata": _meta(cfg, pool_name(cfg)),
        "spec": {
            "default": {
                "config": {
                    "type": "HTTP",
                    "httpHealthCheck": {"requestPath": "/health", "port": pod.POOL_PORT},
                }
            },
            "targetRef": _pool_target(cfg),
        },
    }


def backend_policy(cfg: DeployConfig) -> dict[str, Any]:
    """Long streams kept open; draining inside the pod's grace, itself inside spot's notice."""
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GCPBackendPolicy",
        "metadata": _meta(cfg, pool_name(cfg)),
        "spec": {
            "default": {
                "timeoutSec": backend_timeout_s(cfg),
                "connectionDraining": {"drainingTimeoutSec": pod.termination_grace_s()},
            },
            "targetRef": _pool_target(cfg),
        },
    }


def custom_resources(cfg: DeployConfig) -> dict[str, dict[str, Any]]:
    """By construct id: what stacks/gke/routing_objects.py declares with kubernetes_manifest."""
    return {
        "gateway": gateway(cfg),
        "http-route": http_route(cfg),
        "inference-pool": inference_pool(cfg),
        "pool-health-check": health_check_policy(cfg),
        "pool-backend-policy": backend_policy(cfg),
    }


# The picker's plugins beyond the scorers: what picks, what profiles, what watches saturation, and
# the data layer that reads each replica's /metrics (tpudeploy/gke/picker_interface.py: what the
# pinned release accepts).
_PICKER = "max-score-picker"
_RANDOM_PICKER = "random-picker"
_PROFILE_HANDLER = "single-profile-handler"
_DETECTOR = "utilization-detector"
_METRICS_SOURCE = "metrics-data-source"
_METRICS_EXTRACTOR = "core-metrics-extractor"
_ENGINE = "vllm"


def picker_config(cfg: DeployConfig) -> dict[str, Any]:
    """The EPP's EndpointPickerConfig: scorers on queue, KV use and prefix affinity; the
    saturation thresholds from the replica planner for [load] (never typed here); every vLLM
    metric it reads named from tpudeploy.gke.metrics (checked against the pinned vLLM's source)."""
    targets = scaleplan.load_targets(cfg)
    engine = {
        "name": _ENGINE,
        "queuedRequestsSpec": metrics.WAITING_METRIC,
        "runningRequestsSpec": metrics.RUNNING_METRIC,
        "kvUsageSpec": metrics.KV_CACHE_METRIC,
        # No LoRA adapters are served: an empty spec turns that reading off.
        "loraSpec": "",
        "cacheInfoSpec": metrics.CACHE_INFO_METRIC,
    }
    # "random": no scorer and a random pick over the same pool, the same load balancer hop and
    # the same saturation check, so a benchmark of each isolates what the scoring buys.
    scored = cfg.routing.scoring == "inference-aware"
    picker = _PICKER if scored else _RANDOM_PICKER
    plugins: list[dict[str, Any]] = [{"type": name} for name in SCORER_WEIGHTS] if scored else []
    plugins += [
        {"type": picker},
        {"type": _PROFILE_HANDLER},
        {
            "type": _DETECTOR,
            "parameters": {
                "queueDepthThreshold": targets.waiting_per_replica,
                "kvCacheUtilThreshold": targets.kv_cache_usage,
            },
        },
        # vLLM's /metrics leaves the pod only through the front door's plain metrics listener.
        {"type": _METRICS_SOURCE, "parameters": {"scheme": "http", "path": "/metrics"}},
        {
            "type": _METRICS_EXTRACTOR,
            "parameters": {"defaultEngine": _ENGINE, "engineConfigs": [engine]},
        },
    ]
    return {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [
                    *(
                        {"pluginRef": n, "weight": w}
                        for n, w in (SCORER_WEIGHTS.items() if scored else ())
                    ),
                    {"pluginRef": picker},
                ],
            }
        ],
        "saturationDetector": {"pluginRef": _DETECTOR},
        "dataLayer": {
            "sources": [
                {"pluginRef": _METRICS_SOURCE, "extractors": [{"pluginRef": _METRICS_EXTRACTOR}]}
            ]
        },
    }


# How the picker is replaced, as upstream's chart does it (kubernetes-sigs/gateway-api-inference-
# extension v1.5.0, config/charts/epplib/templates/_deployment.yaml, which the inferencepool
# chart renders): "a single active replica" with `type: Recreate` (its prefix-cache scorer's state
# is per replica, and a rolling update would run two pickers scoring apart), and
# terminationGracePeriodSeconds 130, "conservatively, this timeout should mirror the longest
# grace period of the pods within the pool". Ours are 15 s (pod.termination_grace_s); 130 s is
# kept as upstream's, which is longer. With FailOpen, the seconds between the old picker's exit
# and the new one's readiness are balanced without scoring, never refused.
PICKER_REPLICAS = 1
PICKER_STRATEGY = "Recreate"
PICKER_GRACE_S = 130
PICKER_CONFIG_DIR = "/etc/epp"
PICKER_CONFIG_FILE = "epp.yaml"
# The picker reads its config file once, at start ("the config is not reconciled upon, and is
# only read on startup", the v1.5.0 config guide), and a ConfigMap's new content rolls no pod. The
# config's digest on the pod template makes a changed config a new template, which the
# Deployment rolls out: without it a changed [load] or [routing] policy waits for a restart.
PICKER_CONFIG_DIGEST_ANNOTATION = "tpudeploy/picker-config-sha256"


def picker_config_text(cfg: DeployConfig) -> str:
    """The ConfigMap's file: JSON, which is YAML, as the picker reads it."""
    return json.dumps(picker_config(cfg), indent=1)


def picker_pod_annotations(cfg: DeployConfig) -> dict[str, str]:
    digest = hashlib.sha256(picker_config_text(cfg).encode()).hexdigest()
    return {PICKER_CONFIG_DIGEST_ANNOTATION: digest}


def picker_args(cfg: DeployConfig) -> list[str]:
    """The EPP's flags: the pool, the config and the ports. The metric names are in the config:
    v1.5.0 refuses to start with its old metric flags set."""
    return [
        f"--pool-name={pool_name(cfg)}",
        f"--pool-namespace={identifiers.namespace(cfg)}",
        f"--config-file={PICKER_CONFIG_DIR}/{PICKER_CONFIG_FILE}",
        f"--grpc-port={EPP_GRPC_PORT}",
        f"--grpc-health-port={EPP_HEALTH_PORT}",
        f"--metrics-port={EPP_METRICS_PORT}",
        # Deprecated but the only way v1.5.0 has to scrape another port than the pool's
        # (picker_interface.DEPRECATED_FLAGS): vLLM's /metrics is behind the front door's
        # metrics listener, not the pool port.
        f"--model-server-metrics-port={pod.METRICS_PORT}",
        # v1.5.0 serves pprof on its metrics port unless told not to (pkg/epp/server/options.go:
        # EnablePprof defaults to true): heap and goroutine dumps to whoever reaches that port.
        "--enable-pprof=false",
    ]


def _image_tag(image: str) -> str:
    """The tag of repo[:tag][@digest], or "" without one."""
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[1] if ":" in name else ""


def findings(cfg: DeployConfig) -> list[Finding]:
    """What refuses a deploy of routing: each names the key, the value, why and the fix."""
    r = cfg.routing
    if not r.gateway:
        return []
    out = []
    if "@sha256:" not in r.picker_image:
        out.append(Finding("error", "routing.picker_image", r.picker_image, "not pinned by "
                           "digest: a tag can move to another build between two deploys; append "
                           "@sha256:<manifest digest>"))  # fmt: skip
    if _image_tag(r.picker_image) != picker_interface.RELEASE:
        out.append(Finding("error", "routing.picker_image", r.picker_image, "the picker's flags "
                           "and config are checked against the endpoint picker "
                           f"{picker_interface.RELEASE}'s source, and a release reads them "
                           "differently (v1.5.0 refuses four flags v1.4 took, and stops): use "
                           f"the {picker_interface.RELEASE} image, tag and digest, or read the "
                           "new release into tpudeploy/gke/picker_interface.py"))  # fmt: skip
    if not r.certificate:
        out.append(Finding("error", "routing.certificate", r.certificate, "the Gateway "
                           "terminates TLS from clients with a Certificate Manager certificate; "
                           "create one in the deployment's region and name it here"))  # fmt: skip
    if cfg.network.allowed_cidrs:
        out.append(Finding("error", "network.allowed_cidrs", list(cfg.network.allowed_cidrs),
                           "an external Gateway must admit these ranges only, and GKE's "
                           "GatewayClass capabilities table lists no Cloud Armor policy for "
                           "gke-l7-regional-external-managed; no other way to hold it to them is "
                           "built: leave the list empty for the internal Gateway"))  # fmt: skip
    if bool(r.proxy_subnet_cidr) == r.proxy_subnet_exists:
        out.append(Finding("error", "routing.proxy_subnet_cidr", r.proxy_subnet_cidr, "a "
                           "regional Gateway's proxies run in the region's proxy-only subnet, "
                           "and a VPC has at most one active per region: set this to a free "
                           f'/26-or-larger range (e.g. "{PROXY_SUBNET_EXAMPLE}") for this stack to '
                           "declare, or routing.proxy_subnet_exists = true if the VPC has one "
                           "in this region, not both"))  # fmt: skip
    if r.proxy_subnet_exists and not r.proxy_subnet_cidr:
        out.append(Finding("warning", "routing.proxy_subnet_exists", True, "the pool port "
                           f"({pod.POOL_PORT}, plain HTTP behind the API key) admits any source "
                           "in the VPC: its NetworkPolicy can narrow it to the Gateway's proxies "
                           "only by the proxy-only subnet's range, which this stack does not "
                           "declare and so does not know"))  # fmt: skip
    if r.proxy_subnet_cidr and cfg.network.network.startswith("projects/"):
        out.append(Finding("error", "routing.proxy_subnet_cidr", r.proxy_subnet_cidr, "a shared "
                           "VPC's subnets belong to its host project, which this stack does not "
                           "manage: create the proxy-only subnet there and set "
                           "routing.proxy_subnet_exists = true instead"))  # fmt: skip
    return out
