"""make bench says why it could not reach the node (issue 23 item 5): gcloud not logged in is
not "the container is not running", and gcloud's own words reach the user whole."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tpudeploy.bench.commands import NodeTarget
from tpudeploy.bench.settings import SweepSettings
from tpudeploy.bench.sweep import ExecResult, SweepError, read_image_info

TARGET = NodeTarget("gemma4-v5e", "us-west4-a", "bench-proj-1")
NOT_LOGGED_IN = (
    "ERROR: (gcloud.alpha.compute.tpus.tpu-vm.ssh) You do not currently have an active account "
    "selected.\nPlease run:\n\n  $ gcloud auth login\n\nto obtain new credentials.\n"
)


def _answering(returncode: int, stderr: str):  # type: ignore[no-untyped-def]
    def run(argv: Sequence[str], *, stdin: bytes) -> ExecResult:
        return ExecResult(returncode, b"", stderr.encode())

    return run


def test_gcloud_not_logged_in_is_said_as_such() -> None:
    with pytest.raises(SweepError) as caught:
        read_image_info(SweepSettings(), TARGET, _answering(1, NOT_LOGGED_IN))
    text = str(caught.value)
    assert "gcloud is not logged in" in text and "`gcloud auth login`" in text
    assert "is not running" not in text
    # gcloud's own line, whole: the old message kept the last 300 characters, cut mid-word.
    first = NOT_LOGGED_IN.splitlines()[0]
    assert f'"{first}"' in text


def test_a_container_that_is_not_there_is_still_said_so() -> None:
    stderr = "Error: No such object: vllm-gemma4\n"
    with pytest.raises(SweepError, match="is not running on node gemma4-v5e") as caught:
        read_image_info(SweepSettings(), TARGET, _answering(1, stderr))
    assert "Error: No such object: vllm-gemma4" in str(caught.value)
