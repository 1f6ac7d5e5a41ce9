"""cdktf entry point: load the deployment config, build the stacks, synthesize."""

import sys

from stacks.app import main

if __name__ == "__main__":
    sys.exit(main())
