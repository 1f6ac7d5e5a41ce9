"""`python -m tpudeploy.queued_resource create|delete|status` (the Terraform provisioners' call)."""

import sys

from tpudeploy.queued_resource.cli import main

sys.exit(main())
