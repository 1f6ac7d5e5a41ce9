"""Cloud Scheduler reads: the deadline job of a spot or on-demand node (make status, recover,
make extend), and of a GKE cluster (tpudeploy/platform.py hands GKE this client)."""

from __future__ import annotations

from typing import Any

from tpudeploy.gcp.apis import CLOUD_SCHEDULER
from tpudeploy.gcp.discovery import DiscoveryApi, build_service


class SchedulerApi(DiscoveryApi):
    """jobs.get through the v1 discovery document; googleapiclient retries 429/5xx
    (CLOUD_SCHEDULER_EMULATOR_HOST: a loopback fake, tpudeploy/gcp/apis.py)."""

    API_NAME = "Cloud Scheduler API"

    def _build(self) -> Any:
        return build_service(api=CLOUD_SCHEDULER, version="v1")

    def get_job(self, name: str) -> dict[str, Any] | None:
        """The job, or None when it does not exist."""
        req = self._service.projects().locations().jobs().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get job", allow_404=True)
        return result

    def location_ids(self, project: str) -> list[str]:
        """Every Cloud Scheduler location of the project (locations.list, all pages)."""
        found: list[str] = []
        token = None
        while True:
            req = (
                self._service.projects()
                .locations()
                .list(name=f"projects/{project}", pageToken=token)
            )
            page: dict[str, Any] = self._execute(req, "list locations") or {}
            found += [str(loc.get("locationId", "")) for loc in page.get("locations", [])]
            token = page.get("nextPageToken")
            if not token:
                return found
