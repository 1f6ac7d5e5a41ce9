"""One replica's pod: the TPU VM's serve line and front door, the numbers its probes and drain
obey, and the files its init container runs. Plain data; stacks/gke/serving.py declares it."""

from __future__ import annotations

import math
import shlex

from tpudeploy import facts, render
from tpudeploy.config import DeployConfig
from tpudeploy.gke import replicaplan

# The serving container's name: the probes, `make wait` and `make bench` (its exec) find it by it.
VLLM_CONTAINER = "vllm"
# Paths inside the pod. The secrets volume is the Secret Manager add-on's CSI volume (files in
# memory, never a Kubernetes Secret); the front door's files live on a memory-backed emptyDir.
SECRETS_DIR = "/run/tpudeploy-secrets"
# The GKE Secret Manager add-on's CSI driver (cloud.google.com/secret-manager/docs/
# secret-manager-managed-csi-component: provider "gke", driver secrets-store-gke.csi.k8s.io).
SECRETS_CSI_DRIVER = "secrets-store-gke.csi.k8s.io"
HF_TOKEN_FILE = "hf_token"  # noqa: S105 - a file name; the token is in Secret Manager
# Each [access] client's key file: "api_key.<client>" (a client name is [a-z][a-z0-9-]*).
API_KEY_FILE = "api_key"
# The front door's certificate then key (PEM), the same for every replica (tpudeploy/tlscert.py).
TLS_BUNDLE_FILE = "tls_bundle"
FRONTDOOR_DIR = "/etc/tpudeploy-proxy"
SCRIPTS_DIR = "/opt/tpudeploy"
PREP_SCRIPT = "frontdoor.sh"
NGINX_CONF = "nginx.conf"
# The front door's usage counter (templates/frontdoor_usage.js): nginx reads it from the ConfigMap,
# mounted read-only in its container too.
USAGE_JS = render.PROXY_USAGE_JS
# tpudeploy/node/keymap.py and the loop that re-renders the key map (templates/pod_keys.sh.j2).
KEYMAP_PY = "keymap.py"
KEYS_SCRIPT = "keys.sh"
KEYS_CONTAINER = "frontdoor-keys"
# The GKE Secret Manager add-on's rotation: how often it re-reads every mounted secret and
# rewrites the pod's files (google_container_cluster secret_manager_config.rotation_config,
# provider 6.50: "The interval between two consecutive rotations. Default rotation interval is 2
# minutes", the Container API's SecretManagerConfig.RotationConfig reference). The bounds of the
# interval are not in the stored corpus (cloud.google.com/secret-manager/docs/
# secret-manager-managed-csi-component was not found with them): 30 s rests on issue 37's
# reading (a rotated key reaches the front door within a minute); GKE refusing it fails the
# cluster's apply, loudly.
SECRET_ROTATION_INTERVAL_S = 30
# How a rotated, added or expired key reaches a running pod (issue 37: within a minute): the
# Secret Manager add-on re-reads every mounted secret each rotation interval and rewrites the
# files (SECRET_ROTATION_INTERVAL_S); the key loop re-renders the map every
# KEY_LOOP_S; the front door's watcher reloads nginx (`nginx -s reload`: new workers on the new
# map, the old ones finish their requests) within KEY_RELOAD_CHECK_S of a change.
KEY_LOOP_S = 10
KEY_RELOAD_CHECK_S = 5
# The build log's -v ~/.cache/vllm:/root/.cache/vllm: the XLA compile cache, node-local here.
CACHE_DIR = "/root/.cache/vllm"
# The front door's plain-HTTP listener for /metrics only (Managed Prometheus scrapes the pod IP;
# vLLM's own port stays on loopback).
METRICS_PORT = 9400
# With [routing] gateway: the port the InferencePool sends requests to. InferencePool v1 speaks
# only "http" or "kubernetes.io/h2c" to its targets (appProtocol enum of the v1.6.0 CRD; "http"
# when unset, as before v1.4.0), so it is a plain-HTTP listener of the front door, behind the
# same key check as the TLS port.
POOL_PORT = 8080
# The build log's -v /dev/shm:/dev/shm --shm-size 10gb and HF_HOME=/dev/shm: memory, per pod.
SHM_DIR = "/dev/shm"  # noqa: S108 - the pod's own memory volume, not a shared temp dir
SHM_SIZE = "10Gi"
# nginx's pid and temp files: the pod's own memory volume (the root filesystem is read-only).
TMP_DIR = "/tmp"  # noqa: S108 - an emptyDir of the front door's container alone
# What lands there: the pid file, the relays' three sockets and nginx's temp files. No request
# body is buffered there any more (/v1/ streams with proxy_request_buffering off; /health and
# the metrics port take no body; the other paths answer without reading one); what is left is
# a /metrics or /health response beyond nginx's in-memory proxy buffers (vLLM's /metrics is tens
# of kB). Without a sizeLimit a memory-backed emptyDir is bounded only by the sum of the pod's
# memory limits (core/v1 EmptyDirVolumeSource.sizeLimit), 40Gi and more here; past this the
# kubelet evicts the pod instead.
TMP_SIZE = "32Mi"
# The drain, on a spot preemption (tests/gke/test_gke_drain.py runs it on the real nginx): GKE
# gives the pod the first 15 s of spot's 30 s notice (facts.GKE_SPOT_POD_SHUTDOWN_S; a longer
# terminationGracePeriodSeconds has no effect there), so the grace is those 15 s, and a rollout
# or scale-down follows the same timeline. First the load balancer drops the terminating pod
# (ENDPOINT_REMOVAL_S, not measured here), then nginx quits gracefully: it closes its port and
# idle keep-alive connections and lets in-flight requests finish for the drain window. When the
# preStop ends the kubelet sends SIGTERM, nginx's fast shutdown closes what still runs (the
# client sees a chunked response end without its last chunk, never a complete-looking 200), and
# STOP_MARGIN_S later, the kubelet's minimum after a preStop hook, SIGKILL.
ENDPOINT_REMOVAL_S = 5
# The kubelet gives a container at least 2 s between the end of its preStop hook and SIGKILL
# (minimumGracePeriodInSeconds in kubelet's kuberuntime killContainer; kubernetes.io/docs/
# concepts/workloads/pods/pod-lifecycle, "Termination of Pods": a hook still running when the
# grace expires gets a one-off 2 s extension): the hooks end this long before the grace does,
# so SIGTERM and nginx's fast shutdown land inside GKE's 15 s, not in the system Pods' share.
STOP_MARGIN_S = 2


