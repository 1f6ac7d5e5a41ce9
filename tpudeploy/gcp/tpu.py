"""Every TPU API call the project makes: v2alpha1 through googleapiclient's discovery client."""

from __future__ import annotations

from typing import Any

from tpudeploy.gcp.discovery import DiscoveryApi


# One client style for the whole TPU API (queued resources, make status/wait/smoke/recover):
# google-cloud-tpu 1.28 does not model flex-start's provisioningModel and runDuration; the
# v2alpha1 discovery document shipped in google-api-python-client does.
class TpuApi(DiscoveryApi):
    """The handful of v2alpha1 calls the project makes; googleapiclient retries 429/5xx."""

    def _locations(self) -> Any:
        return self._service.projects().locations()

    def get_queued_resource(self, name: str) -> dict[str, Any] | None:
        req = self._locations().queuedResources().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get queued resource", allow_404=True)
        return result

    def create_queued_resource(
        self, parent: str, queued_resource_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        req = (
            self._locations()
            .queuedResources()
            .create(parent=parent, queuedResourceId=queued_resource_id, body=body)
        )
        result: dict[str, Any] = self._execute(req, "create queued resource")
        return result

    def delete_queued_resource(self, name: str) -> dict[str, Any] | None:
        # force=true deletes the QR's node with it (otherwise an ACTIVE QR refuses deletion).
        req = self._locations().queuedResources().delete(name=name, force=True)
        result: dict[str, Any] | None = self._execute(req, "delete queued resource", allow_404=True)
        return result

    def get_node(self, name: str) -> dict[str, Any] | None:
        req = self._locations().nodes().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get node", allow_404=True)
        return result

    def get_guest_attributes(self, name: str, query_path: str) -> dict[str, Any] | None:
        """What the node's startup script reported under `query_path`; None while it has not
        reported (the API answers 404 until the first value is set, or without the node)."""
        req = (
            self._locations().nodes().getGuestAttributes(name=name, body={"queryPath": query_path})
        )
        result: dict[str, Any] | None = self._execute(req, "get guest attributes", allow_404=True)
        return result

    def get_operation(self, name: str) -> dict[str, Any] | None:
        req = self._locations().operations().get(name=name)
        result: dict[str, Any] | None = self._execute(req, "get operation", allow_404=True)
        return result
