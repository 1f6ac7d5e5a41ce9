"""The idle stop in the rendered startup script (issue 39), without a boot: what the watcher is
started with, per deployment, and nothing when [idle] is off."""

from __future__ import annotations

from pathlib import Path

from tpudeploy import names
from tpudeploy.config import parse_config
from tpudeploy.node import idlewatch
from tpudeploy.render import render_startup_script
from tpudeploy.tpuvm.deadline_target import node_url, qr_url

SPOT = {"project": "idle-render-1", "provisioning": "spot", "idle": {"stop_after": "45m"}}


def test_the_watcher_is_shipped_with_its_values() -> None:
    cfg = parse_config(SPOT)
    script = render_startup_script(cfg)
    assert 'readonly IDLE_STOP_AFTER="${TPUDEPLOY_IDLE_STOP_AFTER:-2700}"' in script
    # The watcher reads every minute on a node (config/idle_table.py INTERVAL_S).
    assert 'readonly IDLE_INTERVAL="${TPUDEPLOY_IDLE_INTERVAL_SECONDS:-60}"' in script
    assert f"readonly IDLE_UNIT=tpudeploy-idle-{cfg.name}\n" in script
    assert 'readonly TPU_API="${TPUDEPLOY_TPU_URL:-https://tpu.googleapis.com/v2}"' in script
    assert f"readonly IDLE_DELETE_PATH=locations/{cfg.zone}/nodes/{cfg.node_id}\n" in script
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


FLEX_PROJECT = "idle-render-1"
FLEX: dict[str, object] = {
    "project": FLEX_PROJECT,
    "provisioning": "flex-start",
    "zone": "us-central1-a",
    "max_run_duration": "4h",
    "idle": {"stop_after": "30m"},
}


def _delete_url(script: str) -> str:
    """The watcher's --delete-url as the script builds it, with the project filled in."""
    api = "https://tpu.googleapis.com/v2"
    line = next(x for x in script.splitlines() if x.startswith("readonly IDLE_DELETE_PATH="))
    path = line.removeprefix("readonly IDLE_DELETE_PATH=").strip("'")
    assert '--delete-url "$TPU_API/projects/$PROJECT_ID/$IDLE_DELETE_PATH"' in script
    return f"{api}/projects/{FLEX_PROJECT}/{path}"


def test_a_flex_start_node_deletes_its_queued_resource_and_only_its_own() -> None:
    """Deleting the node alone would leave the queued resource (and the TPU API refuses a node
    a queued resource owns): the watcher deletes the queued resource, force=true taking the
    node first (tools/rehearsal/fakes/tpu_rules.py)."""
    a = parse_config({**FLEX, "name": "team-a"})
    b = parse_config({**FLEX, "name": "team-b"})
    url_a = _delete_url(render_startup_script(a))
    url_b = _delete_url(render_startup_script(b))
    assert url_a == qr_url(FLEX_PROJECT, a.zone, a.queued_resource_id)
    assert url_b == qr_url(FLEX_PROJECT, b.zone, b.queued_resource_id)
    assert url_a.endswith("/queuedResources/team-a-qr?force=true")
    assert url_a != url_b
