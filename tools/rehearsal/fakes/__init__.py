"""Loopback fakes of the Google APIs behind the stacks, sharing one inventory
(tools/rehearsal/fakes/cloud.py's FakeCloud).

Nothing heavy is imported here: the stand-in provider, which Terraform starts for every command,
reads EMULATOR_ENV from this package, and importing every fake (the IAM rules' CEL among them)
cost it 0.6 s per start.
"""

from __future__ import annotations

# The variable each client reads to find its API: the product's own (TPU, Secret Manager), the
# Cloud Storage client libraries' convention, and the same convention for the rest (read by the
# stand-in provider only).
EMULATOR_ENV = {
    "tpu": "TPU_EMULATOR_HOST",
    "secretmanager": "SECRETMANAGER_EMULATOR_HOST",
    "storage": "STORAGE_EMULATOR_HOST",
    "compute": "COMPUTE_EMULATOR_HOST",
    "iam": "IAM_EMULATOR_HOST",
    "serviceusage": "SERVICEUSAGE_EMULATOR_HOST",
    # tpudeploy.tpuvm.scheduler reads this one too (make status, make recover, make extend).
    "cloudscheduler": "CLOUD_SCHEDULER_EMULATOR_HOST",
    "cloudresourcemanager": "RESOURCEMANAGER_EMULATOR_HOST",
    # platform = "gke": the GKE API (the stand-in provider only).
    "container": "CONTAINER_EMULATOR_HOST",
}
