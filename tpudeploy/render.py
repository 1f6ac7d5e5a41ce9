"""Renders the node's boot scripts from templates/ with every value shell-quoted."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import shlex
from pathlib import Path

import jinja2

from tpudeploy import bootcheck, cacheguard, facts, frontdoor_log, names, nodebuild, opsagent
from tpudeploy.config import DeployConfig, VllmConfig
from tpudeploy.config.idle_table import INTERVAL_S as IDLE_INTERVAL_S
from tpudeploy.config.secretshape import API_KEY_ERE, HF_TOKEN_ERE
from tpudeploy.logsources import PREEMPTED_PHASE, TPUVM_LOG_IDS
from tpudeploy.node import idlewatch, keymap
from tpudeploy.node.keymap import KEY_ID_CHARS
from tpudeploy.pins import pinned_digest
from tpudeploy.planner.clients import client_limits

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
# vLLM listens here only: the TLS proxy on the node is the one way in (templates/nginx.conf.j2).
VLLM_HOST = "127.0.0.1"


def vllm_serve_args(v: VllmConfig) -> list[str]:
    """The build log's `vllm serve` command line, from the config (secrets never appear here)."""
    args = [
        "vllm",
        "serve",
        v.model,
        # First, so that none of them can extend a flag rendered here (a bare value after
        # --allowed-media-domains widened the media allow-list) and every modelled flag below
        # wins over a repeat (vLLM takes the last). config/serveflags.py checks each one.
        *v.extra_args,
        # No --api-key: vLLM's key guards /v1 routes only (/invocations serves completions without
        # it), so the proxy checks the key on every path and vLLM is reachable from the node only.
        "--host",
        VLLM_HOST,
        "--port",
        str(v.port),
        # The next three restate defaults; the seed keeps them for auditability because the real
        # defaults are computed several layers away from where they look declared.
        "--dtype",
        v.dtype,
        "--kv-cache-dtype",
        v.kv_cache_dtype,
        "--max-model-len",
        str(v.max_model_len),
        "--max-num-batched-tokens",
        str(v.max_num_batched_tokens),
        "--tensor-parallel-size",
        str(v.tensor_parallel_size),
        "--gpu-memory-utilization",
        f"{v.gpu_memory_utilization:g}",
    ]
    if v.block_size is not None:
        args += ["--block-size", str(v.block_size)]
    if v.kv_cache_memory_bytes is not None:
        # The seed's --kv-cache-memory is spelled --kv-cache-memory-bytes in current vLLM.
        args += ["--kv-cache-memory-bytes", str(v.kv_cache_memory_bytes)]
    # Both ways explicit: vLLM's default is on, so leaving the flag out would never turn it off.
    args.append(
        "--enable-prefix-caching" if v.enable_prefix_caching else "--no-enable-prefix-caching"
    )
    if v.disable_chunked_mm_input:
        args.append("--disable-chunked-mm-input")
    if v.limit_mm_per_prompt:
        args += ["--limit-mm-per-prompt", json.dumps(v.limit_mm_per_prompt, separators=(",", ":"))]
    if v.enable_auto_tool_choice:
        args.append("--enable-auto-tool-choice")
    args += ["--tool-call-parser", v.tool_call_parser, "--reasoning-parser", v.reasoning_parser]
    if v.speculative_config is not None:
        args += ["--speculative-config", json.dumps(v.speculative_config, separators=(",", ":"))]
    # Never empty (config refuses it): an empty list would let a request make vLLM fetch from the
    # metadata server over --net=host.
    args += ["--allowed-media-domains", *v.allowed_media_domains]
    return args


def _argv_lines(argv: list[str]) -> list[str]:
    """Group argv into shell-quoted lines, one flag (with its values) per line, for readability."""
    lines: list[list[str]] = []
    for arg in argv:
        if not lines or arg.startswith("--"):
            lines.append([])
        lines[-1].append(shlex.quote(arg))
    return [" ".join(line) for line in lines]


# One environment per process: jinja2 caches each compiled template in its environment, and a
# new environment per render compiled every template again (the boot script's templates are
# most of a synth's and of each render's CPU). Nothing changes it after it is made. mutmut leaves
# decorated functions alone, so `make mutants` no longer mutates these options; the rendered
# scripts' tests (shellcheck, bash, the line layout) still hold each of them.
@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - shell scripts, not HTML; values go through |q instead
        keep_trailing_newline=True,
        # Block tags take their line with them: a blank line inside `docker run ... \` would end
        # the command before `vllm serve`.
        trim_blocks=True,
    )
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return env


