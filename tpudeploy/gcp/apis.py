"""The Google APIs the project calls, each with the variable that points it at a loopback fake
and the URL of the real one: every *_EMULATOR_HOST name is defined here and nowhere else
(tests/gcp/test_gcp_session.py checks it).

<API>_EMULATOR_HOST=host:port means plain HTTP to that address and no credentials
(tpudeploy/gcp/session.py): the fakes of tools/rehearsal/fakes and tests/fake_*.py, which serve
the real API's paths. STORAGE_EMULATOR_HOST is the Cloud Storage client libraries' own
convention; the others follow it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class Api:
    """One Google API: the variable naming its stand-in, and the real API's base URL (with the
    version path the project's calls start from, which the stand-in serves too)."""

    emulator_env: str
    base_url: str

    @property
    def name(self) -> str:
        """The service's name, as in <name>.googleapis.com (and in the discovery documents)."""
        return (urlsplit(self.base_url).hostname or "").split(".")[0]

    @property
    def path(self) -> str:
        """The base URL's path ("/v1", or "" when every call names its own)."""
        return urlsplit(self.base_url).path.rstrip("/")


# Through googleapiclient's discovery client (tpudeploy/gcp/discovery.py): the
# document's own root URL and service path; the emulator replaces the root.
TPU: Final = Api("TPU_EMULATOR_HOST", "https://tpu.googleapis.com")
CLOUD_SCHEDULER: Final = Api(
    "CLOUD_SCHEDULER_EMULATOR_HOST", "https://cloudscheduler.googleapis.com"
)
# Both: the JSON API's paths start at /storage/v1 (tpudeploy/gcp/storage.py, and the warm path's
# listing through the discovery client, tpudeploy/tpuvm/warmpath.py).
STORAGE: Final = Api("STORAGE_EMULATOR_HOST", "https://storage.googleapis.com")
# Over requests (tpudeploy/gcp/session.py's sessions).
SECRET_MANAGER: Final = Api(
    "SECRETMANAGER_EMULATOR_HOST", "https://secretmanager.googleapis.com/v1"
)
RESOURCE_MANAGER: Final = Api(
    "RESOURCEMANAGER_EMULATOR_HOST", "https://cloudresourcemanager.googleapis.com/v1"
)
SERVICE_USAGE: Final = Api("SERVICEUSAGE_EMULATOR_HOST", "https://serviceusage.googleapis.com/v1")
CONTAINER: Final = Api("CONTAINER_EMULATOR_HOST", "https://container.googleapis.com/v1")
# make logs: entries:list (tpudeploy/gcp/logentries.py).
LOGGING: Final = Api("LOGGING_EMULATOR_HOST", "https://logging.googleapis.com/v2")
# Called by Terraform's provider only: the rehearsal's stand-in provider reads these
# (tools/rehearsal/resources/base.py), the project's own code never does.
COMPUTE: Final = Api("COMPUTE_EMULATOR_HOST", "https://compute.googleapis.com/compute/v1")
IAM: Final = Api("IAM_EMULATOR_HOST", "https://iam.googleapis.com/v1")
# Dashboards are v1 and alert policies v3 of one host: every call names its version.
MONITORING: Final = Api("MONITORING_EMULATOR_HOST", "https://monitoring.googleapis.com")

ALL: Final = (
    TPU,
    SECRET_MANAGER,
    STORAGE,
    COMPUTE,
    IAM,
    SERVICE_USAGE,
    CLOUD_SCHEDULER,
    RESOURCE_MANAGER,
    CONTAINER,
    MONITORING,
    LOGGING,
)
