"""The package's shape: short modules, and what must import with the standard library alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500


def module_lengths() -> dict[str, int]:
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for folder in ("tpudeploy", "stacks")
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def test_no_module_is_over_500_lines() -> None:
    lengths = module_lengths()
    assert len(lengths) > 20  # the walk found the packages
    too_long = {path: lines for path, lines in lengths.items() if lines > MAX_LINES}
    assert not too_long, f"split these along their seams (at most {MAX_LINES} lines): {too_long}"


@pytest.mark.parametrize("module", ["tpudeploy.gitops", "tpudeploy.tpuvm.queued_resource"])
def test_imports_with_the_standard_library_alone(module: str) -> None:
    """The workflows run `python3 -m tpudeploy.gitops` before `make install`, and gitops reads
    the queued resource's timeouts: no third-party package may load at import time."""
    # -S: no site module, so no site-packages (the venv's included); -E: no PYTHON* variables.
    code = (
        "import importlib, importlib.util, sys\n"
        "assert importlib.util.find_spec('googleapiclient') is None, 'site-packages visible'\n"
        f"importlib.import_module({module!r})\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-E", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_errors_imports_nothing_of_tpudeploy() -> None:
    """errors.py is imported by every command's module: if it imported their error classes back
    (as it once did, to recognise them), each import of a command would run through a circle.
    The commands' error types derive from errors.UserError instead."""
    import ast

    tree = ast.parse((ROOT / "tpudeploy" / "errors.py").read_text(encoding="utf-8"))
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert imported, "the walk found errors.py's imports"
    assert not [m for m in imported if m and m.split(".")[0] == "tpudeploy"], imported


def test_the_commands_errors_are_user_errors() -> None:
    """What a user can cause prints as one line with its fix, not as a bug: each command's own
    error type is a UserError, so errors.explain needs no list of them."""
    from tpudeploy.config import ConfigError
    from tpudeploy.endpoint import FrontDoorError
    from tpudeploy.errors import UserError, explain
    from tpudeploy.gcp.api_errors import QueuedResourceError
    from tpudeploy.gcp.secretmanager import SecretStoreError
    from tpudeploy.gcp.storage import CacheBucketError
    from tpudeploy.planner.cost import NoPricesError
    from tpudeploy.smoke import SmokeError
    from tpudeploy.tpuvm.recover import RecoverError

    for cls in (
        CacheBucketError,
        FrontDoorError,
        NoPricesError,
        QueuedResourceError,
        RecoverError,
        SecretStoreError,
        SmokeError,
    ):
        assert issubclass(cls, UserError), cls
        assert explain(cls("the fix")) == ("error: the fix", 1)
    assert explain(ConfigError("deploy.toml", ["zone: bad"]))[1] == 2


# Files that may share a base name: Python's own (__init__, __main__), the same role in the
# two platform packages (tpudeploy/tpuvm/ and tpudeploy/gke/: frontdoor.py, deadline_target.py,
# platform.py), and the seam whose protocol those platform.py files implement.
PYTHON_NAMES = {"__init__.py", "__main__.py"}
PLATFORM_PACKAGES = ("tpudeploy/tpuvm", "tpudeploy/gke")
SEAM_ROLE = {"platform.py": "tpudeploy/platform.py"}


def same_named(paths: list[str]) -> dict[str, list[str]]:
    """Base names held by more than one product file, where the rule above does not allow it."""
    by_name: dict[str, list[str]] = {}
    for path in paths:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    found = {}
    for name, where in by_name.items():
        if name in PYTHON_NAMES or len(where) < 2:
            continue
        rest = [p for p in where if p != SEAM_ROLE.get(name)]
        in_packages = [p for p in rest if p.rsplit("/", 1)[0] in PLATFORM_PACKAGES]
        if len(rest) == len(in_packages) == len({p.rsplit("/", 1)[0] for p in rest}) <= 2:
            continue  # one file per platform package: the same role in each
        found[name] = where
    return found


def test_no_two_product_files_share_a_base_name() -> None:
    """Issue 35: five files were called deadline.py and none said which deadline; a name says
    where a thing is, so a second file of that name is a different thing to rename."""
    paths = sorted(module_lengths())
    assert "tpudeploy/gke/frontdoor.py" in paths
    assert same_named([*paths, "main.py"]) == {}


def test_the_naming_rule_finds_what_it_must() -> None:
    assert same_named(["tpudeploy/deadline.py", "stacks/deadline.py"]) == {
        "deadline.py": ["tpudeploy/deadline.py", "stacks/deadline.py"]
    }
    assert same_named(["tpudeploy/tpuvm/deadline.py", "tpudeploy/deadline.py"])
    assert not same_named(["tpudeploy/tpuvm/frontdoor.py", "tpudeploy/gke/frontdoor.py"])
    assert not same_named(
        ["tpudeploy/platform.py", "tpudeploy/tpuvm/platform.py", "tpudeploy/gke/platform.py"]
    )


def shadowing_aliases(root: Path) -> list[str]:
    """`import a.b as c` / `from a import b as c` where c is another module's name in the
    package (tpudeploy.gke.cluster was imported `as names`, hiding tpudeploy.names)."""
    import ast

    module_names = {
        p.stem if p.name != "__init__.py" else p.parent.name
        for folder in ("tpudeploy", "stacks")
        for p in (root / folder).rglob("*.py")
    }
    found = []
    for folder in ("tpudeploy", "stacks", "tools", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    for alias in node.names:
                        shown = alias.asname
                        renamed = shown and shown != alias.name.rsplit(".", 1)[-1]
                        if renamed and shown in module_names:
                            rel = path.relative_to(root)
                            found.append(f"{rel}:{node.lineno}: {alias.name} as {shown}")
    return found


def test_no_import_alias_hides_another_module() -> None:
    assert shadowing_aliases(ROOT) == []


def test_the_alias_check_finds_what_it_must(tmp_path: Path) -> None:
    (tmp_path / "tpudeploy" / "gke").mkdir(parents=True)
    (tmp_path / "tpudeploy" / "names.py").write_text("")
    (tmp_path / "tpudeploy" / "gke" / "ops.py").write_text(
        "from tpudeploy.gke import identifiers as names\n"
    )
    (tmp_path / "stacks").mkdir()
    assert shadowing_aliases(tmp_path) == ["tpudeploy/gke/ops.py:1: identifiers as names"]
