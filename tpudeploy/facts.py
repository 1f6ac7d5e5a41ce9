"""Facts from the build log and Google's documentation that several modules need; each once.

Plain data with its source, importable by everything (no pydantic, no third-party import): the
GitOps helper runs it with a bare python3 before `make install`.
"""

from __future__ import annotations

# Where flex-start was seen to work, per accelerator type: data, not scattered ifs. The build
# log verified us-west4-a on 2026-08-09; Google's documentation lists us-central1-a for v5e
# flex-start serving. europe-west4-a and -b refuse v5litepod-1 flex-start whatever the quota
# ("FLEX_START provisioning model is not supported for accelerator type").
FLEX_START_ZONES: dict[str, dict[str, str]] = {
    "v5litepod-1": {
        "us-west4-a": "build log, verified 2026-08-09 (QR reached ACTIVE)",
        "us-central1-a": "Google Cloud TPU documentation, v5e flex-start serving",
    },
}
FLEX_START_REFUSED_ZONES: dict[str, str] = {
    "europe-west4-a": "refused at the API in the build log regardless of quota",
    "europe-west4-b": "refused at the API in the build log regardless of quota",
}


def flex_start_zones_text(accelerator_type: str) -> str:
    """The known-good flex-start zones of one accelerator type, for messages."""
    known = FLEX_START_ZONES.get(accelerator_type, {})
    return ", ".join(f"{zone} ({source})" for zone, source in known.items())
