"""`python -m tools.rehearsal.post_synth MODULE:FUNCTION -- APP...`: run the cdktf app, then
FUNCTION(outdir) on what it synthesized. The scratch copy's cdktf.json runs this when a test
breaks the synthesized JSON on purpose; the product is never changed.

The hook runs after every synth, cached or not, so it must be idempotent unless its point is the
opposite (a synth that differs every time); the synth cache then records the edited output, so a
later cached synth hands Terraform the edited JSON again.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

from tpudeploy import synthcache, terraform
from tpudeploy.config import config_path, load_config


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or ":" not in argv[0]:
        print(
            "usage: python -m tools.rehearsal.post_synth MODULE:FUNCTION -- APP...", file=sys.stderr
        )
        return 2
    module_name, _, function_name = argv[0].partition(":")
    # The app command as cdktf.json spells it (a shell command line).
    rc = subprocess.run(" ".join(argv[2:]), shell=True, check=False).returncode  # noqa: S602
    if rc != 0:
        return rc
    hook = getattr(importlib.import_module(module_name), function_name)
    outdir = Path(os.environ.get("CDKTF_OUTDIR") or terraform.synth_outdir(load_config()))
    hook(outdir)
    key = synthcache.input_key(config_path(), outdir)
    synthcache.record(outdir, key)
    synthcache.keep(outdir, key)  # a kept copy put back later is the edited one too
    print(f"post-synth hook {argv[0]} applied to {outdir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
