"""`make usage` on a TPU VM (tpudeploy/tpuvm/accesslog.py): the command sent over IAP SSH, run
here by bash against a stand-in `docker` that answers as docker does, and what comes back."""

from __future__ import annotations

import datetime
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from tpudeploy.iapssh import TPU_VM_SSH
from tpudeploy.platform import parse_config
from tpudeploy.tpuvm import accesslog

CFG = parse_config({"project": "usage-proj-1"}, source="test")
ACCESS = '{"time": "2026-12-03T11:59:00+00:00", "client": "ci", "status": "200"}'
# docker logs replays the container's stdout on stdout and its stderr on stderr.
DOCKER = f"""#!/bin/sh
case "$1" in
  inspect) [ "$2" = --format ] && [ "$3" = '{{{{.State.StartedAt}}}}' ] && [ "$4" = "$NAME" ] \\
             && echo 2026-12-03T05:01:02.123456789Z && exit 0; exit 9 ;;
  logs) [ "$2" = --since ] && [ "$3" = 3600s ] && [ "$4" = "$NAME" ] || exit 9
        echo '{ACCESS}'; echo '2026/12/03 11:00:00 [error] 7#7: upstream timed out' >&2 ;;
esac
"""


@pytest.fixture
def node_shell(tmp_path: Path) -> accesslog.Runner:
    (tmp_path / "docker").write_text(DOCKER)
    (tmp_path / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    for name in ("docker", "sudo"):
        (tmp_path / name).chmod(0o755)

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        assert list(argv[: len(TPU_VM_SSH)]) == list(TPU_VM_SSH)
        assert argv[len(TPU_VM_SSH)] == CFG.node_id and "--tunnel-through-iap" in argv
        command = argv[argv.index("--command") + 1]
        env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "NAME": CFG.proxy.container_name}
        return subprocess.run(["bash", "-c", command], capture_output=True, env=env, check=False)

    return run


def test_reads_the_proxy_containers_stdout_and_start(node_shell: accesslog.Runner) -> None:
    (replica,) = accesslog.access_logs(CFG, "usage-proj-1", 3600, run=node_shell)
    assert replica.name == CFG.node_id and replica.chips == 1
    assert replica.started == datetime.datetime(2026, 12, 3, 5, 1, 2, 123456, tzinfo=datetime.UTC)
    assert list(replica.lines) == [ACCESS]  # the error log (stderr) is not an access line


def test_a_failed_ssh_names_the_node_and_what_to_run() -> None:
    def refused(argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(argv, 255, b"", b"ERROR: (gcloud) 4033: not authorized")

    with pytest.raises(accesslog.AccessLogError, match=f"on {CFG.node_id}: .*make status"):
        accesslog.access_logs(CFG, "usage-proj-1", 60, run=refused)

    def empty(argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(argv, 0, b"not a time\n", b"")

    with pytest.raises(accesslog.AccessLogError, match="make wait"):
        accesslog.access_logs(CFG, "usage-proj-1", 60, run=empty)
