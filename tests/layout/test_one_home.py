"""Each build-log fact and each GCP naming rule is defined once; the config model is a leaf.

A copy that drifts is how the flex-start zones came to disagree (data allowed us-central1-a,
prose in two files said us-west4-a only). These tests read the source itself: a literal that
restates a fact outside its home module fails here, naming the file and the line.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tpudeploy import facts, names

SOURCES = [
    *sorted(
        p for folder in ("tpudeploy", "stacks", "tools") for p in (REPO_ROOT / folder).rglob("*.py")
    ),
    REPO_ROOT / "main.py",
]

# Distinctive values whose only home is tpudeploy/facts.py.
FACT_VALUES: dict[object, str] = {
    facts.ZONE: "ZONE",
    facts.V5E.runtime_version: "V5E.runtime_version",
    facts.V5E.machine_type: "V5E.machine_type",
    facts.MODEL: "MODEL",
    facts.IMAGE: "IMAGE",
    facts.PUBLISHED: "PUBLISHED",
    facts.IAP_SSH_RANGE: "IAP_SSH_RANGE",
    facts.KV_POOL_TOKENS: "KV_POOL_TOKENS",
    facts.SAFE_CLIENTS_X_CONTEXT: "SAFE_CLIENTS_X_CONTEXT",
    facts.COLD_BOOT_S: "COLD_BOOT_S",
    facts.WARM_BOOT_S: "WARM_BOOT_S",
    facts.COMPILE_S: "COMPILE_S",
    facts.MEASURED_TPOT_S: "MEASURED_TPOT_S",
    0.78: "SAFE_POOL_FRACTION (as a rounded copy)",
    **{
        rate: f"PRICES[{region}]"
        for region, sheet in facts.PRICES.items()
        for rate in sheet.per_chip_hour.values()
    },
    facts.AGGREGATE_TOK_S[(128, 64)]: "AGGREGATE_TOK_S",
    facts.AGGREGATE_TOK_S[(1024, 64)]: "AGGREGATE_TOK_S",
    "us-central1-a": "FLEX_START_ZONES",
}
# Naming rules whose only home is tpudeploy/names.py: the pattern fragments they are built from.
NAME_FRAGMENTS = {
    "[a-z0-9-]{4,28}": "PROJECT_ID / SERVICE_ACCOUNT_ID",
    "[a-z0-9-]{1,22}": "DEPLOYMENT_NAME",
    "[a-z0-9_-]{0,62}": "LABEL_KEY",
    "[a-z0-9_-]{0,63}": "LABEL_VALUE",
    "[a-z0-9_.-]{1,61}": "BUCKET",
    "[-a-z0-9]{0,61}": "GCE_NAME",
    "auth/cloud-platform": "CLOUD_PLATFORM_SCOPE",
    ".iam.gserviceaccount.com": "service_account_email()",
}
HOMES = {REPO_ROOT / "tpudeploy" / "facts.py", REPO_ROOT / "tpudeploy" / "names.py"}


def _constants(path: Path) -> Iterator[tuple[int, object]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docstrings:
            yield node.lineno, node.value


def _copies() -> Iterator[str]:
    for path in SOURCES:
        if path in HOMES:
            continue
        rel = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path.name
        for line, value in _constants(path):
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float | str) and value in FACT_VALUES:
                yield f"{rel}:{line}: {value!r} restates facts.{FACT_VALUES[value]}"
            if isinstance(value, str):
                for fragment, rule in NAME_FRAGMENTS.items():
                    if fragment in value:
                        yield f"{rel}:{line}: {value!r:.60} restates names.{rule}"


def test_no_module_restates_a_fact_or_a_naming_rule() -> None:
    copies = list(_copies())
    assert not copies, "import these from their home instead:\n" + "\n".join(copies)


def test_the_scan_finds_a_planted_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan above can fail: a module restating a price and a rule is reported."""
    planted = tmp_path / "planted.py"
    planted.write_text('RATE = 0.5779\nPROJECT = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"\n')
    monkeypatch.setattr(sys.modules[__name__], "SOURCES", [*SOURCES, planted])
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    found = [c for c in _copies() if c.startswith("planted.py")]
    assert len(found) == 2, found


def test_the_config_model_is_a_leaf() -> None:
    """`import tpudeploy.config` loads the facts, the naming rules, the duration grammar, the
    watch's runner rule (standard library, shared with the workflow's gate) and the error base
    class (tpudeploy.errors, itself a leaf: tests/layout/test_layout.py), and no feature module
    (planner, bench, rendering, API clients, CLI)."""
    code = (
        "import sys, tpudeploy.config\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('tpudeploy'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    allowed = {
        "tpudeploy",
        "tpudeploy.facts",
        "tpudeploy.names",
        "tpudeploy.durations",
        "tpudeploy.watchrunner",
        "tpudeploy.errors",
    }
    feature = [m for m in out if m not in allowed and not m.startswith("tpudeploy.config")]
    assert not feature, f"tpudeploy.config imports feature modules: {feature}"


def test_names_and_facts_need_only_the_standard_library() -> None:
    """The GitOps helper runs them under a bare python3 before `make install`."""
    code = (
        "import sys; before = set(sys.modules)\n"
        "import tpudeploy.facts, tpudeploy.names, tpudeploy.gitops\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - set(sys.stdlib_module_names) - {'tpudeploy'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]", out


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        (names.PROJECT_ID_RE, "my-proj-123", "My-Project"),
        (names.DEPLOYMENT_NAME_RE, "gemma4-v5e", "gemma4-"),
        (names.ZONE_RE, "us-west4-a", "us-west4"),
        (names.BUCKET_RE, "my-proj-tfstate", "gs://b"),
        (names.GCE_NAME_RE, "default", "Default"),
    ],
)
def test_naming_rules_accept_and_refuse(rule: object, good: str, bad: str) -> None:
    import re

    assert isinstance(rule, re.Pattern)
    assert rule.fullmatch(good) and not rule.fullmatch(bad)
