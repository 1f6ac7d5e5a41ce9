"""cdktf entry point: load the deployment config, build the stacks, synthesize."""

import os
import sys

from tpudeploy import policy
from tpudeploy.config import ConfigError, config_path, load_config

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
            policy.enforce(cfg, source=str(path))
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    # Imported only now: loading cdktf's jsii assembly takes seconds, a bad config fails in ms.
    from stacks.app import synth

    # The cdktf CLI passes its output directory in CDKTF_OUTDIR; `make synth` uses the default.
    synth(cfg, outdir=os.environ.get("CDKTF_OUTDIR") or "cdktf.out", source=str(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