def termination_grace_s() -> int:
    return facts.GKE_SPOT_POD_SHUTDOWN_S


def drain_window_s() -> int:
    """How long in-flight requests may still finish after nginx stopped taking new ones."""
    return termination_grace_s() - ENDPOINT_REMOVAL_S - STOP_MARGIN_S


def nginx_signal(signal: str) -> list[str]:
    """`nginx -s` finds the master by the pid file of the config it loads: without the pod's -p
    and -c it reads the image's /etc/nginx/nginx.conf and a pid file the running front door never
    wrote (its own is nginx.pid under TMP_DIR, the root filesystem being read-only)."""
    return [*nginx_command(), "-s", signal]


def frontdoor_pre_stop() -> list[str]:
    """nginx: wait until the endpoint is gone, quit gracefully (finishes in-flight), and hold the
    hook open for the drain window (nginx exiting ends the container sooner)."""
    quit_line = shlex.join(nginx_signal("quit"))
    return ["/bin/sh", "-c", f"sleep {ENDPOINT_REMOVAL_S}; {quit_line}; sleep {drain_window_s()}"]


def vllm_pre_stop() -> list[str]:
    """vLLM keeps serving what the front door still forwards until the front door's hook ends."""
    return ["sleep", str(ENDPOINT_REMOVAL_S + drain_window_s())]


def serve_command(cfg: DeployConfig) -> list[str]:
    """The TPU VM's `vllm serve` line, from the same function (tpudeploy.render)."""
    return render.vllm_serve_args(cfg.vllm)


