"""Issue 25: ops commands that differ by platform go through one seam (tpudeploy/platform.py),
not through `if cfg.platform == ...` spread over modules. Every comparison of a `.platform`
value in the shipped code is found by its syntax tree; only the places listed may hold one."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

# Where a comparison on the platform is the point, with why. (The seam itself picks by
# lookup, PLATFORMS[cfg.platform], and needs no exception.)
ALLOWED = {
    # Validation of the config's own keys ([gke] only with platform = "gke", the TPU VM's zone
    # and run-end rules otherwise): upstream of the seam, which imports the validated config.
    "tpudeploy/config/loading.py": "which keys a config may set depends on its platform",
    # The config's derived values: which stack holds the deadline, what it deletes, its role's
    # id, the default run duration. Facts of the config, read by both platforms' code.
    "tpudeploy/config/schema.py": "the config's derived names and durations",
    # The rehearsal's own --platform argument picks which lifecycle it runs (no config yet).
    "tools/rehearsal/__main__.py": "make rehearse PLATFORM=... picks the lifecycle",
    # GKE is not in the GitOps pipeline yet (its deploy identity's grants are the TPU VM's):
    # this skip goes when the pipeline learns GKE.
    "tpudeploy/gitops/deployments.py": "the pipeline skips GKE files (not built yet)",
}


def _platform_comparisons(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "platform" for s in sides):
                lines.append(node.lineno)
        if isinstance(node, ast.Match) and (
            isinstance(node.subject, ast.Attribute) and node.subject.attr == "platform"
        ):
            lines.append(node.lineno)
    return lines


def _shipped() -> list[Path]:
    files = [REPO_ROOT / "main.py"]
    for folder in ("tpudeploy", "stacks", "tools"):
        files += sorted((REPO_ROOT / folder).rglob("*.py"))
    return files


def test_no_module_but_the_seam_branches_on_the_platform() -> None:
    found = {}
    for path in _shipped():
        rel = path.relative_to(REPO_ROOT).as_posix()
        lines = _platform_comparisons(ast.parse(path.read_text(encoding="utf-8")))
        if lines and rel not in ALLOWED:
            found[rel] = lines
    assert found == {}, (
        f"branch through tpudeploy.platform (a Platform method) instead of on .platform: {found}"
    )


def test_the_finder_finds_what_it_must() -> None:
    """The check is only as good as its finder: each spelling of the old branch is caught."""
    for source in (
        'if cfg.platform == "gke":\n    pass\n',
        'x = "gke" != config.platform\n',
        'ok = dep.platform in ("gke",)\n',
        "match cfg.platform:\n    case 'gke':\n        pass\n",
    ):
        assert _platform_comparisons(ast.parse(source)), source
    assert not _platform_comparisons(ast.parse("p = platform_for(cfg).name\n"))


def test_every_allowed_place_still_needs_its_exception() -> None:
    """An exception whose branch is gone is removed, so the list never grows stale."""
    for rel in ALLOWED:
        tree = ast.parse((REPO_ROOT / rel).read_text(encoding="utf-8"))
        assert _platform_comparisons(tree), rel
