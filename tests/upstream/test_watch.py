"""The upstream watch's run: budget refusal, resume after a kill, better / worse / accept-fail."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tools import tune_example
from tools.tune_example import Effect
from tpudeploy.accept import Verdict
from tpudeploy.config import parse_config
from tpudeploy.tune.runner import StepResult
from tpudeploy.upstream.pinfile import PIN_JSON
from tpudeploy.upstream.registry import Release
from tpudeploy.upstream.watchrun import (
    PR_BODY,
    RUN_FILE,
    VERDICT_JSON,
    Outcome,
    Watch,
)
from tpudeploy.watchbudget import watch_data

PINNED = "a" * 64
NEW = "b" * 64
BASE: dict[str, Any] = {
    "name": "gemma4-staging",
    "project": "my-gemma-project",
    "vllm": {"image": f"vllm/vllm-tpu:nightly@sha256:{PINNED}"},
    "watch": {"enabled": True, "budget_usd": 20.0, "time_limit": "3h"},
}
ROWS_PASS = [
    Verdict("chat", "pass", 1.0, "'hello'"),
    Verdict("tool call", "pass", 1.0, "get_weather(Paris)"),
    Verdict("image", "pass", 2.0, "red and blue"),
]


class Killed(BaseException):
    """The runner's process is gone (the job was cancelled): nothing after runs, no finally."""


class FakeCloud:
    """Stands in for `make destroy/deploy/wait/bench` against one project: what is deployed
    bills; each build's throughput comes from its image's digest (the sweep's results are
    written as `vllm bench serve` saves them). `kill_at`: the call (target, n-th) at which the
    process dies, after which no call has any effect."""

    def __init__(
        self,
        effects: Mapping[str, Effect],
        *,
        kill_at: tuple[str, int] | None = None,
        boot_fails: Sequence[str] = (),
    ) -> None:
        self.effects, self.kill_at, self.boot_fails = effects, kill_at, boot_fails
        self.deployed: dict[str, str] = {}  # deployment name -> image digest (billing)
        self.calls: list[tuple[str, str]] = []
        self.killed = False

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> StepResult:
        if self.killed:
            raise Killed
        target = argv[1]
        data = tomllib.loads(Path(env["DEPLOY_CONFIG"]).read_text(encoding="utf-8"))
        name, digest = data["name"], data["vllm"]["image"].rpartition("sha256:")[2]
        self.calls.append((target, digest[:1]))
        if self.kill_at and self.kill_at == (target, self.calls.count((target, digest[:1]))):
            self.killed = True
            if target == "deploy":
                self.deployed[name] = digest  # killed after the node was created
            raise Killed
        if target == "destroy":
            self.deployed.pop(name, None)
        elif target == "deploy":
            self.deployed[name] = digest
        elif target == "wait" and digest in self.boot_fails:
            return StepResult(1, "boot-log check failed: KV cache dtype (fake)")
        elif target == "bench":
            out = Path(next(a for a in argv if a.startswith("OUT="))[4:])
            round_ = int(out.name.removeprefix("round-"))
            out.mkdir(parents=True, exist_ok=True)
            for ctx, c in ((128, 1), (128, 16), (1024, 1), (1024, 16)):
                rec = tune_example.record(ctx, c, 1, self.effects[digest], digest[:8], round_)
                (out / f"ctx{ctx}-c{c}-r1.json").write_text(json.dumps(rec))
        return StepResult(0, "")


def registry(digest: str):  # type: ignore[no-untyped-def]
    asked: list[tuple[str, str]] = []

    def latest(repository: str, tag: str) -> Release:
        asked.append((repository, tag))
        return Release(tag, digest, "2026-12-01T00:00:00Z")

    latest.asked = asked  # type: ignore[attr-defined]
    return latest


def run(
    tmp_path: Path,
    cloud: FakeCloud,
    *,
    digest: str = NEW,
    rows: Sequence[Verdict] = ROWS_PASS,
    base: Mapping[str, Any] = BASE,
) -> Outcome:
    cfg = parse_config(dict(base))
    accepted: list[Path] = []

    def accept_rows(config: Path) -> Sequence[Verdict]:
        accepted.append(config)
        return rows

    return Watch(
        cfg,
        base,
        tmp_path,
        step=cloud,
        latest=registry(digest),
        accept_rows=accept_rows,
        log=open("/dev/null", "w"),
    ).run()


