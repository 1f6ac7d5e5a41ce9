"""`python -m tpudeploy.tpuvm.queued_resource create|delete|status` (Terraform's provisioners)."""

import sys

from tpudeploy.tpuvm.queued_resource.provisioner import main

sys.exit(main())
