"""The few Terraform commands the ops commands run in one synthesized stack folder."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a plan does to a resource without changing anything: nothing, or a data source's read.
UNCHANGED = frozenset({"no-op", "read"})


class TerraformError(Exception):
    """A Terraform command failed; the message says which and its last lines."""


@dataclass(frozen=True)
class Change:
    """A resource a saved plan changes, with Terraform's actions ("update", "delete", ...)."""

    address: str
    actions: tuple[str, ...]


class Terraform:
    """init, state list, taint and a narrow apply, run in `stack_dir` (cdktf.out/stacks/<stack>)."""

    def __init__(self, stack_dir: Path, *, binary: str = "terraform") -> None:
        self.stack_dir = stack_dir
        self.binary = binary

    def _env(self) -> dict[str, str]:
        return {**os.environ, "TF_IN_AUTOMATION": "1", "TF_INPUT": "0"}

    def _argv(self, args: tuple[str, ...]) -> list[str]:
        return [self.binary, f"-chdir={self.stack_dir}", *args, "-no-color"]

    def _run(self, *args: str) -> str:
        try:
            result = subprocess.run(
                self._argv(args),
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
        except FileNotFoundError:
            raise TerraformError(f"{self.binary} is not on PATH; install Terraform") from None
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise TerraformError(
                f"terraform {args[0]} failed: " + " / ".join(detail[:1] + detail[-3:])
            )
        return result.stdout

    def init(self, *extra: str) -> None:
        """`extra`: e.g. -reconfigure, to take the backend the folder now declares without
        offering to migrate from the one it was last initialized with."""
        self._run("init", "-input=false", *extra)

    def state_pull(self) -> dict[str, Any] | None:
        """The backend's state as Terraform reads it; None when the backend holds none."""
        text = self._run("state", "pull")
        if not text.strip():
            return None
        try:
            pulled = json.loads(text)
        except ValueError as exc:
            raise TerraformError(f"terraform state pull printed no JSON ({exc})") from None
        return pulled if isinstance(pulled, dict) else None

    def state_push(self, path: Path) -> None:
        """Write a state file to the backend. Without -force Terraform itself refuses a state of
        another lineage, or an older serial, than the backend's ("terraform state push" docs)."""
        self._run("state", "push", str(path))

    def state_list(self) -> list[str]:
        try:
            return self._run("state", "list").split()
        except TerraformError as exc:
            # A stack's first deploy has no state file yet: nothing in it.
            if "No state file was found" in str(exc):
                return []
            raise

    def show_json(self) -> dict[str, Any]:
        """The state as `terraform show -json` reports it (values of every resource)."""
        text = self._run("show", "-json", "-no-color")
        try:
            shown = json.loads(text) if text.strip() else {}
        except ValueError as exc:
            raise TerraformError(f"terraform show -json printed no JSON ({exc})") from None
        return shown if isinstance(shown, dict) else {}

    def taint(self, address: str) -> None:
        self._run("taint", address)

    def plan(
        self,
        out: Path,
        *,
        targets: tuple[str, ...],
        replace: tuple[str, ...] = (),
        variables: dict[str, str] | None = None,
    ) -> list[Change]:
        """Save a plan of `targets` (and what they depend on) to `out`, replacing `replace`, and
        return every resource it changes, as `terraform show -json` reports the saved plan."""
        args = ["plan", "-input=false", f"-out={out}"]
        args += [f"-target={t}" for t in targets]
        args += [f"-replace={r}" for r in replace]
        args += [f"-var={k}={v}" for k, v in (variables or {}).items()]
        self._run(*args)
        text = self._run("show", "-json", "-no-color", str(out))
        try:
            shown = json.loads(text)
        except ValueError as exc:
            raise TerraformError(f"terraform show -json printed no JSON ({exc})") from None
        changes = []
        for rc in shown.get("resource_changes") or []:
            actions = tuple(str(a) for a in (rc.get("change") or {}).get("actions") or ())
            if not set(actions) <= UNCHANGED:
                changes.append(Change(str(rc.get("address", "?")), actions))
        return changes

    def apply_plan(self, plan: Path) -> None:
        """Apply a plan saved by `plan`: exactly what it planned (Terraform refuses a plan the
        state has moved past). Its output goes to the terminal as it runs."""
        self._stream("apply", "-input=false", str(plan))

    def apply(
        self,
        *,
        targets: tuple[str, ...],
        replace: tuple[str, ...] = (),
        variables: dict[str, str] | None = None,
    ) -> None:
        """Apply only `targets` (and what they depend on), replacing `replace`. Its output goes
        to the terminal as it runs: a node's create takes minutes. No variable is a secret."""
        args = ["apply", "-auto-approve", "-input=false"]
        args += [f"-target={t}" for t in targets]
        args += [f"-replace={r}" for r in replace]
        args += [f"-var={k}={v}" for k, v in (variables or {}).items()]
        self._stream(*args)

    def _stream(self, *args: str) -> None:
        """Run with Terraform's output on the terminal (an apply takes minutes to show)."""
        try:
            result = subprocess.run(self._argv(args), env=self._env(), check=False)
        except FileNotFoundError:
            raise TerraformError(f"{self.binary} is not on PATH; install Terraform") from None
        if result.returncode != 0:
            raise TerraformError(
                f"terraform {args[0]} failed (exit {result.returncode}); see above"
            )
