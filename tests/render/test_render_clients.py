"""The rendering of [access] clients and the files the node writes beside nginx.conf, checked
fast (no nginx, no boot): what make mutants judges tpudeploy/render.py by."""

from __future__ import annotations

import re

from tpudeploy import render
from tpudeploy.config import parse_config

CFG = parse_config(
    {"project": "render-clients-1", "access": {"clients": ["planner", "batch-jobs"]}}, source="test"
)


def test_each_client_gets_zones_and_variables_nginx_can_name() -> None:
    """nginx variable names stop at a hyphen (`$api_limit_key_batch-jobs` would be
    `$api_limit_key_batch` then "-jobs"), so a client's zones and variables use underscores; a
    client name takes no underscore, so each stays its own."""
    conf = render.render_proxy_config(CFG)
    variables = set(re.findall(r"\$api_limit_key_([A-Za-z0-9_-]+)", conf))
    zones = set(re.findall(r"zone=(?:streams|rate)_([A-Za-z0-9_-]+)", conf))
    assert variables == {"planner", "batch_jobs"}
    assert zones == {"planner", "batch_jobs"}
    # The client's own name is what a request is matched against and logged as.
    assert '"client:batch-jobs"' in conf


def test_the_startup_script_writes_the_key_map_program_and_the_usage_counter_verbatim() -> None:
    script = render.render_startup_script(CFG)
    assert f"<<'KEYMAP_PY'\n{render.keymap_source()}KEYMAP_PY\n" in script
    assert f"<<'USAGE_JS'\n{render.usage_js_source()}USAGE_JS\n" in script


def test_the_shipped_sources_are_ascii() -> None:
    """Read as UTF-8 or in any ASCII-compatible locale, they are the same text
    (tests/mutants_equivalent.toml relies on it)."""
    render.keymap_source().encode("ascii")
    render.usage_js_source().encode("ascii")
    assert render.keymap_source().startswith('"""The front door')