def vllm_env(cfg: DeployConfig) -> dict[str, str]:
    """Non-secret environment: the VM's container environment, HF_HOME in /dev/shm as the build
    log's, and the token as a file path (huggingface_hub reads HF_TOKEN_PATH), never a value."""
    return {
        **cfg.vllm.container_env(),
        "HF_HOME": SHM_DIR,
        "HF_TOKEN_PATH": f"{SECRETS_DIR}/{HF_TOKEN_FILE}",
    }


def health_exec(cfg: DeployConfig) -> list[str]:
    """vLLM's /health on the pod's loopback (vLLM never listens on the pod IP, so the kubelet's
    own HTTP probe cannot reach it): python3 is in the serving image, curl may not be."""
    url = f"http://{render.VLLM_HOST}:{cfg.vllm.port}/health"
    return [
        "python3",
        "-c",
        f"import sys, urllib.request; sys.exit(urllib.request.urlopen({url!r}, timeout=5)"
        ".status != 200)",
    ]


def startup_probe() -> dict[str, int]:
    return {
        "period_seconds": replicaplan.PROBE_PERIOD_S,
        "failure_threshold": replicaplan.startup_failure_threshold(),
        "timeout_seconds": 5,
    }


# Each container reads only its own secrets (issue 36): one SecretProviderClass and one CSI
# volume per reader, as the add-on allows any number of them per pod. vLLM needs the Hugging
# Face token only; the front door every [access] client's key (whose key map it writes) and the
# certificate with its key. Each is mounted at SECRETS_DIR in its own container.
SECRET_READERS = ("vllm", "frontdoor")


def client_key_file(client: str) -> str:
    return f"{API_KEY_FILE}.{client}"


def secret_files(cfg: DeployConfig, reader: str) -> tuple[tuple[str, str], ...]:
    """(secret id, file name) of what `reader` (one of SECRET_READERS) may read."""
    if reader == "vllm":
        return ((cfg.hf_token_secret_id, HF_TOKEN_FILE),)
    keys = tuple((sid, client_key_file(c)) for c, sid in cfg.client_key_secret_ids.items())
    return {"frontdoor": (*keys, (cfg.tls_secret_id, TLS_BUNDLE_FILE))}[reader]


def secret_provider_class_name(cfg: DeployConfig, reader: str) -> str:
    return f"{cfg.name}-{reader}-secrets"


def secret_provider_parameters(cfg: DeployConfig, project: str, reader: str) -> str:
    """The add-on's SecretProviderClass `secrets` parameter: each latest version to a file."""
    lines = []
    for secret, path in secret_files(cfg, reader):
        lines += [
            f'- resourceName: "projects/{project}/secrets/{secret}/versions/latest"',
            f'  path: "{path}"',
        ]
    return "\n".join(lines) + "\n"


# The pod template names the [access] clients: adding or removing one changes the template, so
# the apply rolls the replicas (surge first, each old pod drained) onto the new client list. A
# running pod cannot drop a removed client on its own: its secret is deleted, and the add-on's
# rotation cannot refresh a file whose secret is gone.
CLIENTS_ANNOTATION = "tpudeploy/access-clients"


def template_annotations(cfg: DeployConfig) -> dict[str, str]:
    return {CLIENTS_ANNOTATION: ",".join(cfg.client_key_secret_ids)}


def key_propagation_worst_s() -> int:
    """The longest a new, rotated or expired key takes to reach a running pod's nginx."""
    return SECRET_ROTATION_INTERVAL_S + KEY_LOOP_S + KEY_RELOAD_CHECK_S


def _client_files(cfg: DeployConfig) -> list[tuple[str, str]]:
    return [(c, f"{SECRETS_DIR}/{client_key_file(c)}") for c in cfg.client_key_secret_ids]


def render_keys_loop(cfg: DeployConfig) -> str:
    return (
        render._environment()
        .get_template("pod_keys.sh.j2")
        .render(
            deployment=cfg.name,
            client_files=_client_files(cfg),
            keymap_py=f"{SCRIPTS_DIR}/{KEYMAP_PY}",
            frontdoor_dir=FRONTDOOR_DIR,
            period=KEY_LOOP_S,
        )
    )


