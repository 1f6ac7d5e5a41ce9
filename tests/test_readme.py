"""The README stays true: its generated sections match the code, its two commands exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tools import readme
from tpudeploy import facts

ROOT = Path(__file__).resolve().parent.parent


def test_generated_sections_match_the_code() -> None:
    for path, sections in readme.FILES.items():
        text = path.read_text()
        assert readme.render(text, sections) == text, f"{path.name} is stale: run `make readme`"


def test_generated_section_holds_the_seed_figures() -> None:
    section = readme.capacity_cost_section()
    for figure in ("18,432 B", "$0.107", "$0.111", "$0.223", "6.2 h", "3.6 h", "3.94 ms"):
        assert figure in section


def test_quick_start_commands_are_make_targets() -> None:
    text = readme.README.read_text()
    quick = text.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^make (\S+)", quick, flags=re.M)
    assert commands == ["synth", "test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in commands:
        assert re.search(rf"^{target}:", makefile, flags=re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


# ---- what a new user reads first (issue 15) ---------------------------------------------------


def _sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, flags=re.M)


def test_the_build_log_the_readme_points_at_is_in_the_repository() -> None:
    text = readme.README.read_text()
    assert "../shared" not in text
    links = re.findall(r"\]\((docs/[^)]+)\)", text)
    assert "docs/build-log.md" in links
    for link in links:
        assert (ROOT / link).is_file(), link
    summary = readme.BUILD_LOG.read_text()
    assert facts.SOURCE_URL in summary and facts.PUBLISHED in summary


def test_before_you_spend_money_comes_first_and_covers_the_checklist() -> None:
    text = readme.README.read_text()
    assert _sections(text)[0] == "Before you spend money"
    checklist = text.split("## Before you spend money", 1)[1].split("\n## ", 1)[0]
    for item in (
        "roles",  # the user's own IAM roles
        "Quota",
        "Gemma licence",
        "waiting flex-start request",
        "replaces a running node",
        "allowed_cidrs",
    ):
        assert item in checklist, item


def test_one_deploy_order_everywhere() -> None:
    """Every listing that names the deploy commands names them in the order the preflight
    enforces: the long-lived stack, the token, the key, then the node."""
    order = ["deploy-secrets", "secret", "api-key", "deploy"]
    text = readme.README.read_text()
    listings = 0
    for block in re.findall(r"```\n(.*?)```", text, flags=re.S):
        targets = re.findall(r"^make ([a-z-]+)", block, flags=re.M)
        named = [t for t in targets if t in order]
        if "deploy" in named and len(named) > 1:
            listings += 1
            assert sorted(named, key=order.index) == named, named
    assert listings >= 1


def test_the_openai_client_example_names_base_url_model_and_key() -> None:
    text = readme.README.read_text()
    (example,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    ast.parse(example)
    assert 'base_url="https://localhost:8443/v1"' in example
    assert f'model="{facts.MODEL}"' in example
    assert "api_key=" in example and "api-key" in example
    assert 'verify="node.pem"' in example and "CERT_OUT=node.pem make endpoint" in text


# The random seeds of the benchmark are the only seeds a user may meet.
RANDOM_SEED = re.compile(
    r"--seed|base[ _]seed|seeds are|(?:a|own|same|repeated|different|reuse a) seed", re.I
)


def _user_strings() -> list[tuple[str, int, str]]:
    """String literals that reach users (docstrings aside) in every module and the Makefile."""
    found = []
    for path in sorted(
        [*ROOT.glob("tpudeploy/**/*.py"), *ROOT.glob("stacks/*.py"), ROOT / "main.py"]
    ):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        # Identifiers (`__all__` entries such as SEED_PRICES) are code, not words.
        found += [
            (str(path.relative_to(ROOT)), node.lineno, node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and not node.value.isidentifier()
        ]
    for number, line in enumerate((ROOT / "Makefile").read_text().splitlines(), 1):
        if "## " in line:
            found.append(("Makefile", number, line.split("## ", 1)[1]))
    return found


def test_users_read_the_build_log_never_the_seed() -> None:
    said = [
        f"{path}:{line}: {text!r}"
        for path, line, text in _user_strings()
        if re.search(r"\bseed", RANDOM_SEED.sub("", text), re.I)
    ]
    assert said == []
    readme_text = RANDOM_SEED.sub("", readme.README.read_text())
    assert not re.search(r"\bseed", readme_text, re.I)