# Seed: cold boot 857 s. Readiness waits well past it before calling the boot failed.
READY_TIMEOUT_SECONDS = 2400
# The compile-cache restore's wall-clock bound (issue 22): a cache within the guard's limits
# (tpudeploy/cacheguard.py, 4 GiB, twenty times the seed's 197 MB) is decompressed twice well
# inside it; any archive that takes longer, hostile or not, means a cold boot, never a hang.
RESTORE_TIMEOUT_SECONDS = 300
# How often the TPU VM's key poller reads every client's key (templates/startup.sh.j2): issue 37
# asks that an added, rotated or revoked key reach the running front door within a minute; one
# period plus a fetch (measured in tests/tpuvm/test_key_poller.py) stays well under it.
KEY_POLL_SECONDS = 30


# The config's image grammar (config.containers.IMAGE_RE) has no ':' or '@' before the tag and
# the digest: the repository is everything up to the first of them.
_REPOSITORY = re.compile(r"[^:@]+")


def image_repository(image: str) -> str:
    """`vllm/vllm-tpu:nightly` -> `vllm/vllm-tpu`: the image without its tag or digest."""
    match = _REPOSITORY.match(image)
    return match[0] if match else image


def compile_cache_inputs(cfg: DeployConfig) -> dict[str, object]:
    """Everything a compiled XLA program depends on that the deployment controls.

    JAX keys its own entries on program, jaxlib/libtpu and topology (DESIGN), but the key here
    also decides which archive a new VM downloads: namespacing by accelerator and every
    `vllm serve` flag and container variable means a config change starts a fresh entry instead
    of dragging a stale archive along. The image enters as its repository only: the boot script
    adds the digest of the image it actually pulled (a tag like :nightly names a new build every
    night). Fields that cannot change a compiled shape (the port, the media allow-list) are
    normalised away, so a firewall or policy edit keeps the warm cache.
    """
    v = cfg.vllm
    shaped = v.model_copy(update={"port": 8000, "allowed_media_domains": ("-",)})
    return {
        "image": image_repository(v.image),
        "accelerator_type": cfg.accelerator_type,
        "runtime_version": cfg.runtime_version,
        "serve": vllm_serve_args(shaped),
        "env": v.container_env(),
    }


