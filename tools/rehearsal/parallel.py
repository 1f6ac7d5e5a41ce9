"""Several rehearsals at once, each in its own process, scratch copy and fake cloud.

Nothing is shared but the installed .venv, node_modules and the schema cache, so the three
provisioning models (and the tests' deliberate breaks) run side by side; each line a rehearsal
prints is relayed with its label.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tools.rehearsal.lifecycle import REPO_ROOT


@dataclass
class Run:
    """One `python -m tools.rehearsal` process and what it printed."""

    label: str
    args: list[str]
    workdir: Path
    lines: list[str] = field(default_factory=list)
    returncode: int | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


class Runner:
    """Starts runs, at most `parallel` at a time, as they are queued."""

    def __init__(self, *, parallel: int = 3, out: TextIO | None = None) -> None:
        self.parallel = threading.Semaphore(parallel)
        self.out = out
        self.runs: dict[str, Run] = {}
        self._print = threading.Lock()

    def start(self, label: str, args: Sequence[str], workdir: Path) -> Run:
        run = Run(label, [*args, "--workdir", str(workdir)], workdir)
        self.runs[label] = run
        threading.Thread(target=self._execute, args=(run,), daemon=True).start()
        return run

    def _execute(self, run: Run) -> None:
        with self.parallel:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tools.rehearsal", *run.args],
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                run.lines.append(line.rstrip("\n"))
                if self.out is not None:
                    with self._print:
                        print(f"[{run.label}] {line}", end="", file=self.out, flush=True)
            run.returncode = proc.wait()
        run.done.set()

    def wait(self, label: str, timeout: float | None = None) -> Run:
        run = self.runs[label]
        if not run.done.wait(timeout):
            raise TimeoutError(f"rehearsal {label} still running after {timeout} s")
        return run

    def wait_all(self) -> list[Run]:
        return [self.wait(label) for label in list(self.runs)]
