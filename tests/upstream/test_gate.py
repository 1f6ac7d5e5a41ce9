"""The watch workflow's gate (no credential) against the loopback Docker Hub: a new build, the
same digest, a registry it cannot read; and where the paid job may run ([watch] runner). Two
deployments in one repository are gated apart."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.rehearsal.fakes.dockerhub import FakeDockerHub
from tpudeploy.upstream import gate, registry
from tpudeploy.watchrunner import ADMIN_GRANTS

ROOT = Path(__file__).resolve().parents[2]
PINNED = "a" * 64
NEW = "b" * 64


@pytest.fixture
def hub() -> Iterator[FakeDockerHub]:
    with FakeDockerHub() as fake:
        fake.publish("vllm/vllm-tpu", "nightly", PINNED)
        yield fake


def _write(root: Path, name: str, runner: str | None = None, *, digest: str = PINNED) -> str:
    (root / "deployments").mkdir(exist_ok=True)
    text = (
        f'name = "{name}"\n[vllm]\nimage = "vllm/vllm-tpu:nightly@sha256:{digest}"\n'
        "[watch]\nenabled = true\n" + (f"runner = {runner}\n" if runner is not None else "")
    )
    (root / "deployments" / f"{name}.toml").write_text(text, encoding="utf-8")
    return f"deployments/{name}.toml"


def _gate(root: Path, path: str, hub: FakeDockerHub) -> dict[str, str]:
    def latest(repository: str, tag: str) -> registry.Release:
        return registry.latest(repository, tag, base_url=hub.url)

    return gate.gate(path, root=root, latest=latest)


def test_the_same_digest_is_nothing_to_judge(tmp_path: Path, hub: FakeDockerHub) -> None:
    path = _write(tmp_path, "gemma4-staging", '["self-hosted", "tpu-watch"]')
    out = _gate(tmp_path, path, hub)
    assert hub.requests == ["/v2/namespaces/vllm/repositories/vllm-tpu/tags/nightly"]
    assert out["new_build"] == "false" and out["runs_on"] == "[]"
    assert "still points at the pinned digest" in out["reason"]
    assert "nothing to judge" in gate.summary(out)


def test_a_new_build_runs_on_the_named_self_hosted_runner(
    tmp_path: Path, hub: FakeDockerHub
) -> None:
    hub.publish("vllm/vllm-tpu", "nightly", NEW)
    path = _write(tmp_path, "gemma4-staging", '["self-hosted", "linux", "tpu-watch"]')
    out = _gate(tmp_path, path, hub)
    assert out["new_build"] == "true"
    assert out["candidate"] == f"vllm/vllm-tpu:nightly@sha256:{NEW}"
    assert out["pinned"] == f"vllm/vllm-tpu:nightly@sha256:{PINNED}"
    assert json.loads(out["runs_on"]) == ["self-hosted", "linux", "tpu-watch"]
    text = gate.summary(out)
    assert f"sha256:{NEW}" in text
    assert f"make upstream-watch DEPLOY_CONFIG={path}" in text
    assert "The paid job is skipped" not in text


def test_a_new_build_without_a_runner_pays_for_nothing_and_says_how_to_judge_it(
    tmp_path: Path, hub: FakeDockerHub
) -> None:
    hub.publish("vllm/vllm-tpu", "nightly", NEW)
    path = _write(tmp_path, "gemma4-staging")
    out = _gate(tmp_path, path, hub)
    assert out["new_build"] == "true" and out["runs_on"] == "[]"
    text = gate.summary(out)
    assert f"sha256:{NEW}" in text
    assert f"make upstream-watch DEPLOY_CONFIG={path}" in text
    assert "The paid job is skipped" in text and "[watch] runner is empty" in text
    # The second way forward says what the grants give: root on every TPU VM of the project.
    assert "roles/compute.osAdminLogin" in text and ADMIN_GRANTS in text
    assert "the watch identity gemma4-staging-watch-apply" in text


def test_a_runner_the_node_cannot_be_reached_from_is_no_runner(
    tmp_path: Path, hub: FakeDockerHub
) -> None:
    hub.publish("vllm/vllm-tpu", "nightly", NEW)
    path = _write(tmp_path, "gemma4-staging", '["ubuntu-24.04"]')
    out = _gate(tmp_path, path, hub)
    assert out["new_build"] == "true" and out["runs_on"] == "[]"
    assert 'watch.runner = ["ubuntu-24.04"]: must start with' in out["reason"]


def test_an_unreadable_registry_pays_for_nothing_and_fails_the_gate(tmp_path: Path) -> None:
    with FakeDockerHub() as gone:
        url = gone.url
    # The fake is shut down: its port refuses, as an unreachable Docker Hub would.
    path = _write(tmp_path, "gemma4-staging", '["self-hosted"]')
    out = gate.gate(path, root=tmp_path, latest=lambda r, t: registry.latest(r, t, base_url=url))
    assert out["new_build"] == "unknown" and out["runs_on"] == "[]"
    assert "cannot reach the registry" in out["reason"] and "nothing was paid" in out["reason"]
    assert "registry not read" in gate.summary(out)


def test_a_tag_pin_is_not_read_at_all(tmp_path: Path, hub: FakeDockerHub) -> None:
    (tmp_path / "deployments").mkdir()
    (tmp_path / "deployments" / "x.toml").write_text(
        'name = "gemma4-x"\n[watch]\nenabled = true\nrunner = ["self-hosted"]\n',
        encoding="utf-8",
    )
    out = _gate(tmp_path, "deployments/x.toml", hub)
    # The default image is the nightly tag: no pin to judge against, so no registry read.
    assert out["new_build"] == "false" and hub.requests == []
    assert "is a tag, not a digest" in out["reason"]


def test_two_deployments_are_gated_apart(tmp_path: Path, hub: FakeDockerHub) -> None:
    hub.publish("vllm/vllm-tpu", "nightly", NEW)
    a = _gate(tmp_path, _write(tmp_path, "gemma4-a", '["self-hosted", "runner-a"]'), hub)
    b = _gate(tmp_path, _write(tmp_path, "gemma4-b", digest=NEW), hub)
    assert (a["environment"], a["deploy_account"]) == ("gemma4-a-watch", "gemma4-a-watch-apply")
    assert (b["environment"], b["deploy_account"]) == ("gemma4-b-watch", "gemma4-b-watch-apply")
    assert json.loads(a["runs_on"]) == ["self-hosted", "runner-a"] and a["new_build"] == "true"
    assert b["runs_on"] == "[]" and b["new_build"] == "false"  # b pins the new build already


def _main(tmp_path: Path, path: str, url: str) -> subprocess.CompletedProcess[str]:
    """The gate as the workflow runs it: python3 without site-packages, before `make install`."""
    summary = tmp_path / "summary.md"
    return subprocess.run(
        [sys.executable, "-S", "-m", "tpudeploy.upstream.gate", path, "--summary", str(summary)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), registry.REGISTRY_URL_ENV: url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_workflow_step_prints_outputs_and_the_summary(
    tmp_path: Path, hub: FakeDockerHub
) -> None:
    hub.publish("vllm/vllm-tpu", "nightly", NEW)
    path = _write(tmp_path, "gemma4-staging")
    result = _main(tmp_path, path, hub.url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "new_build=true" in lines and "runs_on=[]" in lines
    assert "no paid run" in result.stderr
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert f"make upstream-watch DEPLOY_CONFIG={path}" in summary
    with FakeDockerHub() as gone:
        url = gone.url
    failed = _main(tmp_path, path, url)
    assert failed.returncode == 1 and "new_build=unknown" in failed.stdout.splitlines()