def render_frontdoor_prep(cfg: DeployConfig) -> str:
    return (
        render._environment()
        .get_template("pod_frontdoor.sh.j2")
        .render(
            deployment=cfg.name,
            client_files=_client_files(cfg),
            keymap_py=f"{SCRIPTS_DIR}/{KEYMAP_PY}",
            tls_bundle_file=f"{SECRETS_DIR}/{TLS_BUNDLE_FILE}",
            frontdoor_dir=FRONTDOOR_DIR,
            nginx_conf=f"{SCRIPTS_DIR}/{NGINX_CONF}",
        )
    )


def pool_connections_per_address(cfg: DeployConfig) -> int:
    """What one load balancer proxy may hold open to one replica's pool port: twice the streams
    the planner sends a replica (running plus waiting, for [load]), never below the TLS port's
    allowance, and at most an eighth of the worker (four worker connections per client, so two
    proxies at their full share still leave half of it)."""
    from tpudeploy.gke.scaleplan import load_targets

    t = load_targets(cfg)
    wanted = 2 * (t.running_per_replica + t.waiting_per_replica)
    ceiling = render.PROXY_WORKER_CONNECTIONS // 8
    return min(max(render.PROXY_CONNECTIONS_PER_ADDRESS, wanted), ceiling)


def pool_port(cfg: DeployConfig) -> int | None:
    """The InferencePool's port when routing is on; no such listener otherwise."""
    return POOL_PORT if cfg.routing.gateway else None


def scripts(cfg: DeployConfig) -> dict[str, str]:
    """The ConfigMap's files: the same nginx config the VM's proxy runs, the prep script and the
    usage counter nginx loads."""
    return {
        NGINX_CONF: render.render_proxy_config(
            cfg,
            metrics_port=METRICS_PORT,
            pool_port=pool_port(cfg),
            pool_connections_per_address=pool_connections_per_address(cfg),
            usage_js=f"{SCRIPTS_DIR}/{USAGE_JS}",
        ),
        PREP_SCRIPT: render_frontdoor_prep(cfg),
        USAGE_JS: render.usage_js_source(),
        KEYMAP_PY: render.keymap_source(),
        KEYS_SCRIPT: render_keys_loop(cfg),
    }


def keys_command() -> list[str]:
    return ["/bin/sh", shlex.quote(f"{SCRIPTS_DIR}/{KEYS_SCRIPT}")]


# The front door's key-map watcher, started beside nginx in its container (the nginx image has
# sh and cksum, no python): when the key loop changed the map, `nginx -s reload`. A reload that
# fails (nginx not started yet) is tried again at the next check. $1 the map, $2 the period,
# then the reload command up to "--", then the command exec'd (nginx).
_KEY_RELOAD = (
    'map="$1"; period="$2"; shift 2; reload=""; '
    'while [ "$1" != "--" ]; do reload="$reload $1"; shift; done; shift; '
    '( last=$(cksum < "$map"); while sleep "$period"; do '
    'now=$(cksum < "$map") || continue; '
    'if [ "$now" != "$last" ] && $reload; then last=$now; '
    'echo "front door: key map changed, nginx reloaded" >&2; fi; done ) & '
    'exec "$@"'
)


def key_reload_watched(then: list[str]) -> list[str]:
    """`then` (the front door's nginx), with the key-map watcher beside it."""
    return [
        "/bin/sh",
        "-c",
        _KEY_RELOAD,
        "key-reload",
        f"{FRONTDOOR_DIR}/api_keys.conf",
        str(KEY_RELOAD_CHECK_S),
        *nginx_signal("reload"),
        "--",
        *then,
    ]


def prep_command() -> list[str]:
    return ["/bin/sh", shlex.quote(f"{SCRIPTS_DIR}/{PREP_SCRIPT}")]