def compile_cache_key(cfg: DeployConfig) -> str:
    """16 hex digits of sha256 over compile_cache_inputs; the archive of one pulled image is
    gs://BUCKET/xla/<key>/<image digest>.tar.gz."""
    canonical = json.dumps(compile_cache_inputs(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def cache_object_prefix(cfg: DeployConfig) -> str:
    """Where this deployment's archives live in its bucket: xla/<key>/ (one per image digest)."""
    return f"xla/{compile_cache_key(cfg)}/"


def pinned_cache_object(cfg: DeployConfig) -> str | None:
    """The exact compile-cache object a node of `cfg` reads and writes, once the vLLM image is
    pinned (the startup script's restore_cache: xla/<key>/<digest>.tar.gz); None for a tag,
    whose digest is known only after the pull. An IAM condition on the cache bucket can name it."""
    digest = pinned_digest(cfg.vllm.image)
    return f"xla/{compile_cache_key(cfg)}/{digest}.tar.gz" if digest else None


def cache_write_condition(cfg: DeployConfig, bucket: str) -> dict[str, str]:
    """The IAM condition on the node's objectCreator grant (issue 22, item 2): it may create its
    own key's archives only, and the one archive of its image when the image is pinned by digest
    (the boot names it xla/<key>/<digest>.tar.gz; a tag's digest is known only once pulled).
    Cloud Storage gives an object's resource.name as projects/_/buckets/BUCKET/objects/OBJECT
    (https://cloud.google.com/iam/docs/conditions-resource-attributes#resource-name); conditions
    need uniform bucket-level access (https://cloud.google.com/storage/docs/access-control/iam)."""
    objects = f"projects/_/buckets/{bucket}/objects/{cache_object_prefix(cfg)}"
    pinned = pinned_cache_object(cfg)
    if pinned:
        name = f"projects/_/buckets/{bucket}/objects/{pinned}"
        return {
            "title": "this-image-archive-only",
            "description": f"Create {name} only: the archive of the pinned image",
            "expression": f'resource.name == "{name}"',
        }
    return {
        "title": "this-config-archives-only",
        "description": f"Create objects under {objects} only: this configuration's archives",
        "expression": f'resource.name.startsWith("{objects}")',
    }


def cache_bucket_grants(
    cfg: DeployConfig, bucket: str
) -> dict[str, tuple[str, dict[str, str] | None]]:
    """The compile cache's IAM for whatever serves `cfg`, by construct-id suffix: (role,
    condition). The TPU VM's node account (stacks/secrets.py) and the GKE replicas' Kubernetes
    service account (stacks/gke/cluster.py) get exactly these: read, and create this key's
    archives only (cache_write_condition); neither role can replace or delete an object."""
    return {
        "reader": ("roles/storage.objectViewer", None),
        "writer": ("roles/storage.objectCreator", cache_write_condition(cfg, bucket)),
    }


def _boot_values(cfg: DeployConfig) -> dict[str, object]:
    """Values both boot scripts share (the cache location and the runtime names)."""
    return {
        "deployment": cfg.name,
        "container_name": cfg.vllm.container_name,
        "cache_key": compile_cache_key(cfg),
        "bucket_suffix": cfg.compile_cache_bucket_suffix,
    }


# The front door's limits (templates/nginx.conf.j2; issue 22 filled nginx's default 1,024
# connections with half-sent headers from one address). One address holds at most 128
# connections (twice the seed's 64 concurrent clients, which over the tunnel all come from
# 127.0.0.1); the worker holds 8,192, so filling it takes 16 addresses, each connection ended
# 10 s after it opened unless its header arrived.
PROXY_WORKER_CONNECTIONS = 8192
PROXY_CONNECTIONS_PER_ADDRESS = 128
PROXY_HEADER_TIMEOUT = "10s"
PROXY_BODY_TIMEOUT = "30s"
# Where the TLS server listens behind the counting relay: the proxy container's own tmpfs.
PROXY_TLS_SOCKET = "/tmp/front-door-tls.sock"  # noqa: S108 - the container's private tmpfs
# And the GKE InferencePool's plain listener behind its own relay (tpudeploy.gke.pod.POOL_PORT).
PROXY_POOL_SOCKET = "/tmp/front-door-pool.sock"  # noqa: S108 - the container's private tmpfs
# And the GKE pod's metrics listener behind its relay (tpudeploy.gke.pod.METRICS_PORT).
PROXY_METRICS_SOCKET = "/tmp/front-door-metrics.sock"  # noqa: S108 - the container's own tmpfs
# njs, for the access log's token counts: where both the official image (nginx.org's packages,
# --modules-path=/usr/lib/nginx/modules) and Debian's libnginx-mod-http-js put the module.
PROXY_NJS_MODULE = "/usr/lib/nginx/modules/ngx_http_js_module.so"
# The usage counter (templates/frontdoor_usage.js): beside nginx.conf on the TPU VM (a relative
# path resolves against the config's directory); the GKE pod passes its ConfigMap's path.
PROXY_USAGE_JS = "frontdoor_usage.js"
# Retry-After of a 429 for a client at its streams cap (templates/frontdoor_key_check.conf.j2
# says why it is short: the client's own rate limit paces its retries).
PROXY_STREAMS_RETRY_AFTER_S = 1


def usage_js_source() -> str:
    """templates/frontdoor_usage.js, written beside nginx.conf (it is not a Jinja template)."""
    return (TEMPLATES_DIR / PROXY_USAGE_JS).read_text(encoding="utf-8")


def proxy_clients(cfg: DeployConfig) -> list[dict[str, object]]:
    """Each [access] client's limits for the front door. `ident` names its nginx zones and
    variables, which take no hyphen (client names take no underscore, so it stays unique)."""
    return [
        {
            "name": lim.client,
            "ident": lim.client.replace("-", "_"),
            "streams": lim.streams,
            "requests_per_minute": lim.requests_per_minute,
            "rate_retry_after_s": lim.rate_retry_after_s,
            "streams_from": lim.streams_from,
            "rate_from": lim.rate_from,
        }
        for lim in client_limits(cfg)
    ]


def render_proxy_config(
    cfg: DeployConfig,
    *,
    metrics_port: int | None = None,
    pool_port: int | None = None,
    pool_connections_per_address: int = PROXY_CONNECTIONS_PER_ADDRESS,
    usage_js: str = PROXY_USAGE_JS,
) -> str:
    """nginx.conf for the TLS proxy; the startup script writes it beside the certificate. With
    `metrics_port` (the GKE pod), a plain listener serves vLLM's /metrics and nothing else; with
    `pool_port` (GKE routing), a plain listener serves what the TLS port does, key and all."""
    return (
        _environment()
        .get_template("nginx.conf.j2")
        .render(
            deployment=cfg.name,
            vllm_port=cfg.vllm.port,
            proxy_port=cfg.proxy.port,
            metrics_port=metrics_port,
            pool_port=pool_port,
            pool_socket=PROXY_POOL_SOCKET,
            metrics_socket=PROXY_METRICS_SOCKET,
            pool_connections_per_address=pool_connections_per_address,
            worker_connections=PROXY_WORKER_CONNECTIONS,
            connections_per_address=PROXY_CONNECTIONS_PER_ADDRESS,
            header_timeout=PROXY_HEADER_TIMEOUT,
            body_timeout=PROXY_BODY_TIMEOUT,
            tls_socket=PROXY_TLS_SOCKET,
            # The key's shape, checked on every presented header (frontdoor_key_check.conf.j2),
            # and its id, the prefix the key map is keyed by (tpudeploy/node/keymap.py).
            api_key_pattern=API_KEY_ERE.removeprefix("^").removesuffix("$"),
            api_key_id_pattern=f"(.{{{KEY_ID_CHARS}}})",
            clients=proxy_clients(cfg),
            streams_retry_after_s=PROXY_STREAMS_RETRY_AFTER_S,
            njs_module=PROXY_NJS_MODULE,
            usage_js=usage_js,
            access_log_format=frontdoor_log.log_format(),
        )
    )


def render_login_gate(cfg: DeployConfig) -> str:
    """The sshd ForceCommand the startup script installs: a shell only for sudoers."""
    return (
        _environment()
        .get_template("login_gate.sh.j2")
        .render(deployment=cfg.name, proxy_port=cfg.proxy.port)
    )


def hf_tmpfs_size() -> str:
    """The size of vLLM's HF_HOME tmpfs: the seed's checkpoint plus a quarter, in whole GiB
    (a tmpfs takes memory only as it fills)."""
    return f"{math.ceil(facts.CHECKPOINT_BYTES * 1.25 / facts.GIB)}g"


def cache_guard_source() -> str:
    """tpudeploy/cacheguard.py, run by the startup script as `python3 - ARCHIVE DEST`."""
    return Path(cacheguard.__file__).read_text(encoding="utf-8")


def keymap_source() -> str:
    """tpudeploy/node/keymap.py, written by the startup script (and the pod's script) to a
    tmpfs and run by python3 there: the front door's per-client key map."""
    return Path(keymap.__file__).read_text(encoding="utf-8")


def idlewatch_source() -> str:
    """tpudeploy/node/idlewatch.py, written by the startup script to the tmpfs and run by
    python3 as a service of its own: the idle stop ([idle] stop_after)."""
    return Path(idlewatch.__file__).read_text(encoding="utf-8")


def _idle_values(cfg: DeployConfig) -> dict[str, object]:
    """The idle stop's values; an empty stop_after renders the do-nothing start_idle_watch."""
    seconds = cfg.idle.seconds
    return {
        "idle_stop_after": seconds or "",
        "idle_interval": IDLE_INTERVAL_S,
        "idle_unit": f"tpudeploy-idle-{cfg.name}",
        # Rendered only under the template's `if idle_stop_after` (templates/_idle_watch.sh.j2).
        "idlewatch": idlewatch_source(),
        # The TPU API the deadline job calls too (tpudeploy/tpuvm/deadline_target.py).
        "tpu_api": names.TPU_API,
        # What ends the billing: the node itself (spot, on-demand), or a flex-start node's
        # queued resource, which takes its node with it (force=true: deadline_target.qr_url).
        "idle_delete_path": f"locations/{cfg.zone}/queuedResources/{cfg.queued_resource_id}"
        "?force=true"
        if cfg.flex_start_node
        else f"locations/{cfg.zone}/nodes/{cfg.node_id}",
    }


def boot_check_source() -> str:
    """tpudeploy/bootcheck.py, run by the startup script on the host and in the image."""
    return Path(bootcheck.__file__).read_text(encoding="utf-8")


def render_startup_script(cfg: DeployConfig) -> str:
    """The startup script stored in the node's metadata: ids of secrets, never their values."""
    v = cfg.vllm
    return (
        _environment()
        .get_template("startup.sh.j2")
        .render(
            **_boot_values(cfg),
            hf_token_secret_id=cfg.hf_token_secret_id,
            client_secrets=list(cfg.client_key_secret_ids.items()),
            key_poll_seconds=KEY_POLL_SECONDS,
            keypoll_unit=f"tpudeploy-keypoll-{cfg.name}",
            keymap=keymap_source(),
            **_idle_values(cfg),
            tls_secret_id=cfg.tls_secret_id,
            hf_token_format=HF_TOKEN_ERE,
            image=v.image,
            shm_size=v.shm_size,
            port=v.port,
            proxy_image=cfg.proxy.image,
            proxy_version=cfg.proxy.nginx_version,
            proxy_container=cfg.proxy.container_name,
            proxy_port=cfg.proxy.port,
            proxy_config=render_proxy_config(cfg),
            usage_js=usage_js_source(),
            cache_guard=cache_guard_source(),
            boot_check=boot_check_source(),
            boot_expected=json.dumps(
                nodebuild.boot_expectations(cfg, vllm_serve_args(v)), separators=(",", ":")
            ),
            login_gate=render_login_gate(cfg),
            metadata_addresses=facts.METADATA_SERVER_ADDRESSES,
            metadata_dns_port=facts.METADATA_SERVER_DNS_PORT,
            hf_tmpfs_size=hf_tmpfs_size(),
            cache_max_bytes=cacheguard.MAX_TOTAL_BYTES,
            restore_timeout=RESTORE_TIMEOUT_SECONDS,
            ready_timeout=READY_TIMEOUT_SECONDS,
            container_env=v.container_env(),
            serve_lines=_argv_lines(vllm_serve_args(v)),
            **_telemetry_values(cfg),
        )
    )


def _telemetry_values(cfg: DeployConfig) -> dict[str, object]:
    """templates/_telemetry.sh.j2's values: the Ops Agent, its config and the logs it reads."""
    return {
        "log_dir": opsagent.LOG_DIR,
        "boot_log_file": opsagent.LOG_FILES["boot"],
        "vllm_log_file": opsagent.LOG_FILES["vllm"],
        "frontdoor_log_file": opsagent.LOG_FILES["frontdoor"],
        "log_ids": list(TPUVM_LOG_IDS.values()),
        "ops_agent_config": opsagent.render_config(cfg),
        "ops_agent_config_path": opsagent.CONFIG_PATH,
        "ops_agent_installer_url": opsagent.INSTALLER_URL,
        "ops_agent_installer_args": opsagent.INSTALLER_ARGS,
        "ops_agent_unit": opsagent.AGENT_UNIT,
        "container_log_opts": [f"{k}={v}" for k, v in opsagent.CONTAINER_LOG_OPTS.items()],
    }


def render_shutdown_script(cfg: DeployConfig) -> str:
    """Best-effort upload of a compile cache packed at startup, inside the preemption notice,
    after the boot-log entry that says the shutdown is a preemption."""
    return (
        _environment()
        .get_template("shutdown.sh.j2")
        .render(
            **_boot_values(cfg),
            log_dir=opsagent.LOG_DIR,
            boot_log_file=opsagent.LOG_FILES["boot"],
            preempted_phase=PREEMPTED_PHASE,
        )
    )


def node_metadata(cfg: DeployConfig) -> dict[str, str]:
    """The node's metadata, shared by the VM and flex-start paths: the boot scripts, OS Login so
    that no project-wide SSH keys apply, and guest attributes for the boot phase (`make wait`)."""
    return {
        "startup-script": render_startup_script(cfg),
        "shutdown-script": render_shutdown_script(cfg),
        "enable-oslogin": "TRUE",
        "block-project-ssh-keys": "TRUE",
        "enable-guest-attributes": "TRUE",
    }
