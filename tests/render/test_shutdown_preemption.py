"""The shutdown script says when it is a spot preemption: one boot-log entry, read from the
metadata server's instance/preempted, that the preemption alert's log-based metric counts (the
TPU VM has no documented log entry of its own for a preemption: tpudeploy/logsources.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.boot_sandbox import PROJECT, Node
from tools.rehearsal.fakes.logging_rules import parse_filter
from tpudeploy import logsources
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.platform import log_metrics_for


@pytest.fixture(scope="module")
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT, "provisioning": "spot"})


def _shipped(cfg: DeployConfig, payload: dict[str, object]) -> dict[str, object]:
    """The entry the Ops Agent makes of a boot-log line (the log contract)."""
    return {
        "logName": f"projects/{PROJECT}/logs/{logsources.TPUVM_LOG_IDS['boot']}",
        "labels": {logsources.DEPLOYMENT_LABEL: cfg.name},
        "jsonPayload": payload,
    }


def test_a_preempted_shutdown_writes_the_entry_the_alert_counts(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg, preempted="TRUE")
    shutdown = node.run("shutdown.sh")
    assert shutdown.returncode == 0, shutdown.stderr
    assert "spot preemption" in shutdown.stderr
    entries = node.boot_entries()
    assert [e["phase"] for e in entries] == [logsources.PREEMPTED_PHASE]
    counts = parse_filter(log_metrics_for(cfg)["preemptions"]["filter"])
    assert counts(_shipped(cfg, entries[0]))
    # another deployment's metric does not count this node's preemption
    other = parse_config({"project": PROJECT, "provisioning": "spot", "name": "other-one"})
    assert not parse_filter(log_metrics_for(other)["preemptions"]["filter"])(
        _shipped(cfg, entries[0])
    )
    node.assert_no_secret_leaked(shutdown)


@pytest.mark.parametrize("answer", ["FALSE", None])
def test_an_ordinary_shutdown_writes_no_preemption(
    tmp_path: Path, cfg: DeployConfig, answer: str | None
) -> None:
    # FALSE: a make destroy or a deadline stop; None: the metadata server does not answer 200
    node = Node(tmp_path, cfg, preempted=answer or 404)
    shutdown = node.run("shutdown.sh")
    assert shutdown.returncode == 0, shutdown.stderr
    assert node.boot_entries() == []