# The front door's first step, before it waits for the cache gate and execs nginx: the image's
# nginx is the version its tag pins ([proxy] image), as the TPU VM's boot checks it
# (templates/startup.sh.j2, check_proxy_version, the same message): a retagged or mistyped image
# would put an unvetted TLS front door in the pod. $1 is the version, the rest the command run
# when it matches. Non-printing bytes are dropped before the comparison, as the VM does.
_NGINX_VERSION_CHECK = (
    'said=$(nginx -v 2>&1) || { echo "could not run nginx -v in the front door\'s image" >&2; '
    "exit 1; }; "
    "said=$(printf '%s' \"$said\" | tr -cd '[:print:]'); "
    'if [ "$said" != "nginx version: nginx/$1" ]; then '
    "echo \"the front door's image runs '$said', not nginx/$1 as its tag pins; set [proxy] "
    'image to the tag of the nginx it really is" >&2; exit 1; fi; '
    'shift; exec "$@"'
)


def nginx_version_checked(cfg: DeployConfig, then: list[str]) -> list[str]:
    """`then`, run only when the image's nginx is [proxy] image's version."""
    return ["/bin/sh", "-c", _NGINX_VERSION_CHECK, "nginx-version", cfg.proxy.nginx_version, *then]


def nginx_command() -> list[str]:
    return ["nginx", "-p", f"{TMP_DIR}/", "-c", f"{FRONTDOOR_DIR}/{NGINX_CONF}", "-e", "stderr"]


def resources_tpu() -> dict[str, str]:
    """One chip per pod, the whole ct5lp-hightpu-1t node."""
    return {"google.com/tpu": "1"}


# Host memory: /dev/shm holds HF_HOME (the 9.54 GiB checkpoint, build log) inside its 10Gi, and
# the engine's own process beside it. Not measured on GKE: a starting point under the machine's
# 48 GB, to be replaced by the first real replica's figure.
VLLM_MEMORY_REQUEST = "24Gi"
VLLM_MEMORY_LIMIT = "40Gi"
VLLM_CPU_REQUEST = "8"


def vllm_resources() -> dict[str, dict[str, str]]:
    return {
        "requests": {
            **resources_tpu(),
            "cpu": VLLM_CPU_REQUEST,
            "memory": VLLM_MEMORY_REQUEST,
        },
        "limits": {**resources_tpu(), "memory": VLLM_MEMORY_LIMIT},
    }


def hpa_waiting_target(cfg: DeployConfig) -> int:
    # The replica planner's queue target for [load] (issue 25's rule; 1 under a TTFT target).
    from tpudeploy.gke.scaleplan import load_targets

    return load_targets(cfg).waiting_per_replica


def hpa_kv_target(cfg: DeployConfig) -> str:
    """The planner's KV-use threshold for [load] as a Kubernetes quantity in thousandths (the
    API server stores 0.93 as 930m; writing it so keeps Terraform's plan free of a diff)."""
    from tpudeploy.gke.scaleplan import load_targets

    return f"{round(load_targets(cfg).kv_cache_usage * 1000)}m"


def scale_down_window_s() -> int:
    return replicaplan.scale_down_window_s()


def pdb_max_unavailable(cfg: DeployConfig) -> int:
    """Voluntary disruptions (upgrades, consolidation) take one replica at a time; with one
    replica that is all of it, which a PodDisruptionBudget may not forbid forever."""
    return 1


def flex_recycle_lead_s() -> int:
    """How long before a flex-start node's run ends GKE starts its replacement: a cold start's
    probe budget, so the new replica is ready before the old one goes."""
    return min(replicaplan.startup_budget_s(), facts.GKE_FLEX_START_MAX_RUN_S)


def capacity_wait_s() -> int:
    """The bounded wait for spot capacity before the ComputeClass moves on to flex-start."""
    return math.ceil(facts.WARM_BOOT_S / 60) * 60


def progress_deadline_s() -> int:
    """The Deployment's progressDeadlineSeconds. Kubernetes marks a rollout failed
    (ProgressDeadlineExceeded; it rolls nothing back) when no new pod became available for this
    long, and its default, 600 s, is shorter than one cold boot (857 s, build log): every cold
    rollout would read as failed. The spot capacity wait, then the startup probe's budget."""
    return capacity_wait_s() + replicaplan.startup_failure_threshold() * replicaplan.PROBE_PERIOD_S
