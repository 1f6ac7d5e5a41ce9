"""Supply chain (issue 22 item 11): every install is hash-checked, and the jobs that mint a deploy
token install only what they run."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import yaml

from tests.gitops.test_workflows import FILES, load

ROOT = Path(__file__).resolve().parents[2]
# One requirement: `name==version` then its `--hash=sha256:` continuation lines.
REQUIREMENT = re.compile(
    r"^([A-Za-z0-9][\w.-]*)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", re.M
)
# What the deploy jobs never need, and would hand a deploy token to if installed.
TOOLS = {"checkov", "pytest", "mypy", "ruff", "zizmor", "mutmut", "check-jsonschema", "coverage"}


def pins(name: str) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) for every requirement of a requirements file."""
    text = (ROOT / name).read_text()
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    found = {
        m[1].lower().replace("_", "-").replace(".", "-"): (m[2], m[3].count("--hash="))
        for m in REQUIREMENT.finditer(body + "\n")
    }
    # Nothing else on a requirement line: every `==` line was matched with its hashes.
    assert len(found) == sum(1 for line in body.splitlines() if "==" in line), name
    return found


def test_every_requirement_is_pinned_with_hashes() -> None:
    """pip's --require-hashes refuses a file without them; a pin without one cannot install."""
    full = pins("requirements.txt")
    assert len(full) > 100
    assert all(count >= 1 for _, count in full.values())
    assert pins("requirements-nodeps.txt") == {"tf": ("1.2.0", 1)}
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes" in makefile.split("PIP_INSTALL =", 1)[1].splitlines()[0]


def test_the_deploy_set_is_a_subset_of_the_full_one_without_any_tool() -> None:
    full, deploy = pins("requirements.txt"), pins("requirements-deploy.txt")
    assert len(deploy) < len(full) / 3
    assert {name: full[name][0] for name in deploy} == {n: v for n, (v, _) in deploy.items()}
    assert not TOOLS & set(deploy)


def _imports(paths: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"tpudeploy", "stacks", "main", "tools"}


def test_the_deploy_set_covers_what_the_deploy_jobs_import() -> None:
    """Every third-party module that main.py, stacks/ and tpudeploy/ import (bench plots and
    their matplotlib aside: no deploy job draws them; nor GKE's bench transport and its aiohttp:
    no deploy job benches) comes from a distribution in the set. The GKE stacks' too: GKE
    deployments are in the pipeline (issue 41), and their serving stack needs the Kubernetes
    bindings."""
    sources = [ROOT / "main.py", *(ROOT / "stacks").rglob("*.py")]
    not_deployed = {ROOT / "tpudeploy" / "gke" / "podexec.py"}
    sources += [
        p
        for p in (ROOT / "tpudeploy").rglob("*.py")
        if p.name not in ("plots.py", "ratio_plots.py") and p not in not_deployed
    ]
    deploy = set(pins("requirements-deploy.txt"))
    where = packages_distributions()
    missing = {
        module: where.get(module)
        for module in _imports(sources)
        if not {d.lower().replace("_", "-").replace(".", "-") for d in where.get(module, [])}
        & deploy
    }
    assert not missing


def test_jobs_that_mint_a_deploy_token_install_the_deploy_set() -> None:
    for path in FILES:
        for name, job in load(path.name)["jobs"].items():
            if job.get("permissions", {}).get("id-token") != "write":
                continue
            runs = [s.get("run", "") for s in job.get("steps", [])]
            if any("make install" in r for r in runs) or any("make " in r for r in runs):
                assert job.get("env", {}).get("REQUIREMENTS") == "requirements-deploy.txt", (
                    path.name,
                    name,
                )
    # The checks job (no token) still installs everything it lints and tests with.
    checks = yaml.safe_load((ROOT / ".github/workflows/checks.yml").read_text())
    assert all("REQUIREMENTS" not in job.get("env", {}) for job in checks["jobs"].values())
