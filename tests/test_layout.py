"""The package's shape: what must import with the standard library alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module", ["tpudeploy.gitops", "tpudeploy.queued_resource"])
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
