"""`python -m tpudeploy`: the ops commands behind the Makefile."""

import sys

from tpudeploy.cli import main

sys.exit(main())
