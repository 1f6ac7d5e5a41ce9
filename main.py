"""cdktf entry point: load the deployment config, build the stacks, synthesize."""

import datetime
import os
import sys
from pathlib import Path

from tpudeploy import errors, policy, synthcache, terraform
from tpudeploy.config import ConfigError, config_path
from tpudeploy.platform import guard_rails, load_config, summary_lines

# The Makefile's destroy targets set TPUDEPLOY_COMMAND=destroy for the cdktf CLI's own synth.
COMMAND_ENV = "TPUDEPLOY_COMMAND"


def main() -> int:
    """Synthesize the deployment named by DEPLOY_CONFIG (else deploy.toml); exit 2 on bad config."""
    path = config_path()
    try:
        cfg = load_config(path)
        # The guard rails apply to what is about to be created, never to a destroy: `cdktf
        # destroy` synthesizes too, and a refused config must still be destroyable.
        if os.environ.get(COMMAND_ENV) != "destroy":
            policy.enforce(cfg, guard_rails(cfg), source=str(path))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    # The cdktf CLI passes its output directory in CDKTF_OUTDIR (the Makefile gives it the
    # deployment's own folder); `make synth` writes to that folder too.
    outdir = os.environ.get("CDKTF_OUTDIR") or str(terraform.synth_outdir(cfg))
    key = synthcache.input_key(path, Path(outdir))
    if synthcache.fresh(Path(outdir), key):
        # deploy, diff and destroy each synthesize first: skip the 7-12 s jsii load when the
        # config, the code and the pins are those of the JSON already there, untouched.
        reused = f"unchanged since the last synth of {outdir}"
    elif synthcache.restore(Path(outdir), key):
        # Another config of the deployment was synthesized here since (the upstream watch's
        # pinned and candidate builds, in turn): the JSON of these inputs was kept.
        reused = f"its synth of these same inputs put back in {outdir}"
    else:
        reused = ""
    if reused:
        print(f"deployment {cfg.name!r} from {path}: {reused}")
        print()
        print("\n".join(summary_lines(cfg, today=datetime.date.today())))
        return 0
    # Imported only now: loading cdktf's jsii assembly takes seconds, a bad config fails in ms.
    # Said first, so the wait is never silent (issue 37).
    print(
        f"synthesizing deployment {cfg.name!r} from {path} into {outdir}: loading cdktf and the "
        "Google provider bindings first (7-20 s)",
        flush=True,
    )
    from stacks.app import synth

    synth(cfg, outdir=outdir, source=str(path))
    synthcache.record(Path(outdir), key)
    synthcache.keep(Path(outdir), key)
    return 0


if __name__ == "__main__":
    sys.exit(errors.run(main))
