"""`make mutants`: mutmut over the guarded modules, each survivor judged against a reviewed list.

A survivor is a change to the code that the fast tests do not notice. Each one is either killed
by a test of behaviour a user relies on, or listed in tests/mutants_equivalent.toml with the
reason it cannot change behaviour. Entries match a survivor by its function and the lines it
changes (not by mutmut's number, which shifts whenever the function is edited), so the list
survives unrelated edits and goes stale, loudly, when the line it explains changes.

    python -m tools.mutants            # a fresh run (mutants/ is rebuilt), then the verdict
    python -m tools.mutants --report   # the verdict on the last run, without running
    python -m tools.mutants --again    # rerun only the last run's survivors (while killing them)

A timeout or a crash counts as a kill only when it happens again with the mutant run alone
(RECHECKED below): a loaded runner can make a run slower, not its verdict wrong.

Exit 0 when every survivor is explained, 1 when one is not (or an entry explains nothing), 2
when the run itself or the list is broken.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT_FILE = REPO_ROOT / "tests" / "mutants_equivalent.toml"
MUTANTS_DIR = REPO_ROOT / "mutants"
# Two workers: the machines this runs on (and CI runners) have two cores.
DEFAULT_JOBS = 2

# mutmut's verdicts. "caught by type check" is mypy's kill (make lint runs it). Unfinished runs
# are an error, not a verdict.
#
# A timeout is a kill (the mutant hangs the tests), but mutmut's limit is wall-clock: it stops a
# mutant's tests after 15 x (their clean duration + 1 s), so a runner loaded enough could stop a
# survivor. A crash (mutmut's "segfault", a SIGKILL such as the CPU limit's or the OOM killer's,
# and "suspicious", any other exit) can be the machine's doing too. Each of these is run again,
# alone (one worker), before it counts: only one that repeats is a kill; one that finishes gets
# the verdict it finishes with. So a slow runner costs minutes, never a wrong pass or fail.
KILLED = frozenset({"killed", "timeout", "caught by type check", "segfault", "suspicious"})
RECHECKED = frozenset({"timeout", "segfault", "suspicious"})
SURVIVED = frozenset({"survived", "no tests"})
UNFINISHED = frozenset({"not checked", "check was interrupted by user"})
_ENTRY_KEYS = frozenset({"function", "removed", "added", "reason"})


class ListError(Exception):
    """The equivalent-mutant list cannot be read; the message names the entry, key and fix."""


@dataclass(frozen=True)
class Mutant:
    """One mutant that the tests did not kill."""

    name: str  # mutmut's key, for `mutmut show NAME`
    status: str
    function: str  # module.Class.function, as people write it
    removed: tuple[str, ...]
    added: tuple[str, ...]
    diff: str


@dataclass(frozen=True)
class Equivalent:
    """A reviewed survivor: the change cannot alter what any user of the code sees."""

    function: str
    removed: tuple[str, ...]
    added: tuple[str, ...]
    reason: str

    def matches(self, mutant: Mutant) -> bool:
        return (self.function, self.removed, self.added) == (
            mutant.function,
            mutant.removed,
            mutant.added,
        )


@dataclass(frozen=True)
class Verdict:
    unexplained: list[Mutant]
    explained: list[tuple[Mutant, Equivalent]]
    stale: list[Equivalent]

    @property
    def ok(self) -> bool:
        return not self.unexplained and not self.stale


def readable_function(mutant_name: str) -> str:
    """mutmut's `pkg.mod.xǁClsǁmeth__mutmut_3` is `pkg.mod.Cls.meth`; `pkg.mod.x_fn__mutmut_1`
    is `pkg.mod.fn`."""
    module, _, mangled = mutant_name.rpartition(".")
    mangled = mangled.rsplit("__mutmut_", 1)[0]
    if mangled.startswith("xǁ"):
        _, cls, func = mangled.split("ǁ")
        return f"{module}.{cls}.{func}"
    return f"{module}.{mangled.removeprefix('x_')}"


def changed_lines(diff: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The stripped lines a unified diff removes and adds (its file headers left out)."""
    removed: list[str] = []
    added: list[str] = []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            removed.append(line[1:].strip())
        elif line.startswith("+"):
            added.append(line[1:].strip())
    return tuple(removed), tuple(added)


