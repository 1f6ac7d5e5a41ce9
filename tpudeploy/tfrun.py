"""The few Terraform commands the ops commands run in one synthesized stack folder."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any


class TerraformError(Exception):
    """A Terraform command failed; the message says which and its last lines."""


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

    def init(self) -> None:
        self._run("init", "-input=false")

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
        try:
            result = subprocess.run(self._argv(tuple(args)), env=self._env(), check=False)
        except FileNotFoundError:
            raise TerraformError(f"{self.binary} is not on PATH; install Terraform") from None
        if result.returncode != 0:
            raise TerraformError(f"terraform apply failed (exit {result.returncode}); see above")
