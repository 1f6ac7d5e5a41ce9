"""The README stays true: its generated sections match the code, its two commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from tools import readme

ROOT = Path(__file__).resolve().parent.parent


def test_generated_sections_match_the_code() -> None:
    text = readme.README.read_text()
    assert readme.render(text) == text, "README.md is stale: run `make readme`"


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
