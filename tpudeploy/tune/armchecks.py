"""What an arm must pass before any spend, beyond the deploy's schema and guard rails.

An arm that downloads a draft checkpoint, needs a newer vLLM than the pinned one, or asks for
more compile threads than the host has cores would boot (and bill) only to fail or measure
nothing: `make tune-plan` refuses it with the reason and `make tune` never starts it.
"""

from __future__ import annotations

import math

from tpudeploy import facts, render
from tpudeploy.config import DeployConfig
from tpudeploy.config.serveflags import VLLM_VERSION
from tpudeploy.config.speculative import METHODS, draft_of

# The host's vCPUs per accelerator type: the useful parallelism of tpu-inference's AOT compile
# pool (NUM_PRECOMPILE_WORKERS, a thread pool; 1, its default, compiles in the main thread:
# tpu_inference/envs.py and runner/compilation_manager.py). Google's TPU v5e page, "VM types":
# "ct5lp-hightpu-1t | 24 | 48 | 1", "ct5lp-hightpu-4t | 112 | 192 | 1", "ct5lp-hightpu-8t | 224 |
# 384 | 2" (vCPUs, RAM GB, NUMA nodes per VM), read 2026-12-03 in its stored copies; keyed by the
# accelerator type each machine type hosts.
HOST_VCPUS: dict[str, int] = {"v5litepod-1": 24, "v5litepod-4": 112, "v5litepod-8": 224}
HOST_VCPUS_SOURCE = "docs.cloud.google.com/tpu/docs/v5e, VM types (read 2026-12-03)"

# The lowest vLLM whose speculative config a method's arm is known to work with. tpu-inference
# added its Gemma 4 MTP end-to-end test ("[MTP] Add gemma4 MTP e2e test (#2846)", 2026-06-11)
# before the build log's run (2026-08-09, vLLM 0.26.1rc1); an older pin predates it.
MIN_VLLM: dict[str, str] = {"mtp": "0.26.1"}


def _version(text: str) -> tuple[int, ...]:
    """The leading release numbers of a version: 0.26.1rc1.dev125+g... -> (0, 26, 1)."""
    out = []
    for part in text.split("."):
        digits = ""
        for c in part:
            if not c.isdigit():
                break
            digits += c
        if not digits:
            break
        out.append(int(digits))
        if len(digits) != len(part):
            break
    return tuple(out)


def hf_tmpfs_bytes() -> int:
    """The node's HF_HOME tmpfs in bytes, as the startup script sizes it (render.hf_tmpfs_size,
    whole GiB): every checkpoint vLLM downloads lands there."""
    size = render.hf_tmpfs_size()
    return int(size.removesuffix("g")) * facts.GIB


def refusals(cfg: DeployConfig, *, pinned_vllm: str = VLLM_VERSION) -> list[str]:
    """Each reason this arm must not be booted, naming the key, the value and the fix."""
    out: list[str] = []
    spec = cfg.vllm.speculative_config
    method = spec.get("method") if spec else None
    if isinstance(method, str) and method in MIN_VLLM:
        need = MIN_VLLM[method]
        if _version(pinned_vllm) < _version(need):
            out.append(
                f"vllm.speculative_config.method = {method!r}: the pinned vLLM {pinned_vllm} "
                f"predates it (needs {need} or later: tpudeploy/tune/armchecks.py); pin a newer "
                "build (make pin) or drop the arm"
            )
    found = draft_of(spec)
    if found is not None:
        name, draft = found
        if draft.target != cfg.vllm.model:
            out.append(
                f"vllm.speculative_config.model = {name!r}: it drafts for {draft.target}, not "
                f"for vllm.model = {cfg.vllm.model!r}; use the draft made for your model"
            )
        room = hf_tmpfs_bytes()
        need_bytes = facts.CHECKPOINT_BYTES + draft.bytes
        if need_bytes > room:
            out.append(
                f"vllm.speculative_config.model = {name!r}: the checkpoint and the draft "
                f"({need_bytes / facts.GIB:.2f} GiB, the draft sized as {draft.source}) do not "
                f"fit the node's {room / facts.GIB:.0f} GiB HF_HOME tmpfs; the download would "
                "fail after the node is billed"
            )
    vcpus = HOST_VCPUS.get(cfg.accelerator_type)
    workers = cfg.vllm.num_precompile_workers
    if vcpus is not None and workers > vcpus:
        out.append(
            f"vllm.num_precompile_workers = {workers}: above the {cfg.accelerator_type} host's "
            f"{vcpus} vCPUs ({HOST_VCPUS_SOURCE}); compile threads past the cores only "
            f"queue. Use at most {vcpus}"
        )
    return out


def before_spend(cfg: DeployConfig) -> list[str]:
    """What `make tune-plan` says of an arm before anything runs: the draft it downloads, its
    stated size bound and whose licence the stored token's account must have accepted (both
    then asked of Hugging Face: tpudeploy/tune/hubcheck.py)."""
    found = draft_of(cfg.vllm.speculative_config)
    if found is None:
        return []
    name, draft = found
    method = str((cfg.vllm.speculative_config or {}).get("method"))
    lines = [
        f"downloads the draft {name} (at most {math.ceil(draft.bytes / 10**6):,} MB: "
        f"{draft.source}) beside the {facts.CHECKPOINT_BYTES / facts.GIB:.2f} GiB checkpoint",
    ]
    if draft.gated:
        lines.append(
            f"gated: accept its licence at https://huggingface.co/{name} with the account whose "
            "token `make secret` stored, or the boot fails at the download (asked of Hugging "
            "Face with that token, and the size measured, before spend: tpudeploy/tune/hubcheck.py)"
        )
    if method in METHODS and METHODS[method].draft:
        lines.append(f"method {method}: {METHODS[method].source}")
    return lines
