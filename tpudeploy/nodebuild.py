"""What the node says it runs (tpudeploy/build) and how its boot compared (tpudeploy/boot-check).

The startup script publishes both as guest attributes after vLLM is ready and the proxy is up
(templates/startup.sh.j2, "build report and boot check"); the verdict is computed on the node by
tpudeploy/bootcheck.py against the expectations rendered here from the planner. `make status`
prints both, `make wait` the warnings, `make pin` and the benchmark read the build.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tpudeploy import facts, planner
from tpudeploy.config import DeployConfig

# The guest-attribute keys under tpudeploy/ (tpudeploy.tpuvm.guestattributes.NAMESPACE).
BUILD_KEY = "build"
CHECK_KEY = "boot-check"

# A manifest digest as the registry knows it: docker's RepoDigests entry, `repo@sha256:<64 hex>`.
# The image ID `docker images` prints is the config blob's digest: `docker pull` by it fails
# with "unexpected media type" (build log, "things that will bite you"), so a bare `sha256:...`
# is never accepted as a pin.
REPO_DIGEST = re.compile(r"[a-z0-9][a-z0-9._/-]*(?::[0-9]+)?(?:/[a-z0-9._-]+)*@sha256:[0-9a-f]{64}")
CONFIG_BLOB_ID = re.compile(r"(?:sha256:)?[0-9a-f]{64}")

# --dtype, --kv-cache-dtype and --gpu-memory-utilization at the seed's values are "confirmed
# no-ops by vLLM itself -- they do not appear in the engine's non-default args" (build log,
# final configuration). vLLM logs argparse destinations, so these are the names it prints.
NO_OP_ARGS = ("dtype", "kv_cache_dtype", "gpu_memory_utilization")
# The element type JAX allocates for each --kv-cache-dtype (build log: "the dtype really is
# float8_e4m3fn"); "auto" inherits the model dtype. Others are not judged.
KV_DTYPES = {
    "bfloat16": "bfloat16",
    "fp8": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}


def rendered_arg_names(serve_args: list[str]) -> list[str]:
    """The argparse destinations of a rendered `vllm serve` line, as vLLM logs them."""
    names = ["model_tag"]  # `vllm serve MODEL`: the positional
    for arg in serve_args:
        if arg.startswith("--"):
            name = arg[2:].replace("-", "_")
            names.append(name[3:] if name.startswith("no_") else name)
    return names


def boot_expectations(cfg: DeployConfig, serve_args: list[str]) -> dict[str, object]:
    """What the boot log should say for `cfg` launched with `serve_args`: the planner's pool and
    the build log's figures. Rendered into the startup script (tpudeploy/render.py);
    tpudeploy/bootcheck.py compares the log against it."""
    accel = planner.lookup_accelerator(cfg.accelerator_type)
    model = cfg.model_geometry
    pool = planner.kv_pool(
        max_model_len=cfg.vllm.max_model_len,
        gpu_memory_utilization=cfg.vllm.gpu_memory_utilization,
        kv_cache_memory_bytes=cfg.vllm.kv_cache_memory_bytes,
        model=model,
        chip=accel.chip,
        # A measured pool is what this build allocated: every boot checks it still does.
        measured=cfg.vllm.measured_pool,
    )
    context = min(facts.SLIDING_WINDOW_WIN_CONTEXT, cfg.vllm.max_model_len)
    windowed = pool.pool_bytes // planner.kv_bytes_per_request(context, windowed=True, model=model)
    kv_dtype = cfg.vllm.kv_cache_dtype
    if kv_dtype == "auto":
        kv_dtype = cfg.vllm.dtype
    return {
        "kv_tokens": pool.tokens,
        "num_blocks": pool.num_blocks,
        "block_size": pool.block_size,
        "bytes_per_token": pool.bytes_per_token,
        "kv_dtype": KV_DTYPES.get(kv_dtype, ""),
        "cap_gib": round(pool.cap_bytes / planner.GIB, 2),
        "weights_gib": round(pool.weight_bytes / planner.GIB, 2),
        "cold_s": planner.SEED_BOOT.cold_s,
        "warm_s": planner.SEED_BOOT.warm_s,
        "compile_s": planner.SEED_BOOT.compile_s,
        "no_op_args": list(NO_OP_ARGS),
        "rendered_args": rendered_arg_names(serve_args),
        "windowed": {
            "context": context,
            "ratio": round(planner.sliding_window_ratio(context, model), 2),
            "clients_now": pool.tokens // context,
            "clients_windowed": windowed,
        },
    }


@dataclass(frozen=True)
class Build:
    """One image as the node pulled it: the reference, its RepoDigest and what it reports."""

    image: str
    digest: str  # repo@sha256:<64 hex>, or "" when the registry gave none
    versions: dict[str, str]

    @property
    def pinned_reference(self) -> str:
        return self.digest if REPO_DIGEST.fullmatch(self.digest) else ""

    def version_text(self) -> str:
        return ", ".join(f"{name} {value}" for name, value in self.versions.items()) or "-"


def parse_build(value: str) -> dict[str, Build]:
    """The tpudeploy/build attribute: {"vllm": {...}, "proxy": {...}}; {} when unreadable."""
    try:
        raw = json.loads(value)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    out = {}
    for role, item in raw.items():
        if isinstance(item, dict):
            versions = item.get("versions") if isinstance(item.get("versions"), dict) else {}
            out[str(role)] = Build(
                image=str(item.get("image", "")),
                digest=str(item.get("digest", "")),
                versions={str(k): str(v) for k, v in (versions or {}).items() if v},
            )
    return out


def parse_check(value: str) -> dict[str, object]:
    try:
        raw = json.loads(value)
    except ValueError:
        return {}
    return raw if isinstance(raw, dict) else {}


def build_lines(attributes: dict[str, str]) -> list[str]:
    """`make status`: the images and versions the node reports."""
    builds = parse_build(attributes.get(BUILD_KEY, ""))
    if not builds:
        return ["build: not reported yet (the node publishes it once vLLM and the proxy are up)"]
    lines = []
    for role, build in builds.items():
        digest = build.digest or "no registry digest (a locally built image?)"
        lines.append(f"{role} image {build.image}")
        lines.append(f"  digest {digest}")
        lines.append(f"  reports {build.version_text()}")
    return lines


def findings(attributes: dict[str, str]) -> list[dict[str, str]]:
    items = parse_check(attributes.get(CHECK_KEY, "")).get("findings")
    return [f for f in items if isinstance(f, dict)] if isinstance(items, list) else []


def _finding_line(f: dict[str, str]) -> str:
    meaning = f.get("meaning") or ""
    return f"  {f.get('level', '?')}: {f.get('text', '')}" + (f" -- {meaning}" if meaning else "")


def check_lines(attributes: dict[str, str], *, only_alerts: bool = False) -> list[str]:
    """The boot check against the planner and the build log; `only_alerts`: warnings and wins
    (what `make wait` prints), else every finding (`make status`)."""
    report = parse_check(attributes.get(CHECK_KEY, ""))
    if not report:
        return [] if only_alerts else ["boot check: not reported yet"]
    shown = [
        f for f in findings(attributes) if not only_alerts or f.get("level") in ("warning", "win")
    ]
    if only_alerts and not shown:
        return [f"boot check: {report.get('verdict', '')}"]
    return [f"boot check: {report.get('verdict', '')}", *(_finding_line(f) for f in shown)]
