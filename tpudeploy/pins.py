"""Whether an image reference is pinned, on both platforms: a digest holds one build, a tag moves.

The build log: `vllm/vllm-tpu:nightly` moves every day, and a build is only reproducible, and
its compile cache only worth restoring, by digest. `make check` warns on a tag (moving_tags);
the compile cache's key and objects are tpudeploy/render.py's (compile_cache_key,
pinned_cache_object); `make pin` (tpudeploy/tpuvm/pin.py) writes the digests a node pulled.
"""

from __future__ import annotations

import re

from tpudeploy.config import DeployConfig
from tpudeploy.planner import Finding

PINNED = re.compile(r"@sha256:([0-9a-f]{64})$")

# The GKE wake pod's python3 (why not the vLLM image: tpudeploy/gke/zero.py): Docker Hub's
# official Python image, Debian slim (sh, cp, chmod and python3's standard library: all that
# the responder, the front door's prep step and its key loop run). The index digest
# (multi-arch: it was pulled on arm64, the system node is amd64) is read from two third-party
# pins in the stored corpus, a Dependabot-maintained Dockerfile and a build log of 2026-09-28
# that pulled it (Python 3.13.15); not checked against Docker Hub from here (no registry but
# the package ones is reachable). A wrong digest fails the pull with the reason, it cannot run
# another image.
WAKE_IMAGE = (
    "python:3.13-slim@sha256:7c61056e61ac89e852de05f3dc6fa51a6dd2181797bceed46aa725dd7cb2cd3b"
)


def pinned_digest(image: str) -> str | None:
    """The 64 hex digits an image reference is pinned to, or None for a tag."""
    m = PINNED.search(image)
    return m.group(1) if m else None


def moving_tags(cfg: DeployConfig, *, pin_instead: str | None = None) -> list[Finding]:
    """One warning while an image is a tag (what `make check` and `make synth` print).
    `pin_instead`: why the platform has no `make pin` and what to do instead (its Platform's
    commands), None where it has one."""
    unpinned = [
        (f"{table}.image", image)
        for table, image in (("vllm", cfg.vllm.image), ("proxy", cfg.proxy.image))
        if pinned_digest(image) is None
    ]
    if not unpinned:
        return []
    (key, image), others = unpinned[0], unpinned[1:]
    also = "".join(f"; {k} = {v!r} too" for k, v in others)
    return [
        Finding(
            "warning",
            key,
            image,
            "a tag, not a digest: the registry can move it, so two deploys of this commit can "
            "run different builds (vLLM version, memory layout, compile cache)"
            f"{also}. "
            + (
                "After a boot, `make pin` writes the digests the node pulled"
                if pin_instead is None
                else f"`make pin` does not apply here: {pin_instead}"
            ),
        )
    ]
