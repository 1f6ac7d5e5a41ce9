"""The idle stop in the rendered startup script (issue 39), without a boot: what the watcher is
started with, per deployment, and nothing when [idle] is off."""

from __future__ import annotations

from pathlib import Path

from tpudeploy import names
from tpudeploy.config import parse_config
from tpudeploy.node import idlewatch
from tpudeploy.render import render_startup_script
from tpudeploy.tpuvm.deadline_target import node_url

SPOT = {"project": "idle-render-1", "provisioning": "spot", "idle": {"stop_after": "45m"}}


def test_the_watcher_is_shipped_with_its_values() -> None:
    cfg = parse_config(SPOT)
    script = render_startup_script(cfg)
    assert 'readonly IDLE_STOP_AFTER="${TPUDEPLOY_IDLE_STOP_AFTER:-2700}"' in script
    # The watcher reads every minute on a node (config/idle_table.py INTERVAL_S).
    assert 'readonly IDLE_INTERVAL="${TPUDEPLOY_IDLE_INTERVAL_SECONDS:-60}"' in script
    assert f"readonly IDLE_UNIT=tpudeploy-idle-{cfg.name}\n" in script
    assert 'readonly TPU_API="${TPUDEPLOY_TPU_URL:-https://tpu.googleapis.com/v2}"' in script
    assert f"readonly IDLE_NODE_PATH=locations/{cfg.zone}/nodes/{cfg.node_id}\n" in script
    source = Path(idlewatch.__file__).read_text()
    assert source in script
    assert source.isascii()  # so any locale reads it the same
    # Started after ready, once.
    main = script[script.index("\nmain() {") :]
    assert (
        main.index("report ready") < main.index("start_idle_watch") < main.index("upload_pending")
    )


def test_off_by_default_no_watcher() -> None:
    script = render_startup_script(parse_config({**SPOT, "idle": {}}))
    assert "idlewatch" not in script and "start_idle_watch() { :; }" in script


def test_two_deployments_name_only_their_own_node() -> None:
    a = parse_config({**SPOT, "name": "team-a"})
    b = parse_config({**SPOT, "name": "team-b"})
    script_a, script_b = render_startup_script(a), render_startup_script(b)
    assert f"nodes/{a.node_id}\n" in script_a and f"nodes/{b.node_id}" not in script_a
    assert f"nodes/{b.node_id}\n" in script_b and f"nodes/{a.node_id}" not in script_b
    assert "tpudeploy-idle-team-a" in script_a and "tpudeploy-idle-team-a" not in script_b


def test_the_tpu_api_is_the_deadline_jobs() -> None:
    assert node_url("p", "z", "n") == f"{names.TPU_API}/projects/p/locations/z/nodes/n"
