"""What the user should do about a TPU API error, from its status and message."""

from __future__ import annotations

from tpudeploy.facts import flex_start_zones_text
from tpudeploy.gcp.api_errors import ApiError, QueuedResourceError
from tpudeploy.iapssh import GCLOUD_TPUS
from tpudeploy.tpuvm.queued_resource.spec import QueuedResourceSpec


def hint_for(status: int, message: str, spec: QueuedResourceSpec | None = None) -> str:
    """Return what the user should do about an API error."""
    lower = message.lower()
    project = spec.project if spec else "PROJECT"
    if "quota" in lower:
        return (
            "quota: check TPU v5 lite pod quota in this zone "
            "(IAM & Admin > Quotas), request more, or delete SUSPENDED/FAILED queued resources "
            "that still hold it"
        )
    if status == 403:
        return (
            f"permissions or API disabled: run `gcloud services enable tpu.googleapis.com "
            f"--project={project}` and grant the caller roles/tpu.admin (plus "
            "roles/iam.serviceAccountUser on the node's service account)"
        )
    if status == 401:
        return "credentials rejected: run `gcloud auth application-default login`"
    if status == 400 and any(
        word in lower for word in ("flex_start", "flex-start", "provisioning model", "accelerator")
    ):
        zone = spec.zone if spec else "this zone"
        accelerator = spec.accelerator_type if spec else "v5litepod-1"
        known = flex_start_zones_text(accelerator) or f"no zone is recorded for {accelerator}"
        return (
            f"zone rule: {zone} refused flex-start {accelerator} (europe-west4-a/-b refuse "
            f"v5litepod-1 whatever the quota). Known to accept it: {known}. Set zone to one "
            "of those, or pick spot/on-demand"
        )
    if status == 409:
        return (
            "already exists or an operation is in progress: wait and run `status`, "
            "or run destroy first"
        )
    if status == 404:
        return "not found: check project and zone, and that tpu.googleapis.com is enabled"
    if status == 429 or status >= 500:
        return "the TPU API kept failing; try again in a few minutes"
    return "check the spec values named in the message"


def with_hint(exc: ApiError, spec: QueuedResourceSpec | None) -> QueuedResourceError:
    return QueuedResourceError(f"{exc}. What to do: {hint_for(exc.status, exc.api_message, spec)}")


def force_delete_argv(spec: QueuedResourceSpec) -> list[str]:
    """The gcloud line that deletes the queued resource (and its node) by hand, in the spec's
    own project: the user's gcloud default project may be another one."""
    return [
        *GCLOUD_TPUS,
        "queued-resources",
        "delete",
        spec.queued_resource_id,
        f"--zone={spec.zone}",
        f"--project={spec.project}",
        "--force",
    ]