def artifact(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp_path / VERDICT_JSON).read_text())
    return data


BETTER = {PINNED: Effect(1.0, 0.01), NEW: Effect(1.10, 0.01)}
WORSE = {PINNED: Effect(1.0, 0.01), NEW: Effect(0.90, 0.01)}


def test_a_better_build_that_passes_accept_gets_a_pull_request_body(tmp_path: Path) -> None:
    cloud = FakeCloud(BETTER)
    outcome = run(tmp_path, cloud)
    assert outcome.status == "proposed", outcome.reasons
    assert not cloud.deployed  # nothing bills after the run
    assert cloud.calls[0] == ("destroy", "a")  # a leftover of an earlier run goes first
    assert cloud.calls[-1][0] == "destroy"
    # Both builds measured, each round on a fresh node: 3 rounds x 2 builds.
    assert sum(1 for c in cloud.calls if c[0] == "bench") == 6
    assert {d for t, d in cloud.calls if t == "bench"} == {"a", "b"}
    body = (tmp_path / PR_BODY).read_text()
    assert f"vllm/vllm-tpu:nightly@sha256:{NEW}" in body and "tool call" in body
    assert json.loads((tmp_path / PIN_JSON).read_text()) == {
        "old": f"vllm/vllm-tpu:nightly@sha256:{PINNED}",
        "new": f"vllm/vllm-tpu:nightly@sha256:{NEW}",
    }
    assert artifact(tmp_path)["sweep"]["better_cells"] == 4


def test_a_worse_build_gets_no_pull_request_and_an_artifact_naming_why(tmp_path: Path) -> None:
    cloud = FakeCloud(WORSE)
    outcome = run(tmp_path, cloud)
    assert outcome.status == "not-proposed"
    assert not (tmp_path / PR_BODY).exists() and not (tmp_path / PIN_JSON).exists()
    reasons = " ".join(artifact(tmp_path)["reasons"])
    assert "worse than the pinned build in cell(s) 128/1, 128/16, 1024/1, 1024/16" in reasons
    assert not cloud.deployed


def test_an_unclear_build_is_not_proposed(tmp_path: Path) -> None:
    same = {PINNED: Effect(1.0, 0.01), NEW: Effect(1.0, 0.01)}
    outcome = run(tmp_path, FakeCloud(same))
    assert outcome.status == "not-proposed"
    assert any("better than the pinned build in no cell" in r for r in outcome.reasons)


@pytest.mark.parametrize(
    ("rows", "named"),
    [
        (
            [ROWS_PASS[0], Verdict("tool call", "FAIL", 1.0, "called get_time, not get_weather")],
            "accept row 'tool call' failed: called get_time",
        ),
        (
            [*ROWS_PASS, Verdict("needle 8K", "FAIL", 3.0, "answered 4417, not 9021")],
            "accept row 'needle 8K' failed",
        ),
        ([ROWS_PASS[1]], "accept row 'chat' did not pass (not run)"),
    ],
)
def test_a_better_build_failing_an_accept_row_is_never_proposed(
    tmp_path: Path, rows: list[Verdict], named: str
) -> None:
    """Issue 42: the watch refuses to propose a pin that fails the acceptance table; and no sweep
    is paid for a build that answers wrong."""
    cloud = FakeCloud(BETTER)
    outcome = run(tmp_path, cloud, rows=rows)
    assert outcome.status == "not-proposed"
    assert any(named in r for r in outcome.reasons), outcome.reasons
    assert not (tmp_path / PR_BODY).exists()
    assert "bench" not in {t for t, _ in cloud.calls}
    assert not cloud.deployed


def test_a_build_failing_its_boot_log_check_is_destroyed_and_named(tmp_path: Path) -> None:
    cloud = FakeCloud(BETTER, boot_fails=[NEW])
    outcome = run(tmp_path, cloud)
    assert outcome.status == "failed" and outcome.exit_code == 1
    failed = [r for r in outcome.reasons if "make wait of the candidate failed" in r]
    assert failed and "KV cache" in failed[0]
    assert not cloud.deployed and not (tmp_path / PR_BODY).exists()


