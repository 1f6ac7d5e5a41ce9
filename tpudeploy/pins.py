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