def _lines(entry: dict[str, object], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ListError(
            f"{where}: {key} = {value!r}: not a list of source lines; copy them from the "
            'survivor\'s diff, e.g. removed = ["return x"]'
        )
    return tuple(v.strip() for v in value)


def parse_equivalents(text: str, *, source: str) -> list[Equivalent]:
    """The reviewed list; every entry needs its function, the lines it changes and a reason."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ListError(f"{source}: not valid TOML ({exc}); fix the syntax") from None
    extra = sorted(set(data) - {"equivalent"})
    if extra:
        raise ListError(f"{source}: unknown table(s) {extra}; write [[equivalent]] entries only")
    entries = data.get("equivalent", [])
    if not isinstance(entries, list):
        raise ListError(f"{source}: equivalent is not an array of tables; write [[equivalent]]")
    result = []
    for i, entry in enumerate(entries, start=1):
        where = f"{source}: entry {i}"
        unknown = sorted(set(entry) - _ENTRY_KEYS)
        if unknown:
            raise ListError(
                f"{where}: unknown key(s) {unknown}; use {', '.join(sorted(_ENTRY_KEYS))}"
            )
        function = entry.get("function")
        if not isinstance(function, str) or function.count(".") < 1:
            raise ListError(
                f"{where}: function = {function!r}: not a dotted name; write it as the report "
                "prints it, e.g. tpudeploy.planner.guards.check_load"
            )
        reason = entry.get("reason")
        if not isinstance(reason, str) or len(reason.split()) < 4:
            raise ListError(
                f"{where} ({function}): reason = {reason!r}: an equivalent mutant needs the "
                "reason no user can tell it apart; write it in a sentence"
            )
        removed, added = _lines(entry, "removed", where), _lines(entry, "added", where)
        if not removed and not added:
            raise ListError(f"{where} ({function}): removed and added are both empty; copy them")
        result.append(Equivalent(function, removed, added, " ".join(reason.split())))
    seen: set[tuple[str, tuple[str, ...], tuple[str, ...]]] = set()
    for eq in result:
        key = (eq.function, eq.removed, eq.added)
        if key in seen:
            raise ListError(f"{source}: {eq.function} {eq.removed} is listed twice; keep one")
        seen.add(key)
    return result


def load_equivalents(path: Path = EQUIVALENT_FILE) -> list[Equivalent]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ListError(f"{path}: not found; create it (an empty file lists nothing)") from None
    return parse_equivalents(text, source=str(path.relative_to(REPO_ROOT)))


def judge(mutants: Iterable[Mutant], equivalents: Sequence[Equivalent]) -> Verdict:
    """Sort survivors into explained and unexplained; list entries that match no survivor."""
    unexplained: list[Mutant] = []
    explained: list[tuple[Mutant, Equivalent]] = []
    used: set[int] = set()
    for mutant in mutants:
        match = next((i for i, eq in enumerate(equivalents) if eq.matches(mutant)), None)
        if match is None:
            unexplained.append(mutant)
        else:
            explained.append((mutant, equivalents[match]))
            used.add(match)
    stale = [eq for i, eq in enumerate(equivalents) if i not in used]
    return Verdict(unexplained, explained, stale)


def entry_for(mutant: Mutant) -> str:
    """The TOML to paste into the list once a reviewer agrees the mutant is equivalent."""

    def lines(values: tuple[str, ...]) -> str:
        return "[" + ", ".join(_toml_string(v) for v in values) + "]"

    return "\n".join(
        [
            "[[equivalent]]",
            f"function = {_toml_string(mutant.function)}",
            f"removed = {lines(mutant.removed)}",
            f"added = {lines(mutant.added)}",
            'reason = "..."',
        ]
    )


def _toml_string(value: str) -> str:
    # A literal string reads like the source line whenever it can (code is full of double quotes).
    if "'" not in value:
        return f"'{value}'"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_verdict(verdict: Verdict) -> str:
    out: list[str] = []
    for mutant in verdict.unexplained:
        out += [
            f"SURVIVED ({mutant.status}): {mutant.name}   [mutmut show {mutant.name}]",
            mutant.diff,
            "Kill it with a test of what a user relies on, or, if no user can tell it apart,",
            f"add to {EQUIVALENT_FILE.relative_to(REPO_ROOT)} with the reason:",
            entry_for(mutant),
            "",
        ]
    for eq in verdict.stale:
        out += [
            f"STALE ENTRY: {eq.function} {list(eq.removed)} -> {list(eq.added)} explains no "
            "survivor (the line changed, or a test now kills it); remove or update it",
            "",
        ]
    out.append(
        f"mutants: {len(verdict.unexplained)} unexplained survivor(s), "
        f"{len(verdict.explained)} explained as equivalent, {len(verdict.stale)} stale entr(ies)"
    )
    return "\n".join(out)


# ---- mutmut (pinned in requirements.txt; everything below reads its mutants/ directory) -------


def to_recheck(statuses: dict[str, str]) -> list[str]:
    """The mutants whose verdict may be the machine's (a timeout, a crash), to run again alone."""
    return sorted(name for name, status in statuses.items() if status in RECHECKED)


def statuses() -> dict[str, str]:
    """Every mutant of the last run and its verdict, by mutmut's name. Run from REPO_ROOT."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    result: dict[str, str] = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, exit_code in data.exit_code_by_key.items():
            result[name] = status_by_exit_code[exit_code]
    return result


def collect() -> tuple[list[Mutant], dict[str, int]]:
    """The last run's mutants that were not killed, and a count by status. Run from REPO_ROOT."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    survivors: list[Mutant] = []
    counts: dict[str, int] = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, exit_code in sorted(data.exit_code_by_key.items()):
            status = status_by_exit_code[exit_code]
            counts[status] = counts.get(status, 0) + 1
            # An unfinished run is refused whole; its diffs (a parse each) would take minutes.
            if status in KILLED or status in UNFINISHED:
                continue
            diff = get_diff_for_mutant(name, path=path)
            removed, added = changed_lines(diff)
            survivors.append(Mutant(name, status, readable_function(name), removed, added, diff))
    return survivors, counts


class RunError(Exception):
    """mutmut itself failed (its output is above)."""


def recheck(found: dict[str, str]) -> tuple[int, int]:
    """Run each timeout and crash of `found` again with one worker (see RECHECKED): how many ran
    again, and how many of them repeated (the kills)."""
    names = to_recheck(found)
    if not names:
        return 0, 0
    print(f"mutants: {len(names)} timeout(s) or crash(es); each runs again, alone, to count")
    if run_mutmut(names, 1) != 0:
        raise RunError
    after = statuses()
    return len(names), sum(1 for name in names if after.get(name) in RECHECKED)


def unfinished_error(found: dict[str, str]) -> bool:
    """Say so, and be true, when some mutant has no verdict: a run cut short (a runner out of
    time, a Ctrl-C) must fail, never pass on the mutants it happened to reach."""
    unfinished = sum(1 for status in found.values() if status in UNFINISHED)
    if unfinished:
        print(
            f"error: {unfinished} mutant(s) were not checked (the run was interrupted); "
            "run `make mutants` again",
            file=sys.stderr,
        )
    return bool(unfinished)


def run_mutmut(names: Sequence[str], jobs: int) -> int:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    mutmut = Path(sys.executable).parent / "mutmut"
    cmd = [str(mutmut), "run", "--max-children", str(jobs), *names]
    # mutmut draws a progress line per mutant; its last lines carry the summary.
    return subprocess.run(cmd, cwd=REPO_ROOT, env=env, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make mutants", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--report", action="store_true", help="judge the last run; run nothing")
    mode.add_argument("--again", action="store_true", help="rerun the last run's survivors")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="mutmut workers")
    args = parser.parse_args(argv)
    os.chdir(REPO_ROOT)
    try:
        equivalents = load_equivalents()
    except ListError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    started = time.monotonic()
    if args.again:
        survivors, _ = collect()
        if survivors and run_mutmut([m.name for m in survivors], args.jobs) != 0:
            print("error: mutmut failed (its output is above)", file=sys.stderr)
            return 2
    elif not args.report:
        # A fresh run: mutmut keeps verdicts across runs and never retests a survivor after a
        # new test lands, so a cached run could report a mutant that a test now kills (or miss
        # one a weakened test lets through).
        shutil.rmtree(MUTANTS_DIR, ignore_errors=True)
        if run_mutmut([], args.jobs) != 0:
            print("error: mutmut failed (its output is above)", file=sys.stderr)
            return 2
    if not MUTANTS_DIR.is_dir():
        print("error: no mutants/ directory: run `make mutants` first", file=sys.stderr)
        return 2
    found = statuses()
    if unfinished_error(found):
        return 2
    if not args.report:
        try:
            rechecked, repeated = recheck(found)
        except RunError:
            print("error: mutmut failed (its output is above)", file=sys.stderr)
            return 2
        if rechecked:
            print(f"mutants: {repeated} of {rechecked} repeated alone (kills); the rest judged")
            # The rerun rewrites verdicts: one it left unchecked is no verdict either.
            if unfinished_error(statuses()):
                return 2

    survivors, counts = collect()
    verdict = judge(survivors, equivalents)
    print()
    print(format_verdict(verdict))
    total = sum(counts.values())
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"mutants: {total} in all ({summary})")
    if not args.report:
        print(f"mutants: took {time.monotonic() - started:.0f} s with {args.jobs} worker(s)")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
