"""`make bootstrap`'s preflight: gitops.toml edited (no shipped placeholder), Terraform and
credentials present, before npm installs anything and before cdktf asks Google for anything.

Bootstrapping with the shipped example values would federate a stranger's repository
(`example-org/gemma4-tpu`) into whatever project the credentials reach, so each placeholder is
refused with the key, the value and the command that prints the real one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from tpudeploy import errors
from tpudeploy.bootstrap_config import BootstrapConfig, bootstrap_path, load_bootstrap
from tpudeploy.config import ConfigError
from tpudeploy.preflight import check_credentials, check_terraform

# Every value gitops.toml ships with that names somebody else's project, repository or bucket,
# with where the real one comes from.
PLACEHOLDERS: dict[str, tuple[Any, str]] = {
    "project": ("my-gemma-project", "your project id (`gcloud projects list`)"),
    "github_repository": ("example-org/gemma4-tpu", 'your repository, "owner/name"'),
    "github_repository_id": (
        123456789,
        "`gh api repos/OWNER/NAME --jq .id` (or `make bootstrap-check` with GITHUB_TOKEN)",
    ),
    "github_repository_owner_id": (
        987654321,
        "`gh api repos/OWNER/NAME --jq .owner.id` (or `make bootstrap-check` with GITHUB_TOKEN)",
    ),
    "state_bucket": ("my-gemma-project-tfstate", "a bucket name of your own, e.g. PROJECT-tfstate"),
}


def placeholder_problems(cfg: BootstrapConfig, source: str) -> list[str]:
    """One line per key still holding its shipped example value."""
    problems = []
    for key, (shipped, where) in PLACEHOLDERS.items():
        value = getattr(cfg, key)
        if value == shipped:
            problems.append(
                f"{source}: {key} = {value!r} is the shipped example, not yours: bootstrapping it "
                f"would federate a repository you do not own; set it to {where}"
            )
    return problems


def run(out: TextIO | None = None, err: TextIO | None = None) -> int:
    """0 when the bootstrap may start; 1 (every problem, one line each) otherwise; 2 when
    gitops.toml itself is invalid."""
    out = out or sys.stdout
    err = err or sys.stderr
    start = time.monotonic()
    path = bootstrap_path()
    try:
        cfg = load_bootstrap(path).config
    except ConfigError as exc:
        print(exc, file=err)
        return 2
    problems = placeholder_problems(cfg, str(path))
    checks = [check_terraform(), check_credentials()]
    problems += [c.line for c in checks if not c.ok]
    for line in problems:
        print(f"bootstrap preflight: {line}", file=err)
    if problems:
        return 1
    took = time.monotonic() - start
    passed = ", ".join(c.line for c in checks)
    print(
        f"bootstrap preflight: {cfg.github_repository} (id {cfg.github_repository_id}, owner id "
        f"{cfg.github_repository_owner_id}) into {cfg.project}; {passed} ({took:.1f} s)",
        file=out,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    return run()


if __name__ == "__main__":
    sys.exit(errors.run(main))
