"""Create, wait for, delete and inspect a flex-start TPU QueuedResource through the v2alpha1 API."""

# spec.py is the request, api.py the HTTP calls, hints.py what to do about an API error,
# states.py what the states mean, client.py the create/delete/status operations and cli.py the
# command the Terraform provisioners run. Standard library only at import (googleapiclient loads
# when the first call is built): the GitOps helper imports the timeouts under a bare python3.

from tpudeploy.gcp.api_errors import ApiError, Interrupted, QueuedResourceError
from tpudeploy.gcp.discovery import build_service
from tpudeploy.gcp.tpu import TpuApi
from tpudeploy.tpuvm.queued_resource.client import (
    DEFAULT_CLEANUP_TIMEOUT,
    DEFAULT_CREATE_TIMEOUT,
    DEFAULT_DELETE_TIMEOUT,
    DEFAULT_POLL,
    QueuedResourceClient,
    create,
    delete,
    format_status,
    status,
)
from tpudeploy.tpuvm.queued_resource.hints import hint_for
from tpudeploy.tpuvm.queued_resource.provisioner import POLL_ENV, SPEC_ENV, main
from tpudeploy.tpuvm.queued_resource.spec import (
    DEFAULT_SCOPES,
    SPEC_LABEL,
    QueuedResourceSpec,
    spec_differences,
)
from tpudeploy.tpuvm.queued_resource.states import DEAD_STATES, WAITING_STATES

__all__ = [
    "DEAD_STATES",
    "DEFAULT_CLEANUP_TIMEOUT",
    "DEFAULT_CREATE_TIMEOUT",
    "DEFAULT_DELETE_TIMEOUT",
    "DEFAULT_POLL",
    "DEFAULT_SCOPES",
    "POLL_ENV",
    "SPEC_ENV",
    "SPEC_LABEL",
    "WAITING_STATES",
    "ApiError",
    "Interrupted",
    "QueuedResourceClient",
    "QueuedResourceError",
    "QueuedResourceSpec",
    "TpuApi",
    "build_service",
    "create",
    "delete",
    "format_status",
    "hint_for",
    "main",
    "spec_differences",
    "status",
]
