"""`make pin`: hold a deployment on the build its node runs, by manifest digest, in its TOML.

The default image `vllm/vllm-tpu:nightly` moves every day: two deploys of the same commit can
serve different vLLM builds, memory layouts and compile caches. The node reports the RepoDigest
it pulled (tpudeploy/nodebuild.py); this writes it into the deployment's file as
`image = "repo@sha256:..."` with the reported versions beside it as a comment, by a targeted
line edit that keeps every other line, and proves the result by parsing it again.
"""

from __future__ import annotations

import datetime
import re
import tomllib
from pathlib import Path
from typing import Any, TextIO

from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.errors import UserError
from tpudeploy.nodebuild import CONFIG_BLOB_ID, REPO_DIGEST, Build, parse_build
from tpudeploy.render import image_repository

# The tables `make pin` edits, and the guest-attribute role of each image.
TABLES = {"vllm": "vllm", "proxy": "proxy"}
_HEADER = re.compile(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(?:#.*)?$")
_IMAGE_LINE = re.compile(r"^(\s*)image\s*=")


class PinError(UserError):
    """`make pin` cannot pin; the message says why and what to run."""


def pin_reference(role: str, configured: str, build: Build) -> str:
    """`repo@sha256:...` for the image the node pulled, or PinError naming why not."""
    digest = build.digest
    key = f"{TABLES[role]}.image"
    if CONFIG_BLOB_ID.fullmatch(digest):
        raise PinError(
            f"{key}: the node reported {digest!r}, a bare sha256: that is an image ID (the "
            "config blob `docker images` prints), and `docker pull` by it fails with "
            "'unexpected media type' (build log). make pin needs the RepoDigest "
            "(repo@sha256:...): reboot the node on the current startup script (make deploy)"
        )
    if not REPO_DIGEST.fullmatch(digest):
        raise PinError(
            f"{key}: the node has no registry digest for {build.image!r} (reported "
            f"{digest or 'none'}; a locally built image has none). Push it to a registry and "
            f"set {key} = 'repo@sha256:...' yourself"
        )
    repository, _, hexdigest = digest.partition("@sha256:")
    if repository != image_repository(configured):
        raise PinError(
            f"{key}: the node's digest is for {repository!r}, the config names "
            f"{image_repository(configured)!r}; make deploy, wait for ready, then make pin"
        )
    if role == "proxy":
        # The proxy keeps its version tag beside the digest: the node checks that the nginx it
        # runs is the version the tag names (tpudeploy.config.proxy, issue 21).
        tag = configured.split("@", 1)[0][len(repository) :]
        return f"{repository}{tag}@sha256:{hexdigest}"
    return f"{repository}@sha256:{hexdigest}"


def _comment(build: Build, today: datetime.date) -> str:
    # A TOML comment ends at the line: keep it to printable characters.
    text = "".join(c for c in build.version_text() if c.isprintable())
    return f"{text}; make pin {today.isoformat()}"


def edit_toml(text: str, images: dict[str, tuple[str, str]]) -> str:
    """`text` with `image = "<ref>"  # <comment>` set in each [table] of `images`; every other
    line as it was. A table that is absent is appended; an inline table is refused."""
    lines = text.splitlines(keepends=True)
    todo = dict(images)
    table = ""
    out: list[str] = []
    inserted_at: dict[str, int] = {}
    for line in lines:
        header = _HEADER.match(line)
        if header and not line.lstrip().startswith("[["):
            table = header.group(1)
            out.append(line)
            if table in todo:
                inserted_at[table] = len(out)
            continue
        m = _IMAGE_LINE.match(line)
        if m and table in todo:
            ref, comment = todo.pop(table)
            inserted_at.pop(table, None)
            out.append(f'{m.group(1)}image = "{ref}"  # {comment}\n')
            continue
        root = re.match(r"^\s*(\w+)\s*=\s*\{", line)
        if not table and root and root.group(1) in todo:
            raise PinError(
                f"{root.group(1)} is an inline table; write it as a [{root.group(1)}] table so "
                "make pin can edit its image line"
            )
        out.append(line)
    # Tables without an image line: right after their header, in reverse to keep the indexes.
    for name, at in sorted(inserted_at.items(), key=lambda item: -item[1]):
        ref, comment = todo.pop(name)
        out.insert(at, f'image = "{ref}"  # {comment}\n')
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    for name, (ref, comment) in todo.items():
        out.append(f'\n[{name}]\nimage = "{ref}"  # {comment}\n')
    return "".join(out)


def _without_images(data: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in data.items()}
    for table in TABLES.values():
        if isinstance(out.get(table), dict):
            out[table] = {k: v for k, v in out[table].items() if k != "image"}
            if not out[table]:
                out.pop(table)
    return out


def verified_edit(text: str, images: dict[str, tuple[str, str]], *, source: str) -> str:
    """edit_toml, proved: the result parses, holds each new image, differs from `text` in those
    keys only, and is a valid deployment config."""
    before = tomllib.loads(text)
    after_text = edit_toml(text, images)
    try:
        after = tomllib.loads(after_text)
    except tomllib.TOMLDecodeError as exc:
        raise PinError(
            f"{source}: the pinned file would not parse ({exc}); left unchanged"
        ) from None
    for table, (ref, _) in images.items():
        if (after.get(table) or {}).get("image") != ref:
            raise PinError(f"{source}: could not place {table}.image; left unchanged")
    if _without_images(after) != _without_images(before):
        raise PinError(f"{source}: the edit would change more than the images; left unchanged")
    parse_config(after, source=source)
    return after_text


def pin(
    cfg: DeployConfig,
    attributes: dict[str, str],
    path: Path,
    *,
    out: TextIO,
    today: datetime.date | None = None,
) -> int:
    """Write the node's digests into `path`; PinError when the node is not ready or has none."""
    phase = attributes.get("phase", "no-report")
    if phase != "ready":
        raise PinError(
            f"the node is not ready (phase {phase}): make pin reads the build of a node that "
            "booted; run make wait, then make pin"
        )
    builds = parse_build(attributes.get("build", ""))
    if not builds:
        raise PinError(
            "the node reported no build (tpudeploy/build): its startup script predates make "
            "pin; make deploy to boot it on the current one, then make pin"
        )
    configured = {"vllm": cfg.vllm.image, "proxy": cfg.proxy.image}
    images: dict[str, tuple[str, str]] = {}
    for role, table in TABLES.items():
        build = builds.get(role)
        if build is None:
            raise PinError(f"the node reported no build for its {role} image; make deploy")
        if build.image != configured[role]:
            raise PinError(
                f"{table}.image = {configured[role]!r}, but the node runs {build.image!r}: "
                "make deploy first, then make pin"
            )
        ref = pin_reference(role, configured[role], build)
        if ref != configured[role]:
            images[table] = (ref, _comment(build, today or datetime.date.today()))
    if not images:
        print(f"{path}: already pinned to the digests the node runs", file=out)
        return 0
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(verified_edit(text, images, source=str(path)), encoding="utf-8")
    for table, (ref, comment) in images.items():
        print(f"{path}: {table}.image = {ref!r}  # {comment}", file=out)
    print(
        "commit the file to hold this build: every deploy from it pulls these digests (the "
        "compile-cache key is unchanged, so the cache stays warm; make diff shows the "
        "startup-script change the next deploy applies)",
        file=out,
    )
    return 0