def test_the_budget_refuses_the_run_before_anything_bills(tmp_path: Path) -> None:
    cloud = FakeCloud(BETTER)
    base = {**BASE, "watch": {**BASE["watch"], "budget_usd": 2.0}}
    outcome = run(tmp_path, cloud, base=base)
    assert outcome.status == "refused" and outcome.exit_code == 1
    assert cloud.calls == []
    assert "watch.budget_usd = 2" in outcome.reasons[0]
    assert "fix: raise budget_usd" in outcome.reasons[0]
    assert artifact(tmp_path)["status"] == "refused"


def test_off_unchanged_and_a_tag_pin_run_nothing_paid(tmp_path: Path) -> None:
    off = {**BASE, "watch": {"enabled": False}}
    cloud = FakeCloud(BETTER)
    assert run(tmp_path / "off", cloud, base=off).status == "off"
    assert cloud.calls == []
    unchanged = run(tmp_path / "same", cloud, digest=PINNED)
    assert unchanged.status == "unchanged"
    assert cloud.calls == [("destroy", "a")]  # the resume's destroy, then nothing
    tag = {**BASE, "vllm": {"image": "vllm/vllm-tpu:nightly"}}
    refused = run(tmp_path / "tag", cloud, base=tag)
    assert refused.status == "refused" and "make pin" in refused.reasons[0]


def test_a_run_killed_after_deploy_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    cloud = FakeCloud(BETTER, kill_at=("deploy", 1))
    with pytest.raises(Killed):
        run(tmp_path, cloud)
    assert cloud.deployed == {"gemma4-staging-watch": NEW}  # left billing by the dead run
    assert json.loads((tmp_path / RUN_FILE).read_text())["state"] == "running"
    # The next scheduled run: a new process against the same cloud.
    cloud.killed, cloud.kill_at, cloud.calls = False, None, []
    outcome = run(tmp_path, cloud)
    assert cloud.calls[0] == ("destroy", "a")
    assert outcome.resumed and outcome.status == "proposed"
    assert not cloud.deployed
    assert json.loads((tmp_path / RUN_FILE).read_text())["state"] == "finished"


def test_the_watch_deployment_is_its_own_and_flex_start() -> None:
    cfg = parse_config(dict(BASE))
    data = watch_data(BASE, cfg, f"vllm/vllm-tpu:nightly@sha256:{NEW}")
    watch = parse_config(data)
    assert watch.name == "gemma4-staging-watch" != cfg.name
    assert watch.provisioning == "flex-start"
    assert watch.max_run_duration_seconds == 3 * 3600
    assert watch.node_id != cfg.node_id and watch.deploy_account_id != cfg.deploy_account_id
    assert watch.compile_cache_bucket("p") != cfg.compile_cache_bucket("p")
    assert set(watch.firewall_rule_names.values()).isdisjoint(cfg.firewall_rule_names.values())
    assert watch.api_key_secret_id != cfg.api_key_secret_id
    assert watch.hf_token_secret_id != cfg.hf_token_secret_id
    assert "watch" not in data and cfg.vllm.image != watch.vllm.image


def test_apply_pin_rewrites_the_one_pinned_image_or_nothing(tmp_path: Path) -> None:
    from tpudeploy.upstream.pinfile import PinError, apply_pin

    old, new = f"vllm/vllm-tpu:nightly@sha256:{PINNED}", f"vllm/vllm-tpu:nightly@sha256:{NEW}"
    (tmp_path / PIN_JSON).write_text(json.dumps({"old": old, "new": new}))
    deployment = tmp_path / "staging.toml"
    deployment.write_text(f'name = "gemma4-staging"\n[vllm]\nimage = "{old}"\n')
    assert apply_pin(tmp_path, deployment) == new
    assert tomllib.loads(deployment.read_text())["vllm"]["image"] == new
    # Applied once already (or moved since the run): the old pin is gone, nothing changes.
    with pytest.raises(PinError, match="occurs 0 times, not once"):
        apply_pin(tmp_path, deployment)


def test_a_leftover_that_cannot_be_destroyed_is_a_failed_run_with_its_artifact(
    tmp_path: Path,
) -> None:
    class Stuck(FakeCloud):
        def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> StepResult:
            super().__call__(argv, env)
            return StepResult(1, "Error: deleting queued resource: 409 (fake)")

    outcome = run(tmp_path, Stuck(BETTER))
    assert outcome.status == "failed" and outcome.exit_code == 1
    assert "make destroy of gemma4-staging-watch failed" in outcome.reasons[0]
    assert artifact(tmp_path)["status"] == "failed"
