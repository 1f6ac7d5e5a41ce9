"""Loopback fakes of the Google APIs behind the stacks, sharing one inventory
(tools/rehearsal/fakes/cloud.py's FakeCloud).

Nothing heavy is imported here: the stand-in provider, which Terraform starts for every command,
reads EMULATOR_ENV from this package, and importing every fake (the IAM rules' CEL among them)
cost it 0.6 s per start.
"""

from __future__ import annotations

from tpudeploy.gcp import apis

# The variable each client reads to find its API, by the API's name (tpu, secretmanager, ...):
# defined once, in tpudeploy/gcp/apis.py (compute and iam are read by the stand-in provider
# only).
EMULATOR_ENV = {api.name: api.emulator_env for api in apis.ALL}
