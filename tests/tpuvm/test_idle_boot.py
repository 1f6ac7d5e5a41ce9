"""The idle stop on the node's boot (issue 39): the startup script starts the watcher after
`ready` only, with this deployment's node. Runs the rendered script in the boot sandbox
(tests/boot_sandbox.py); tests/render/test_idle_render.py checks the rendering without a boot."""

from __future__ import annotations

from pathlib import Path

from tests.boot_sandbox import PROJECT, Node
from tpudeploy.config import parse_config
from tpudeploy.node import idlewatch
from tpudeploy.tpuvm.deadline_target import node_url

SPOT = {"project": PROJECT, "provisioning": "spot", "idle": {"stop_after": "30m"}}


def test_the_watcher_starts_after_ready_with_this_nodes_delete(tmp_path: Path) -> None:
    cfg = parse_config(SPOT)
    node = Node(tmp_path, cfg)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    runs = [
        c for c in node.calls("systemd-run") if f"--unit=tpudeploy-idle-{cfg.name}" in c["argv"]
    ]
    (run,) = runs
    argv = run["argv"]
    # The deadline job's DELETE, the same URL: tpudeploy/tpuvm/deadline_target.node_url.
    delete = argv[argv.index("--delete-url") + 1]
    assert delete == node_url(PROJECT, cfg.zone, cfg.node_id)
    assert argv[argv.index("--stop-after") + 1] == "1800"
    metrics = argv[argv.index("--metrics-url") + 1]
    assert metrics == f"http://127.0.0.1:{cfg.vllm.port}/metrics"
    # The shipped watcher is this repository's, on the runtime tmpfs.
    script = Path(argv[argv.index("--metrics-url") - 1])
    assert node.run_dir in script.parents
    assert script.read_text() == Path(idlewatch.__file__).read_text()
    # After ready: the boot never counts as idle time.
    assert node.phases()[-1] == "ready"
    assert boot.stderr.index("phase ready") < boot.stderr.index("idle stop tpudeploy-idle-")
