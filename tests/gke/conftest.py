"""Fixtures for the GKE tests: the pod's real front door (tests/gke/pod_door.py), started in
front of a backend by the module that needs it and stopped when that module is done."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from tests.gke.pod_door import PodDoor, running


@pytest.fixture(scope="module")
def pod_door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], PodDoor]]:
    """pod_door(backend_port): the front door running in front of it, for this module."""
    with ExitStack() as stack:

        def start(backend_port: int) -> PodDoor:
            tmp = tmp_path_factory.mktemp("pod-door")
            return stack.enter_context(running(tmp, backend_port))

        yield start
