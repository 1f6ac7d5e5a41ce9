"""`make mutants` (tools/mutants.py): how survivors are judged, and the reviewed list itself."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tools import mutants
from tools.mutants import (
    EQUIVALENT_FILE,
    REPO_ROOT,
    Equivalent,
    ListError,
    Mutant,
    changed_lines,
    entry_for,
    format_verdict,
    judge,
    load_equivalents,
    parse_equivalents,
    readable_function,
)

DIFF = """--- tpudeploy/planner/guards.py
+++ tpudeploy/planner/guards.py
@@ -1,4 +1,4 @@
 def _is_power_of_two(n: int) -> bool:
-    return n > 0 and n & (n - 1) == 0
+    return n >= 0 and n & (n - 1) == 0
"""


def mutant(name: str = "tpudeploy.planner.guards.x__is_power_of_two__mutmut_2") -> Mutant:
    removed, added = changed_lines(DIFF)
    return Mutant(name, "survived", readable_function(name), removed, added, DIFF)


def mutmut_config() -> dict[str, list[str]]:
    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        config: dict[str, list[str]] = tomllib.load(f)["tool"]["mutmut"]
    return config


def test_mutmut_names_read_as_python_names() -> None:
    assert readable_function("tpudeploy.tpuvm.flex.x_queued_resource_spec__mutmut_34") == (
        "tpudeploy.tpuvm.flex.queued_resource_spec"
    )
    assert readable_function(
        "tpudeploy.tpuvm.queued_resource.spec.xǁQueuedResourceSpecǁto_json__mutmut_2"
    ) == ("tpudeploy.tpuvm.queued_resource.spec.QueuedResourceSpec.to_json")
    # A private function keeps its own underscore.
    assert readable_function("tpudeploy.planner.guards.x__is_power_of_two__mutmut_2") == (
        "tpudeploy.planner.guards._is_power_of_two"
    )


def test_a_survivor_is_known_by_the_lines_it_changes_not_its_number() -> None:
    assert changed_lines(DIFF) == (
        ("return n > 0 and n & (n - 1) == 0",),
        ("return n >= 0 and n & (n - 1) == 0",),
    )
    entry = Equivalent(
        "tpudeploy.planner.guards._is_power_of_two",
        ("return n > 0 and n & (n - 1) == 0",),
        ("return n >= 0 and n & (n - 1) == 0",),
        "only n = 0 differs and the schema refuses it",
    )
    # Renumbered after an unrelated edit of the function: still the same survivor.
    verdict = judge([mutant("tpudeploy.planner.guards.x__is_power_of_two__mutmut_7")], [entry])
    assert verdict.ok and verdict.unexplained == [] and verdict.stale == []


def test_an_unexplained_survivor_fails_and_prints_what_to_paste() -> None:
    verdict = judge([mutant()], [])
    assert not verdict.ok
    report = format_verdict(verdict)
    assert "SURVIVED (survived): tpudeploy.planner.guards.x__is_power_of_two__mutmut_2" in report
    assert "+    return n >= 0 and n & (n - 1) == 0" in report
    assert report.endswith(
        "1 unexplained survivor(s), 0 explained as equivalent, 0 stale entr(ies)"
    )
    # The printed entry is valid list syntax that explains this very survivor once filled in.
    pasted = entry_for(mutant()).replace('"..."', '"only n = 0 differs, and the schema refuses it"')
    assert judge([mutant()], parse_equivalents(pasted, source="pasted")).ok


def test_an_entry_that_explains_nothing_is_stale() -> None:
    entry = Equivalent(
        "tpudeploy.tpuvm.flex.queued_resource_spec", ("x = 1",), ("x = 2",), "a reason"
    )
    verdict = judge([], [entry])
    assert verdict.stale == [entry] and not verdict.ok
    assert "STALE ENTRY: tpudeploy.tpuvm.flex.queued_resource_spec ['x = 1'] -> ['x = 2']" in (
        format_verdict(verdict)
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[[equivalent]\n", "not valid TOML"),
        ("[other]\n", "unknown table(s) ['other']; write [[equivalent]] entries only"),
        (
            "[[equivalent]]\nfunction = 'a.b'\nremoved = ['x']\nadded = []\nreason = 'why'\n",
            "entry 1 (a.b): reason = 'why': an equivalent mutant needs the reason",
        ),
        (
            "[[equivalent]]\nfunction = 'nodots'\nremoved = []\nadded = []\nreason = 'a b c d'\n",
            "entry 1: function = 'nodots': not a dotted name",
        ),
        (
            "[[equivalent]]\nfunction = 'a.b'\nremoved = 'x'\nadded = []\nreason = 'a b c d'\n",
            "entry 1: removed = 'x': not a list of source lines",
        ),
        (
            "[[equivalent]]\nfunction = 'a.b'\nremoved = []\nadded = []\nreason = 'a b c d'\n",
            "entry 1 (a.b): removed and added are both empty",
        ),
        (
            "[[equivalent]]\nfunction = 'a.b'\nremoved = ['x']\nadded = []\nreason = 'a b c d'\n"
            "colour = 'blue'\n",
            "entry 1: unknown key(s) ['colour']",
        ),
        (
            "[[equivalent]]\nfunction = 'a.b'\nremoved = ['x']\nadded = []\nreason = 'a b c d'\n"
            "[[equivalent]]\nfunction = 'a.b'\nremoved = ['x']\nadded = []\nreason = 'e f g h'\n",
            "a.b ('x',) is listed twice; keep one",
        ),
    ],
)
def test_a_broken_list_is_one_line_naming_the_entry(text: str, said: str) -> None:
    with pytest.raises(ListError) as err:
        parse_equivalents(text, source="tests/mutants_equivalent.toml")
    message = str(err.value)
    assert message.startswith("tests/mutants_equivalent.toml: ")
    assert said in message and "\n" not in message


def test_every_listed_mutant_is_in_a_mutated_module_and_still_in_its_source() -> None:
    """A line that changed makes its entry stale; this finds it without running mutmut."""
    mutated = {p.removesuffix(".py").replace("/", ".") for p in mutmut_config()["only_mutate"]}
    entries = load_equivalents(EQUIVALENT_FILE)
    assert entries, "the list is read"
    for entry in entries:
        module = next((m for m in mutated if entry.function.startswith(m + ".")), None)
        assert module, f"{entry.function} is not in a module make mutants mutates"
        source = {line.strip() for line in (REPO_ROOT / f"{module.replace('.', '/')}.py").open()}
        for line in entry.removed:
            assert line in source, f"{entry.function}: {line!r} is no longer in {module}"


def test_make_mutants_runs_the_fast_tests_only() -> None:
    config = mutmut_config()
    for path in config["only_mutate"]:
        assert (REPO_ROOT / path).is_file(), path
    selection = config["pytest_add_cli_args_test_selection"]
    assert selection[-2:] == ["-m", "not slow"]
    for path in selection[:-2]:
        assert Path(REPO_ROOT / path).is_file(), path


LOADED = "tpudeploy.render.x_hf_tmpfs_size__mutmut_2"  # timed out only because the runner was busy
HANG = "tpudeploy.planner.guards.x__fitting_len__mutmut_4"  # hangs however often it runs
KILL = "tpudeploy.render.x_hf_tmpfs_size__mutmut_3"


def run_with_fake_mutmut(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, second: dict[str, str]
) -> tuple[int, list[tuple[list[str], int]]]:
    """tools.mutants.main over a stand-in for mutmut: the first run times out LOADED and HANG;
    the verdicts a second run (of those two) gives are `second`."""
    verdicts = {LOADED: "timeout", HANG: "timeout", KILL: "killed"}
    runs: list[tuple[list[str], int]] = []

    def run_mutmut(names: list[str], jobs: int) -> int:
        runs.append((list(names), jobs))
        (tmp_path / "mutants").mkdir(exist_ok=True)
        if names:
            verdicts.update(second)
        return 0

    def collect() -> tuple[list[Mutant], dict[str, int]]:
        left = [
            Mutant(name, status, readable_function(name), ("x",), ("y",), "")
            for name, status in sorted(verdicts.items())
            if status not in mutants.KILLED
        ]
        counts: dict[str, int] = {}
        for status in verdicts.values():
            counts[status] = counts.get(status, 0) + 1
        return left, counts

    monkeypatch.chdir(REPO_ROOT)  # main() changes into the repository; restored after the test
    monkeypatch.setattr(mutants, "MUTANTS_DIR", tmp_path / "mutants")
    monkeypatch.setattr(mutants, "load_equivalents", lambda: [])
    monkeypatch.setattr(mutants, "run_mutmut", run_mutmut)
    monkeypatch.setattr(mutants, "statuses", lambda: dict(verdicts))
    monkeypatch.setattr(mutants, "collect", collect)
    return mutants.main([]), runs


def test_a_timeout_on_a_loaded_runner_is_run_again_alone_before_it_counts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Run alone, the loaded one finishes: it was a survivor, and make mutants fails on it.
    code, runs = run_with_fake_mutmut(monkeypatch, tmp_path, {LOADED: "survived"})
    assert runs == [([], 2), ([HANG, LOADED], 1)]
    out = capsys.readouterr().out
    assert code == 1
    assert f"SURVIVED (survived): {LOADED}" in out and HANG not in out
    assert "1 of 2 repeated alone (kills)" in out


def test_a_mutant_that_hangs_again_alone_is_a_kill(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run_with_fake_mutmut(monkeypatch, tmp_path, {})
    assert code == 0
    assert "2 of 2 repeated alone (kills)" in capsys.readouterr().out


def test_what_is_run_again_is_every_timeout_and_crash_and_nothing_else() -> None:
    found = {
        "a": "timeout",
        "b": "segfault",
        "c": "suspicious",
        "d": "killed",
        "e": "survived",
        "f": "no tests",
        "g": "caught by type check",
    }
    assert mutants.to_recheck(found) == ["a", "b", "c"]


def test_a_rerun_that_leaves_a_mutant_unchecked_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A runner that runs out of time (or is stopped) mid-rerun leaves "not checked": no
    verdict, so no pass on the mutants it did reach."""
    code, _ = run_with_fake_mutmut(monkeypatch, tmp_path, {LOADED: "not checked"})
    assert code == 2
    assert "1 mutant(s) were not checked" in capsys.readouterr().err


@pytest.mark.parametrize("status", sorted(mutants.UNFINISHED))
def test_a_run_cut_short_fails_before_anything_is_judged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status: str
) -> None:
    runs: list[list[str]] = []
    monkeypatch.chdir(REPO_ROOT)
    (tmp_path / "mutants").mkdir()
    monkeypatch.setattr(mutants, "MUTANTS_DIR", tmp_path / "mutants")
    monkeypatch.setattr(mutants, "load_equivalents", lambda: [])

    def run_mutmut(names: list[str], jobs: int) -> int:
        runs.append(list(names))
        return 0

    monkeypatch.setattr(mutants, "run_mutmut", run_mutmut)
    monkeypatch.setattr(mutants, "statuses", lambda: {KILL: "killed", LOADED: status})

    def collect() -> tuple[list[Mutant], dict[str, int]]:
        raise AssertionError("an unfinished run is never judged")

    monkeypatch.setattr(mutants, "collect", collect)
    assert mutants.main(["--report"]) == 2
    assert runs == []
