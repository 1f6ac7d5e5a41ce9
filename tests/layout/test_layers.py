"""Issue 35: the import-layer contract (tools/layers.py, run by `make lint`) holds for the
checkout, and fails on what it exists to catch: an upward import hidden inside a function, one
platform importing the other, a circle closed by a late import, a module nobody placed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools import layers
from tpudeploy import platform

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the contract reads (tpudeploy/, stacks/, main.py), made once."""
    root = tmp_path_factory.mktemp("checkout")
    for folder in layers.FOLDERS:
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for entry in layers.ENTRY_POINTS:
        shutil.copy(ROOT / entry, root / entry)
    return root


def _with(scratch: Path, rel: str, text: str, tmp_path: Path) -> Path:
    """A second copy of the scratch checkout with `text` appended to `rel`."""
    root = tmp_path / "edited"
    shutil.copytree(scratch, root)
    path = root / rel
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")
    return root


def test_the_checkout_keeps_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert layers.main([]) == 0, capsys.readouterr().err
    assert "no upward import, no circle" in capsys.readouterr().out


def test_the_finder_reads_every_import_of_the_checkout() -> None:
    """The contract is only as good as its reader: the seam's imports of both platforms, and a
    late import of the CLI's, are among what it found."""
    found = {(i.source, i.target, i.where) for i in layers.imports(ROOT)}
    assert ("tpudeploy.platform", "tpudeploy.gke.platform", "top") in found
    assert ("tpudeploy.platform", "tpudeploy.tpuvm.platform", "top") in found
    assert ("tpudeploy.cli", "tpudeploy.tpuvm.recover", "late") in found
    assert ("tpudeploy.platform", "tpudeploy.endpoint", "type-checking") in found
    assert len(layers.modules(ROOT)) > 100


def test_an_upward_import_inside_a_function_fails(
    scratch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What config/loading.py once did: call the guard rails at run time, from below them."""
    late = "\n\ndef _later(cfg):\n    from tpudeploy import policy\n\n    return policy\n"
    root = _with(scratch, "tpudeploy/config/loading.py", late, tmp_path)
    assert layers.main(["--root", str(root)]) == 1
    err = capsys.readouterr().err
    lines = len((scratch / "tpudeploy/config/loading.py").read_text().splitlines())
    assert (
        f"tpudeploy/config/loading.py:{lines + 4}: tpudeploy.config.loading imports "
        "tpudeploy.policy (inside a function): upward, from config to policy"
    ) in err
    # The late import also closes a circle (policy imports the config package).
    assert "circle of" in err and "tpudeploy.config.loading" in err


def test_one_platform_importing_the_other_fails(
    scratch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    late = "\n\ndef _gke_names():\n    from tpudeploy.gke import cluster\n\n    return cluster\n"
    root = _with(scratch, "tpudeploy/tpuvm/recover.py", late, tmp_path)
    assert layers.main(["--root", str(root)]) == 1
    assert "tpudeploy.tpuvm and tpudeploy.gke never import each other" in capsys.readouterr().err


def test_a_stack_importing_the_cli_fails(
    scratch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _with(scratch, "stacks/app.py", "\nfrom tpudeploy.cli import main as _main\n", tmp_path)
    assert layers.main(["--root", str(root)]) == 1
    assert "forbidden (the stacks take what they print" in capsys.readouterr().err


def test_a_module_in_no_layer_is_a_decision_to_make(
    scratch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "edited"
    shutil.copytree(scratch, root)
    (root / "tpudeploy" / "stray.py").write_text('"""Nobody placed me."""\n', encoding="utf-8")
    assert layers.main(["--root", str(root)]) == 2
    assert "module tpudeploy.stray is in no layer" in capsys.readouterr().err


def test_the_config_package_validates_shape_only() -> None:
    """A file that breaks a guard rail only is a valid config to tpudeploy.config (status and
    destroy must still read it); the seam's load adds the guard rails to a failing file."""
    from tpudeploy.config import ConfigError, parse_config

    assert parse_config({"vllm": {"gpu_memory_utilization": 0.95}}).vllm.gpu_memory_utilization
    with pytest.raises(ConfigError) as shape_only:
        parse_config({"vllm": {"gpu_memory_utilization": 0.95, "max_model_len": "x"}})
    assert [p.split(" = ")[0] for p in shape_only.value.problems] == ["vllm.max_model_len"]
    assert shape_only.value.judged is not None
    with pytest.raises(ConfigError) as both:
        platform.parse_config(
            {"vllm": {"gpu_memory_utilization": 0.95, "max_model_len": "x"}}, source="x.toml"
        )
    keys = [p.removeprefix("error: ").split(" = ")[0] for p in both.value.problems]
    assert keys == ["vllm.max_model_len", "vllm.gpu_memory_utilization"]
