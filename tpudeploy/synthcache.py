"""Reuse the last synthesis when nothing that shapes it changed.

`cdktf deploy`, `diff` and `destroy` synthesize first, and loading the google-beta bindings costs
7-12 s of every run (DESIGN: the 33 MB jsii assembly). The output is a pure function of the
config file, the code and templates that build the stacks, the pinned packages and the output
directory, so `main.py` keeps a fingerprint of those inputs and of what it wrote next to the
output; an identical fingerprint and untouched output mean the JSON on disk is what a new synth
would write. `TPUDEPLOY_SYNTH_CACHE=0` synthesizes every time.

Two configs of one deployment (the upstream watch's pinned and candidate builds, deployed in
turn into the same folder) would each undo the other's synth: so each synth's JSON is also kept
in the folder, under KEPT/<inputs>, the last KEEP of them, and put back when its inputs return.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

STAMP = ".tpudeploy-synth.json"
KEPT = ".tpudeploy-synths"
# The watch's sweep alternates two configs (tpudeploy/tune/plan.py schedule); a few more cover
# a `make deploy` of the deployment's own config between. Each copy is the stacks' JSON (~300 KB).
KEEP = 4
DISABLE_ENV = "TPUDEPLOY_SYNTH_CACHE"
REPO_ROOT = Path(__file__).resolve().parent.parent
# Everything the cdktf app reads: its entry point, the stacks, the domain package (rendering,
# config, specs), the boot-script templates and the pins of the packages that synthesize.
SOURCES = (
    "main.py",
    "cdktf.json",
    "requirements.txt",
    "requirements-nodeps.txt",
    "stacks",
    "tpudeploy",
    "templates",
)
# Read by config loading or passed by the cdktf CLI into the app. TPUDEPLOY_RUNG picks a capacity
# ladder's rung (config/ladder.py): each rung is another node, zone and deadline job.
ENV_INPUTS = ("GOOGLE_CLOUD_PROJECT", "CDKTF_CONTEXT_JSON", "TPUDEPLOY_RUNG")
CONTEXT_ENV = "CDKTF_CONTEXT_JSON"
# The cdktf CLI always passes cdktfRelativeModules (cli-core synth-stack.js: cdktf.json's local
# terraformModules); the app reads it only for a module with a relative source
# (terraform-module-asset.js), so an empty list is no context. Without this, `tpudeploy recover`
# (main.py run directly, no context) and the CLI's synth in one `make deploy` never shared a synth.
_NO_RELATIVE_MODULES: dict[str, list[str]] = {"cdktfRelativeModules": []}
# The walk's record of the rung that runs, beside the config (config/ladder.py record_path):
# without TPUDEPLOY_RUNG, loading reads it.
RUNG_RECORDS = "tpudeploy.*.rung.json"


def _context(text: str) -> str:
    """CDKTF_CONTEXT_JSON as the app reads it: empty when it says nothing but that no module is
    local; anything else (or unparsable) as given, so it keeps changing the key."""
    try:
        context = json.loads(text) if text else {}
    except ValueError:
        return text
    return "" if context in ({}, _NO_RELATIVE_MODULES) else text


def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    for name in SOURCES:
        path = root / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [
                p for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
            ]
    return found


def input_key(config: Path, outdir: Path, *, root: Path = REPO_ROOT) -> str:
    """A digest of every input of a synthesis into `outdir` from `config`."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    add("python", sys.version.encode())
    add("outdir", str(outdir.resolve()).encode())
    add("config-path", str(config.resolve()).encode())
    add("config", config.read_bytes() if config.is_file() else b"<missing>")
    for name in ENV_INPUTS:
        value = os.environ.get(name, "")
        add(f"env:{name}", (_context(value) if name == CONTEXT_ENV else value).encode())
    for path in sorted(config.resolve().parent.glob(RUNG_RECORDS)):
        add(f"rung:{path.name}", path.read_bytes())
    for path in _files(root):
        add(str(path.relative_to(root)), path.read_bytes())
    return digest.hexdigest()


def _outputs(outdir: Path) -> str:
    """A digest of what a synthesis left in `outdir` (manifest and every stack's JSON)."""
    digest = hashlib.sha256()
    manifest = outdir / "manifest.json"
    paths = [manifest, *sorted(outdir.glob("stacks/*/cdk.tf.json"))]
    for path in paths:
        if not path.is_file():
            return ""
        digest.update(str(path.relative_to(outdir)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def fresh(outdir: Path, key: str) -> bool:
    """True when `outdir` holds, untouched, the output of a synthesis with inputs `key`."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return False
    try:
        stamp = json.loads((outdir / STAMP).read_text())
    except (OSError, ValueError):
        return False
    outputs = _outputs(outdir)
    return bool(outputs) and stamp == {"inputs": key, "outputs": outputs}


def record(outdir: Path, key: str) -> None:
    """Remember that `outdir` now holds the output of a synthesis with inputs `key`."""
    if os.environ.get(DISABLE_ENV, "1") == "0" or not outdir.is_dir():
        return  # caching is off, or there is no output to vouch for
    (outdir / STAMP).write_text(json.dumps({"inputs": key, "outputs": _outputs(outdir)}) + "\n")


def _json_files(outdir: Path) -> list[Path]:
    return [outdir / "manifest.json", *sorted(outdir.glob("stacks/*/cdk.tf.json"))]


def keep(outdir: Path, key: str) -> None:
    """Keep a copy of the synthesis with inputs `key` now in `outdir`; the oldest beyond KEEP go."""
    if os.environ.get(DISABLE_ENV, "1") == "0" or not _outputs(outdir):
        return
    kept = outdir / KEPT
    copy = kept / key
    shutil.rmtree(copy, ignore_errors=True)
    for path in _json_files(outdir):
        target = copy / path.relative_to(outdir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    (copy / STAMP).write_text(json.dumps({"inputs": key, "outputs": _outputs(copy)}) + "\n")
    older = sorted((p for p in kept.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    for stale in older[:-KEEP]:
        shutil.rmtree(stale, ignore_errors=True)


def restore(outdir: Path, key: str) -> bool:
    """Put back the kept synthesis with inputs `key`, untouched since it was kept; True when it
    is now in `outdir` (and recorded there), False when a synthesis must run."""
    copy = outdir / KEPT / key
    if not fresh(copy, key):
        return False
    # As a synthesis does (stacks/app.py prune_other_stacks): no other stack's folder stays.
    stacks = {p.parent.name for p in copy.glob("stacks/*/cdk.tf.json")}
    for folder in outdir.glob("stacks/*"):
        if folder.is_dir() and folder.name not in stacks:
            shutil.rmtree(folder)
    for path in _json_files(copy):
        target = outdir / path.relative_to(copy)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    os.utime(copy)  # the most recently used is kept longest
    record(outdir, key)
    return fresh(outdir, key)
