"""Loopback fake of one TPU VM's metadata server: its attributes, its identity and the guest
attributes its boot reports (which the TPU API then shows to `make wait`)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from tools.rehearsal.fakes.base import Answer, LoopbackServer
from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.tpu import FakeTpuApi

_PREFIX = "/computeMetadata/v1/"


class FakeMetadata(LoopbackServer):
    """Serves the node `node_name` (projects/P/locations/Z/nodes/N) as the TPU API holds it."""

    def __init__(self, *, inventory: Inventory, tpu: FakeTpuApi, node_name: str) -> None:
        self.inventory = inventory
        self.tpu = tpu
        self.node_name = node_name
        super().__init__(self._route)

    @property
    def url(self) -> str:
        """The value for TPUDEPLOY_METADATA_URL."""
        return f"http://{self.host}/computeMetadata/v1"

    def _route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        # Like the real server: no Metadata-Flavor header, no answer (SSRF protection).
        if headers.get("metadata-flavor") != "Google":
            return 403, b"Missing Metadata-Flavor:Google header."
        url = urlsplit(path)
        if not url.path.startswith(_PREFIX):
            return 404, b"not found"
        key = url.path.removeprefix(_PREFIX)
        node = self.tpu.node(self.node_name)
        if node is None:
            return 503, b"this VM no longer exists"
        project = self.node_name.split("/")[1]
        if method == "PUT" and key.startswith("instance/guest-attributes/"):
            if (node.get("metadata") or {}).get("enable-guest-attributes") != "TRUE":
                return 403, b"guest attributes are disabled: metadata enable-guest-attributes"
            # The server parsed a JSON body (the watcher's tpudeploy/idle): the guest agent stores
            # the text, so JSON goes back to text, never to Python's repr of it.
            if isinstance(body, bytes):
                value = body.decode()
            elif isinstance(body, dict | list):
                value = json.dumps(body, separators=(",", ":"))
            else:
                value = "" if body is None else str(body)
            attribute = key.removeprefix("instance/guest-attributes/")
            self.tpu.set_guest_attribute(self.node_name, attribute, value)
            return 200, b""
        if method != "GET":
            return 405, b"method not allowed"
        if key == "project/project-id":
            return 200, project.encode()
        if key == "instance/preempted":
            # "TRUE" once Compute Engine preempts the VM (the Spot VM pages); the rehearsal's
            # node is never preempted.
            return 200, b"FALSE"
        if key == "instance/service-accounts/default/token":
            email = (node.get("serviceAccount") or {}).get("email")
            if not email:
                return 404, b"no service account on this VM"
            with self.inventory.locked() as inv:
                token = inv.mint_token(f"serviceAccount:{email}")
            return 200, json.dumps(
                {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}
            ).encode()
        endpoint = (node.get("networkEndpoints") or [{}])[0]
        if key == "instance/network-interfaces/0/ip" and endpoint.get("ipAddress"):
            return 200, str(endpoint["ipAddress"]).encode()
        external = (endpoint.get("accessConfig") or {}).get("externalIp")
        if key == "instance/network-interfaces/0/access-configs/0/external-ip" and external:
            return 200, str(external).encode()
        if key == "instance/service-accounts/default/email":
            return 200, str((node.get("serviceAccount") or {}).get("email", "")).encode()
        if key.startswith("instance/attributes/"):
            found = (node.get("metadata") or {}).get(key.removeprefix("instance/attributes/"))
            return (200, str(found).encode()) if found is not None else (404, b"not found")
        return 404, b"not found"
