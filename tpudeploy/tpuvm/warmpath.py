"""Whether a recreated node boots warm: the compile cache its predecessors saved, if any.

The node's startup script restores gs://BUCKET/xla/<key>/<image digest>.tar.gz before starting
vLLM (seed: 857 s cold, 497 s warm) and saves one after the first compile; the bucket outlives
every node (the secrets stack). A node recreated after a preemption boots warm exactly when an
archive exists under its config's key.
"""

from __future__ import annotations

from typing import Any

from tpudeploy.config import DeployConfig
from tpudeploy.gcp.apis import STORAGE
from tpudeploy.gcp.discovery import DiscoveryApi, build_service
from tpudeploy.render import compile_cache_key


def cache_prefix(cfg: DeployConfig) -> str:
    return f"xla/{compile_cache_key(cfg)}/"


class StorageApi(DiscoveryApi):
    """objects.list through the v1 discovery document; names only, never an object's content
    (STORAGE_EMULATOR_HOST: a loopback fake, tpudeploy/gcp/apis.py)."""

    API_NAME = "Cloud Storage API"

    def _build(self) -> Any:
        return build_service(api=STORAGE, version="v1")

    def has_objects(self, bucket: str, prefix: str) -> bool | None:
        """Whether any object name starts with `prefix`; None when the bucket does not exist."""
        req = self._service.objects().list(
            bucket=bucket, prefix=prefix, maxResults=1, fields="items(name)"
        )
        result: dict[str, Any] | None = self._execute(req, "list objects", allow_404=True)
        if result is None:
            return None
        return bool(result.get("items"))


def cache_saved(cfg: DeployConfig, project: str, api: StorageApi) -> bool:
    """True when a predecessor saved this config's compiled programs (any image digest)."""
    return bool(api.has_objects(cfg.compile_cache_bucket(project), cache_prefix(cfg)))
