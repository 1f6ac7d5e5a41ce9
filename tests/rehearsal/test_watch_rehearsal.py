"""The upstream watch in `make rehearse` (issue 40, "Offline proof"): where its stages stand in
the flex-start lifecycle, and what they rest on. The whole run is tests/rehearsal/
test_rehearsal.py's flex-start lifecycle (the slow tier)."""

from __future__ import annotations

from pathlib import Path

from tools.rehearsal.lifecycle import Rehearsal
from tools.rehearsal.watch_stage import BETTER, EFFECTS, PINNED, WORSE, WatchStages

WATCH_STAGES = ["watch-setup", "watch-killed", "watch", "watch-worse", "watch-destroy-all"]


def test_the_flex_start_lifecycle_rehearses_the_upstream_watch(tmp_path: Path) -> None:
    stages = [s.name for s in Rehearsal("flex-start", tmp_path)._stages()]
    assert "watch" in stages
    assert stages.index("destroy") < stages.index("watch") < stages.index("destroy-all")
    # After the watched node is gone (one front-door port for the two nodes on this machine),
    # before the watched deployment's destroy-all (its secrets stay beside the watch's).
    start = stages.index("destroy") + 1
    assert stages[start : start + len(WATCH_STAGES)] == WATCH_STAGES
    assert stages[start + len(WATCH_STAGES)] == "destroy-all"


def test_spot_and_on_demand_lifecycles_have_no_watch(tmp_path: Path) -> None:
    """The watch's node is always flex-start: rehearsed once, in the flex-start lifecycle."""
    for model in ("spot", "on-demand"):
        stages = [s.name for s in Rehearsal(model, tmp_path / model)._stages()]
        assert not [s for s in stages if s.startswith("watch")], model


def test_the_three_builds_are_distinct_digests_with_known_effects() -> None:
    assert len({PINNED, BETTER, WORSE}) == 3
    assert all(len(d) == 64 and int(d, 16) >= 0 for d in (PINNED, BETTER, WORSE))
    # The better build is better and the worse worse by more than the verdict's 10% cv bar.
    assert EFFECTS[BETTER].factor > EFFECTS[PINNED].factor > EFFECTS[WORSE].factor
    assert max(e.cv for e in EFFECTS.values()) < 0.1


def test_the_watch_deployment_shares_no_identifier_with_the_watched_one(tmp_path: Path) -> None:
    """What watch-setup refuses: the same node, account, secret or bucket name in both."""
    from tpudeploy.config import DeployConfig, parse_config
    from tpudeploy.watchbudget import watch_data

    base = {"name": "gemma4-v5e", "project": "my-gemma-project", "watch": {"enabled": True}}
    cfg = parse_config(dict(base))
    wcfg = parse_config(watch_data(base, cfg, "vllm/vllm-tpu@sha256:" + PINNED))

    class Host(WatchStages):
        @property
        def cfg(self) -> DeployConfig:
            return cfg

    host = Host()
    assert host._shared_identifiers(wcfg) == []
    assert host._shared_identifiers(cfg) != []  # the check can fail: itself shares everything
