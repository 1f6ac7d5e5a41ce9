"""One replica's compile cache: the TPU VM's bucket, key, sanitizer and create-only save, run by
the pod's init container (restore) and a container beside vLLM (save, then the front door).

Node-local, never GCS FUSE: a GCS-backed JAX cache directory has been seen to miss on every
lookup upstream, a local directory filled from GCS to hit (DESIGN, "Scale-out shape"). Plain
data; stacks/gke/serving.py declares the containers and volumes.
"""

from __future__ import annotations

import math

from tpudeploy import cacheguard, facts, render
from tpudeploy.config import DeployConfig
from tpudeploy.gke import pod
from tpudeploy.pins import pinned_digest
from tpudeploy.planner import Finding

SCRIPT = "cache.sh"
# The token's curl config and the restore's outcome: a memory-backed volume of the two cache
# containers only (the script refuses to write a token anywhere else).
RUNTIME_DIR = "/run/tpudeploy"
# The downloaded and the packed archive: node-local disk outside the directory vLLM writes, so
# nothing vLLM does after packing can change what is uploaded.
SCRATCH_DIR = "/var/lib/tpudeploy-cache"
# The front door waits for this file (frontdoor_command): the save step writes it after packing.
GATE_DIR = "/run/tpudeploy-gate"
GATE_FILE = f"{GATE_DIR}/open"


def scratch_size() -> str:
    """Room for one archive the guard would accept (cacheguard.MAX_TOTAL_BYTES), with margin:
    the download is removed before the pack is written."""
    return f"{math.ceil(cacheguard.MAX_TOTAL_BYTES * 1.25 / facts.GIB)}Gi"


def render_cache_script(cfg: DeployConfig) -> str:
    """templates/pod_cache.sh.j2: the VM's restore, pack and upload (the same partials), the
    same key and the same sanitizer source, in the pod's places."""
    return (
        render._environment()
        .get_template("pod_cache.sh.j2")
        .render(
            deployment=cfg.name,
            image=cfg.vllm.image,
            cache_key=render.compile_cache_key(cfg),
            bucket_suffix=cfg.compile_cache_bucket_suffix,
            cache_guard=render.cache_guard_source(),
            cache_max_bytes=cacheguard.MAX_TOTAL_BYTES,
            restore_timeout=render.RESTORE_TIMEOUT_SECONDS,
            port=cfg.vllm.port,
            gate_file=GATE_FILE,
            cache_dir=pod.CACHE_DIR,
            cache_scratch=SCRATCH_DIR,
        )
    )


def scripts(cfg: DeployConfig) -> dict[str, str]:
    """The ConfigMap's file for both cache containers."""
    return {SCRIPT: render_cache_script(cfg)}


# sh(1) first: an image without bash (not confirmed for the vLLM image) must cost the cache,
# never the replica. $0 names the shim; $1 the script, $2 the step, $3 the gate.
_BASH_OR_COLD = (
    'command -v bash >/dev/null 2>&1 && exec bash "$1" "$2"; '
    'echo "tpudeploy-cache-$2: no bash in the image: the compile cache is off" >&2; '
    '[ "$2" != save ] || { : >"$3"; exec sleep 2147483647; }'
)


def _step(step: str) -> list[str]:
    return ["/bin/sh", "-c", _BASH_OR_COLD, "cache", f"{pod.SCRIPTS_DIR}/{SCRIPT}", step, GATE_FILE]


def restore_command() -> list[str]:
    return _step("restore")


def save_command() -> list[str]:
    return _step("save")


# sh(1): $0 names the wrapper, $1 is the gate; the rest is nginx's own command line.
_GATE_WAIT = 'until [ -e "$1" ]; do sleep 1; done; shift; exec "$@"'


def frontdoor_command() -> list[str]:
    """nginx, once the save step has packed the cache (or found nothing to pack)."""
    return ["/bin/sh", "-c", _GATE_WAIT, "frontdoor-gate", GATE_FILE, *pod.nginx_command()]


def cache_resources() -> dict[str, dict[str, str]]:
    """The guard holds itself to 1 GiB of address space (cacheguard.MAX_MEMORY_BYTES); tar and
    gzip need little beside it."""
    return {
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"cpu": "2", "memory": "2Gi"},
    }


def cache_findings(cfg: DeployConfig) -> list[Finding]:
    """What `make check` and `make synth` say while the pods cannot share the cache: the object
    is named by the pulled image's digest, which a pod can read only from a pinned reference."""
    if pinned_digest(cfg.vllm.image):
        return []
    return [
        Finding(
            "warning",
            "vllm.image",
            cfg.vllm.image,
            f"every GKE replica compiles cold ({facts.COLD_BOOT_S:g} s instead of "
            f"{facts.WARM_BOOT_S:g} s) and saves no compile cache while the image is a tag: a pod "
            'cannot read the digest its node pulled. Pin it (image = "repo@sha256:...") to '
            "restore and save the cache a TPU VM of the same [vllm] uses",
        )
    ]
