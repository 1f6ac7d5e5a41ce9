"""The watch's inputs: Docker Hub's tag endpoint (a loopback fake), the workflow's gate, the
`[watch]` table's errors and the budget `make check` prints."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.rehearsal.fakes.dockerhub import FakeDockerHub
from tpudeploy import watchbudget as budget
from tpudeploy.config import ConfigError, parse_config
from tpudeploy.planner import FLEX_START, price_table
from tpudeploy.upstream import gate, registry
from tpudeploy.watchrunner import EXAMPLE_TOML, runner_problem

DIGEST = "c" * 64


@pytest.fixture
def hub() -> Iterator[FakeDockerHub]:
    with FakeDockerHub() as fake:
        fake.publish("vllm/vllm-tpu", "nightly", DIGEST)
        yield fake


def test_the_tags_digest_is_read_from_the_documented_endpoint(hub: FakeDockerHub) -> None:
    release = registry.latest("vllm/vllm-tpu", "nightly", base_url=hub.url)
    assert release.digest == DIGEST and release.tag == "nightly"
    assert hub.requests == ["/v2/namespaces/vllm/repositories/vllm-tpu/tags/nightly"]
    # A new release moves the tag: the next read sees it.
    hub.publish("vllm/vllm-tpu", "nightly", "e" * 64)
    assert registry.latest("vllm/vllm-tpu", "nightly", base_url=hub.url).digest == "e" * 64
    with pytest.raises(registry.RegistryError, match=r"answered 404; is vllm/vllm-tpu:gone"):
        registry.latest("vllm/vllm-tpu", "gone", base_url=hub.url)


def test_plain_http_is_refused_off_loopback() -> None:
    with pytest.raises(registry.RegistryError, match="loopback fake only"):
        registry.latest("vllm/vllm-tpu", "nightly", base_url="http://hub.docker.com")


def test_image_references_parse_and_re_pin() -> None:
    ref = registry.ImageRef.parse(f"vllm/vllm-tpu:nightly@sha256:{DIGEST}")
    assert (ref.repository, ref.tag, ref.digest) == ("vllm/vllm-tpu", "nightly", DIGEST)
    assert ref.pinned("d" * 64) == f"vllm/vllm-tpu:nightly@sha256:{'d' * 64}"
    with pytest.raises(registry.RegistryError, match=r"vllm\.image = 'us-docker\.pkg\.dev/x/y/z'"):
        registry.ImageRef.parse("us-docker.pkg.dev/x/y/z")


def _deployment(root: Path, text: str) -> str:
    (root / "deployments").mkdir(exist_ok=True)
    (root / "deployments" / "staging.toml").write_text(text, encoding="utf-8")
    return "deployments/staging.toml"


def test_the_gate_is_off_until_the_variable_and_the_flag_both_say_so(tmp_path: Path) -> None:
    assert gate.gate("", root=tmp_path)["enabled"] == "false"
    path = _deployment(tmp_path, 'name = "gemma4-staging"\n[watch]\nenabled = false\n')
    off = gate.gate(path, root=tmp_path)
    assert off == {"enabled": "false", "reason": f"{path}: [watch] enabled is not true"}
    assert gate.gate("../gitops.toml", root=tmp_path)["enabled"] == "false"
    path = _deployment(tmp_path, 'name = "gemma4-staging"\n[watch]\nenabled = true\n')
    on = gate.gate(path, root=tmp_path)
    assert on["enabled"] == "true"
    assert on["environment"] == "gemma4-staging-watch"
    assert on["deploy_account"] == "gemma4-staging-watch-apply"
    assert on["timeout_minutes"] == str(180 + gate.DESTROY_MARGIN_MINUTES)


def test_the_gate_repeats_the_configs_default_and_the_budgets_margin() -> None:
    from tpudeploy.config.watch_table import WatchConfig

    assert WatchConfig().time_limit == gate.DEFAULT_TIME_LIMIT
    assert gate.DESTROY_MARGIN_MINUTES * 60 == budget.JOB_MARGIN_S


@pytest.mark.parametrize(
    ("watch", "named"),
    [
        ({"budget_usd": 0}, "watch.budget_usd = 0: must be a positive number of dollars"),
        ({"time_limit": "10h"}, "watch.time_limit = '10h': must be between 30m"),
        ({"time_limit": "soon"}, "watch.time_limit = 'soon'"),
        ({"schedule": "weekly"}, "watch.schedule = 'weekly': not a five-field cron"),
        ({"tag": "night ly"}, "watch.tag = 'night ly': not a Docker tag"),
        ({"enabled": "yes"}, "watch.enabled = 'yes'"),
        ({"budget": 5}, "watch.budget"),
        # The paid job's runner: a self-hosted one's labels, never a GitHub-hosted runner.
        ({"runner": "self-hosted"}, "watch.runner = 'self-hosted': a string where a list"),
        ({"runner": ["ubuntu-24.04"]}, "watch.runner = ['ubuntu-24.04']: must start with"),
        ({"runner": ["linux", "self-hosted"]}, "must start with 'self-hosted'"),
        ({"runner": ["self-hosted", "a b"]}, "'a b' is not a runner label"),
        ({"runner": ["self-hosted", ""]}, "'' is not a runner label"),
    ],
)
def test_bad_watch_tables_name_the_key_the_value_and_the_fix(
    watch: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"name": "gemma4-staging", "watch": watch})
    assert named in str(exc.value)
    assert "Fix:" in str(exc.value)


def test_a_self_hosted_runner_is_the_paid_jobs() -> None:
    cfg = parse_config({"name": "gemma4-staging", "watch": {"runner": ["self-hosted", "tpu-w"]}})
    assert cfg.watch.runner == ["self-hosted", "tpu-w"]
    assert parse_config({"name": "gemma4-staging"}).watch.runner == []
    assert "the self-hosted runner ['self-hosted', 'tpu-w']" in budget.check_lines(cfg)[3]
    off = budget.check_lines(parse_config({"name": "gemma4-staging", "watch": {}}))
    assert "none ([watch] runner is empty)" in off[3]


@pytest.mark.parametrize("labels", [["self-hosted", 3], "self-hosted", [["self-hosted"]]])
def test_a_runner_that_is_no_list_of_labels_is_told_so(labels: object) -> None:
    # The gate reads the TOML with the standard library, before any schema: a number among the
    # labels reaches this check as written, and must be named, not crash the gate.
    assert runner_problem(labels) == (
        "must be a list of a self-hosted runner's labels",
        f"e.g. {EXAMPLE_TOML}, or leave it out (the workflow then only reports new builds)",
    )


def test_make_check_prints_the_budget_from_the_planners_rate() -> None:
    cfg = parse_config({"name": "gemma4-staging", "watch": {"time_limit": "2h"}})
    rate = price_table(cfg).rate(FLEX_START)
    worst = rate * (2 * 2 * 3600 + 20 * 60) / 3600
    lines = budget.check_lines(cfg)
    assert lines[0].startswith("upstream watch: off")
    assert f"worst case ${worst:,.2f}" in lines[1] and "budget $20.00" in lines[1]
    assert "max_run_duration" in lines[2]
    assert not any("REFUSED" in line for line in lines)
    assert budget.check_lines(parse_config({"name": "gemma4-staging"})) == []


def test_make_check_refuses_an_over_budget_watch_and_a_name_too_long() -> None:
    cfg = parse_config(
        {"name": "gemma4-staging-long", "watch": {"enabled": True, "budget_usd": 1.0}}
    )
    refused = [line for line in budget.check_lines(cfg) if "REFUSED" in line]
    assert len(refused) == 2
    assert "raise budget_usd to at least" in refused[0]
    assert "'gemma4-staging-long-watch'" in refused[1] and "at most 18 characters" in refused[1]
