"""Every gcloud command line the project runs or tells the user to run is accepted by the real
gcloud's argument parser.

GA `gcloud compute tpus tpu-vm ssh` refuses --tunnel-through-iap ("unrecognized arguments ...
available in one or more alternate release tracks"), which broke make tunnel, make bench and
make wait's hint while their tests only looked for the flag. Here gcloud itself parses each
command line, with an empty configuration: it gets past parsing, then stops for want of an
account, before any request (and any request would meet a closed loopback port).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tpudeploy.bench.commands import Cell, NodeTarget, cell_command, image_info_command
from tpudeploy.bench.settings import SweepSettings
from tpudeploy.config import parse_config
from tpudeploy.iapssh import ssh_argv
from tpudeploy.tpuvm import frontdoor
from tpudeploy.tpuvm.flex import queued_resource_spec
from tpudeploy.tpuvm.queued_resource.hints import force_delete_argv

CFG = parse_config({"project": "ssh-proj-123"})
TARGET = NodeTarget(CFG.node_id, CFG.zone, CFG.project)
NO_ACCOUNT = "You do not currently have an active account selected"

GCLOUD = shutil.which("gcloud")
pytestmark = [
    pytest.mark.skipif(
        GCLOUD is None, reason="gcloud is not on PATH: these tests need the real Cloud SDK's parser"
    ),
    # Each starts the Cloud SDK's own Python (1.2 s of CPU before it parses): the slow tier,
    # which CI runs.
    pytest.mark.slow_tier,
]


def gcloud_parse(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    assert argv[0] == "gcloud"
    closed = "http://127.0.0.1:9"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": closed + "/",
        "HTTPS_PROXY": closed,
        "HTTP_PROXY": closed,
    }
    return subprocess.run(
        [str(GCLOUD), *argv[1:]],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_parsed(result: subprocess.CompletedProcess[str]) -> None:
    # gcloud: "You do not currently have this command group installed. Using it requires the
    # installation of components: [alpha]"
    if "installation of components" in " ".join(result.stderr.split()):
        pytest.skip("this gcloud lacks the alpha component (gcloud components install alpha)")
    assert "unrecognized arguments" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stderr
    assert NO_ACCOUNT in result.stderr, result.stderr


COMMANDS = {
    "make tunnel": frontdoor.tunnel_command(CFG, "ssh-proj-123", 9443),
    "make bench, a cell": cell_command(
        SweepSettings(), Cell(1024, 16, 1, 7), run_id="r1", target=TARGET
    ),
    "make bench, the image": image_info_command(SweepSettings(), TARGET),
    # What make wait prints for the user to finish with a command of their own.
    "make wait's hint": [*ssh_argv(CFG.node_id, CFG.zone, CFG.project), "--", "uptime"],
    # A flex-start delete that timed out: the way out it prints.
    "the force delete": force_delete_argv(queued_resource_spec(CFG, "ssh-proj-123")),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_gcloud_accepts_every_command_line(name: str, tmp_path: Path) -> None:
    assert_parsed(gcloud_parse(COMMANDS[name], tmp_path))


def test_the_ga_track_would_refuse_the_iap_flag(tmp_path: Path) -> None:
    """Why ssh_argv says `alpha`: the same line on the GA track is refused while parsing."""
    argv = ssh_argv(CFG.node_id, CFG.zone, CFG.project)
    assert argv[:2] == ["gcloud", "alpha"]
    result = gcloud_parse(["gcloud", *argv[2:], "--", "uptime"], tmp_path)
    assert result.returncode == 2
    assert "unrecognized arguments" in result.stderr
    assert "--tunnel-through-iap" in result.stderr
