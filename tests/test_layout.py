"""The package's shape: short modules, and what must import with the standard library alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
    from tpudeploy.gcp.secretmanager import SecretStoreError
    from tpudeploy.gcp.storage import CacheBucketError
    from tpudeploy.planner.cost import NoPricesError
    from tpudeploy.smoke import SmokeError
    from tpudeploy.tpuvm.queued_resource.errors import QueuedResourceError
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
