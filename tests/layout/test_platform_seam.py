"""Issue 25, then issue 35: what differs by platform goes through one seam
(tpudeploy/platform.py, the Platform registry) and, for what the config itself derives and
validates, through its per-platform sections (tpudeploy/config/platforms.py), not through
`if cfg.platform == ...` spread over modules. Every branch on the platform in the shipped code
is found by its syntax tree: a comparison of a `.platform` value or of `getattr(x,
"platform")`, a comparison with a platform's name, a lookup keyed by `.platform`, a table keyed
by platform names. Only the places listed may hold one."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PLATFORM_NAMES = frozenset({"tpu-vm", "gke"})

# Where a branch on the platform is the point, with why. (The config's sections,
# tpudeploy/config/platforms.py, are keyed by each section's own name and need no exception.)
ALLOWED = {
    # The seam: the registry of Platforms by name, and the lookup of one.
    "tpudeploy/platform.py": "the seam picks a Platform by name",
    # The rehearsal's own --platform argument picks which lifecycle it runs (no config yet).
    "tools/rehearsal/__main__.py": "make rehearse PLATFORM=... picks the lifecycle",
    # GKE is not in the GitOps pipeline yet (its deploy identity's grants are the TPU VM's),
    # and the pipeline's helpers run under a bare python3, below the seam's pydantic: this
    # skip goes when the pipeline learns GKE (issue 41).
    "tpudeploy/gitops/deployments.py": "the pipeline skips GKE files (not built yet)",
}


def _is_platform_value(node: ast.AST) -> bool:
    """`x.platform`, or `getattr(x, "platform", ...)`."""
    if isinstance(node, ast.Attribute) and node.attr == "platform":
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == "platform"
    )


def _is_platform_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in PLATFORM_NAMES


def _platform_comparisons(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            # `kind == "gke"` whatever the variable is called (a membership test such as
            # `"gke" in cfg.model_fields_set` asks about the [gke] table, not the platform).
            named = any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops) and any(
                _is_platform_name(s) for s in sides
            )
            if named or any(_is_platform_value(s) for s in sides):
                lines.append(node.lineno)
        if isinstance(node, ast.Match) and _is_platform_value(node.subject):
            lines.append(node.lineno)
        # TABLE[cfg.platform]: a table keyed by platform is a branch in data.
        if isinstance(node, ast.Subscript) and _is_platform_value(node.slice):
            lines.append(node.lineno)
        if isinstance(node, ast.Dict) and any(
            k is not None and _is_platform_name(k) for k in node.keys
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
        # issue 35: tune's refusal read the platform through getattr, which no check saw
        'if getattr(base, "platform", "tpu-vm") != "tpu-vm":\n    pass\n',
        'if kind == "tpu-vm":\n    pass\n',
        # and three tables keyed by platform did the branching in data
        '_STOPS = {"tpu-vm": ("TPU node", "TPU nodes"), "gke": ("GKE cluster", "x")}\n',
        "perms = STOP_PERMISSIONS[cfg.platform]\n",
    ):
        assert _platform_comparisons(ast.parse(source)), source
    for source in (
        "p = platform_for(cfg).name\n",
        'tabled = "gke" in cfg.model_fields_set\n',
        "nouns = platform_for(cfg).stop_nouns\n",
    ):
        assert not _platform_comparisons(ast.parse(source)), source


def test_every_allowed_place_still_needs_its_exception() -> None:
    """An exception whose branch is gone is removed, so the list never grows stale."""
    for rel in ALLOWED:
        tree = ast.parse((REPO_ROOT / rel).read_text(encoding="utf-8"))
        assert _platform_comparisons(tree), rel
