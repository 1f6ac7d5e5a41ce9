"""Docker values the config passes to the node: image references, container names, sizes."""

from __future__ import annotations

import re

IMAGE_RE = re.compile(
    r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)
CONTAINER_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}")
SHM_SIZE_RE = re.compile(r"\d+[bkmg]b?")


def check_image(v: str) -> str:
    if not IMAGE_RE.match(v):
        raise ValueError(
            "not a container image reference; write repository[:tag][@sha256:digest], "
            "e.g. vllm/vllm-tpu:nightly"
        )
    return v


def check_container_name(v: str) -> str:
    if not CONTAINER_NAME_RE.fullmatch(v):
        raise ValueError("not a docker container name; use letters, digits, '_', '.' and '-'")
    return v


def check_shm_size(v: str) -> str:
    if not SHM_SIZE_RE.fullmatch(v):
        raise ValueError("not a docker size; write e.g. 10gb (the build log's value) or 512m")
    return v
