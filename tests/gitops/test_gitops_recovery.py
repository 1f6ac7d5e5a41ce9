"""The recover workflow's read-only selection: which auto_recover deployments get `make recover`.

It runs under a bare python3 (no pydantic), so it restates `make recover`'s rules on gcloud's
JSON; here both are run on the same situations and must agree, for every node state the TPU API
can report.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.tpuvm.test_recover import NODE_STATES
from tpudeploy import deadline, gitops
from tpudeploy.config import parse_config
from tpudeploy.gitops.recovery import judge
from tpudeploy.tpuvm import recover
from tpudeploy.tpuvm.addresses import DENY_ALL_ADDRESS

NOW = datetime(2026, 8, 9, 12, 0, tzinfo=UTC)
PROJECT = "gitops-rec-1"


def write(root: Path, rel: str, body: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    base = f'state_bucket = "tfstate-x"\npipeline = true\nproject = "{PROJECT}"\n'
    write(
        tmp_path,
        "deployments/a.toml",
        base + 'name = "spot-a"\nprovisioning = "spot"\nauto_recover = true\n',
    )
    write(
        tmp_path,
        "deployments/b.toml",
        base + 'name = "spot-b"\nprovisioning = "spot"\nmax_run_duration = "none"\n'
        "auto_recover = true\n",
    )
    write(tmp_path, "deployments/c.toml", base + 'name = "spot-c"\nprovisioning = "spot"\n')
    write(tmp_path, "deployments/d.toml", base + 'name = "flex-d"\n')
    return tmp_path


def _node(name: str, state: str) -> dict[str, object]:
    return {"name": f"projects/{PROJECT}/locations/us-west4-a/nodes/{name}", "state": state}


def _job(name: str, situation: str) -> list[dict[str, object]]:
    base = {
        "name": f"projects/{PROJECT}/locations/us-west4/jobs/{name}-deadline",
        "state": "ENABLED",
    }
    if situation == "pending":
        return [{**base, "scheduleTime": "2026-08-09T15:00:00Z"}]
    if situation == "fired":
        return [
            {
                **base,
                "scheduleTime": "2027-08-09T11:00:00Z",
                "lastAttemptTime": "2026-08-09T11:00:02Z",
            }
        ]
    return []


@pytest.mark.parametrize("deployed", [True, False])
@pytest.mark.parametrize("situation", ["pending", "fired", "missing", "none"])
@pytest.mark.parametrize("state", NODE_STATES)
def test_selection_agrees_with_make_recover(
    tmp_path: Path, state: str, situation: str, deployed: bool
) -> None:
    extra = 'max_run_duration = "none"\n' if situation == "none" else ""
    write(
        tmp_path,
        "deployments/x.toml",
        f'name = "x-node"\nstate_bucket = "b"\npipeline = true\n'
        f'provisioning = "spot"\nauto_recover = true\n{extra}',
    )
    deps = gitops.pipeline_deployments(tmp_path)
    nodes = [] if state == "NOT_FOUND" else [_node("x-node", state)]
    jobs = _job("x-node", situation) if deployed else []
    firewalls: list[dict[str, object]] = [{"name": "x-node-deny-all"}] if deployed else []
    (verdict,) = judge(deps, nodes=nodes, jobs=jobs, firewalls=firewalls, now=NOW)

    cfg = parse_config(
        {
            "name": "x-node",
            "provisioning": "spot",
            **({"max_run_duration": "none"} if situation == "none" else {}),
        }
    )
    view = deadline.job_view(jobs[0] if jobs else None, NOW) if cfg.deadline_seconds else None
    decision = recover.decide(
        cfg, recover.Live("spot node x-node", state, view), recover.RECOVER, NOW
    )
    # make recover acts on a missing node only when the stack is deployed (its state holds the
    # deny-all rule); the selection sees the rule itself.
    expected = decision.acts and (decision.when_in_state != DENY_ALL_ADDRESS or deployed)
    assert verdict.recover == expected, (verdict.line, decision.summary)
    assert verdict.line.startswith("- x-node: node ")


def test_only_auto_recover_spot_and_on_demand_are_watched(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gitops.main(["--root", str(repo), "recover-targets"]) == 0
    assert capsys.readouterr().out == f"{PROJECT} us-west4-a us-west4\n"


def test_select_cli_prints_the_matrix_and_a_summary(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = repo / "nodes.json"
    nodes.write_text(
        json.dumps(
            [_node("spot-a", "PREEMPTED"), _node("spot-b", "READY"), _node("spot-c", "PREEMPTED")]
        )
    )
    jobs = repo / "jobs.json"
    future = (datetime.now(UTC) + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    jobs.write_text(json.dumps([{**_job("spot-a", "pending")[0], "scheduleTime": future}]))
    empty = repo / "empty.json"
    empty.write_text("")
    summary = repo / "summary.md"
    args = [
        "--root",
        str(repo),
        "recover-select",
        "--nodes-json",
        str(nodes),
        "--jobs-json",
        str(jobs),
    ]
    assert gitops.main([*args, "--firewalls-json", str(empty), "--summary", str(summary)]) == 0
    matrix = json.loads(capsys.readouterr().out)
    # spot-c is preempted too, but did not ask for auto_recover.
    assert [m["name"] for m in matrix] == ["spot-a"]
    assert matrix[0]["environment"] == "spot-a" and matrix[0]["deploy_account"] == "spot-a-apply"
    text = summary.read_text()
    assert "- spot-a: node PREEMPTED" in text and "recovery job started" in text
    assert "- spot-b: node READY: nothing to recover" in text
    assert "spot-c" not in text
