"""`make watch-check`, which the paid job runs before its credential: on a GitHub-hosted runner
(RUNNER_ENVIRONMENT=github-hosted, GitHub's default variable) it exits 1, so a hand-edited
`runs-on` cannot pay for a flex-start boot it could not judge; `make upstream-watch` refuses too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpudeploy.errors import UserError
from tpudeploy.upstream.__main__ import main
from tpudeploy.watchrunner import RUNNER_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def staging(monkeypatch: pytest.MonkeyPatch) -> None:
    # The shipped staging file has a [watch] table (off), within its budget.
    monkeypatch.setenv("DEPLOY_CONFIG", str(ROOT / "deployments" / "staging.toml"))


def test_watch_check_refuses_a_github_hosted_runner(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(RUNNER_ENVIRONMENT, "github-hosted")
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "REFUSED: RUNNER_ENVIRONMENT = 'github-hosted'" in out
    assert "[watch] runner" in out and "make upstream-watch" in out


@pytest.mark.parametrize("where", ["self-hosted", None])
def test_watch_check_passes_elsewhere(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], where: str | None
) -> None:
    # The test suite itself runs on GitHub-hosted runners in CI: set or clear it explicitly.
    if where is None:
        monkeypatch.delenv(RUNNER_ENVIRONMENT, raising=False)
    else:
        monkeypatch.setenv(RUNNER_ENVIRONMENT, where)
    assert main(["check"]) == 0
    assert "REFUSED" not in capsys.readouterr().out


def test_the_paid_run_refuses_a_github_hosted_runner_before_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(RUNNER_ENVIRONMENT, "github-hosted")
    # A config that does not exist: the refusal comes before it is even read.
    monkeypatch.setenv("DEPLOY_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(UserError, match="a GitHub-hosted runner cannot reach the watch node"):
        main(["run", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
