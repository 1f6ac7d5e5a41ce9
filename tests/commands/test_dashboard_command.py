"""make dashboard: the console URL and the gcloud command from the secrets stack's state."""

from __future__ import annotations

import json
from pathlib import Path

from tpudeploy.config import parse_config
from tpudeploy.dashboardcli import lines
from tpudeploy.terraform import local_state_path


def test_from_local_state_the_console_url_and_the_describe_command(tmp_path: Path) -> None:
    cfg = parse_config({"project": "proj-1"})
    state = {
        "resources": [
            {
                "mode": "managed",
                "type": "google_monitoring_dashboard",
                "name": "dashboard",
                "instances": [{"attributes": {"id": "projects/123/dashboards/abc-9"}}],
            }
        ]
    }
    local_state_path(cfg.secrets_stack_name, tmp_path).write_text(json.dumps(state), "utf-8")
    out = lines(cfg, tmp_path)
    assert out[0].endswith(
        "https://console.cloud.google.com/monitoring/dashboards/builder/abc-9?project=proj-1"
    )
    assert "gcloud monitoring dashboards describe projects/123/dashboards/abc-9" in out[1]


def test_without_state_it_says_how_to_find_it_by_name(tmp_path: Path) -> None:
    cfg = parse_config({"project": "proj-1", "name": "team-b"})
    out = "\n".join(lines(cfg, tmp_path))
    assert "no dashboard in local state" in out
    assert "gcloud monitoring dashboards list --project=proj-1" in out
    assert 'displayName="team-b: vLLM' in out
