"""`make check` says where state lives and warns when it is local; a second deployment file with
the same `name` is refused by check and by deploy's preflight before any API call."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpudeploy import cli
from tpudeploy.config import parse_config
from tpudeploy.gitops.deployments import GitopsError, discover
from tpudeploy.stateinit import LOCAL_WARNING, state_prefix


def repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    return tmp_path


def run_cli(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    root: Path,
    rel: str,
    *argv: str,
) -> tuple[int, str, str]:
    monkeypatch.setattr(cli, "REPO_ROOT", root)
    monkeypatch.setenv("DEPLOY_CONFIG", str(root / rel))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_check_says_state_is_local_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, {"deploy.toml": 'name = "team-a"\nproject = "team-proj-1"\n'})
    code, out, err = run_cli(monkeypatch, capsys, root, "deploy.toml", "check")
    assert code == 0, err
    assert f"state: local, {root / 'terraform.team-a-secrets.tfstate'}" in out
    assert str(root / "terraform.team-a-node.tfstate") in out
    assert LOCAL_WARNING in out
    assert "a teammate cannot see or stop this deployment; make state-init" in out


def test_check_says_where_shared_state_lives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(
        tmp_path,
        {
            "deploy.toml": (
                'name = "team-a"\nproject = "team-proj-1"\nstate_bucket = "team-tfstate"\n'
            )
        },
    )
    code, out, err = run_cli(monkeypatch, capsys, root, "deploy.toml", "check")
    assert code == 0, err
    assert "state: shared, gs://team-tfstate/tpudeploy/team-a/<stack>/default.tfstate" in out
    assert "team-a-secrets, team-a-node" in out
    assert LOCAL_WARNING not in out
    # Issue 37: remote state alone is local use; the stacks still make what the bootstrap would.
    assert "local use (no pipeline = true): these stacks make the node account" in out
    assert "applied by the GitOps pipeline" not in out


def test_state_prefix_is_the_backend_prefix_the_stacks_declare() -> None:
    from stacks.common import state_prefix as stacks_prefix

    cfg = parse_config({"name": "team-a"})
    assert state_prefix(cfg, "team-a-node") == stacks_prefix("team-a", "team-a-node")


TWO_FILES = {
    "deploy.toml": 'project = "team-proj-1"\n',
    "deployments/copy.toml": 'name = "gemma4-v5e"\nproject = "team-proj-1"\n',
    "deployments/other.toml": 'name = "other-one"\nproject = "team-proj-1"\n',
}


@pytest.mark.parametrize(
    ("rel", "other"),
    [("deploy.toml", "deployments/copy.toml"), ("deployments/copy.toml", "deploy.toml")],
)
@pytest.mark.parametrize("argv", [("check",), ("check", "--deploy"), ("preflight", "deploy")])
def test_two_files_with_one_name_are_refused_before_any_call(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    rel: str,
    other: str,
    argv: tuple[str, ...],
) -> None:
    root = repo(tmp_path, TWO_FILES)
    # Any API call would need credentials; none are reachable, so a call would fail otherwise.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    code, out, err = run_cli(monkeypatch, capsys, root, rel, *argv)
    assert code != 0
    assert "Traceback" not in err
    # The key, the value, why, and the fix, in one refusal naming both files.
    assert f"name = 'gemma4-v5e': {rel}: name 'gemma4-v5e' is already used by {other}" in err
    assert "act on one deployment (its stacks, state and output folder): rename one" in err
    assert f'Fix: set another name in {rel} (e.g. name = "gemma4-v5e-2")' in err
    assert "deployment 'gemma4-v5e' is valid" not in out


def test_a_file_with_its_own_name_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, TWO_FILES)
    code, out, err = run_cli(monkeypatch, capsys, root, "deployments/other.toml", "check")
    assert code == 0, err
    assert "deployment 'other-one' is valid" in out


def test_destroy_is_never_held_back_by_a_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = repo(tmp_path, TWO_FILES)
    code, out, err = run_cli(monkeypatch, capsys, root, "deploy.toml", "check", "--destroy")
    assert "already used by" not in err
    assert code == 0, err
    assert "deployment 'gemma4-v5e' is valid" in out


def test_the_pipeline_refuses_the_same_pair_in_the_same_words(tmp_path: Path) -> None:
    root = repo(tmp_path, TWO_FILES)
    with pytest.raises(
        GitopsError,
        match=r"deployments/copy.toml: name 'gemma4-v5e' is already used by deploy.toml; "
        r".*rename one",
    ):
        discover(root)


def test_a_copy_beside_deploy_toml_is_refused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: `cp deploy.toml mine.toml`, edited, DEPLOY_CONFIG=mine.toml."""
    root = repo(tmp_path, {"deploy.toml": 'project = "team-proj-1"\n'})
    (root / "mine.toml").write_text('project = "team-proj-1"\nprovisioning = "spot"\n')
    code, _out, err = run_cli(monkeypatch, capsys, root, "mine.toml", "check")
    assert code != 0
    assert "mine.toml: name 'gemma4-v5e' is already used by deploy.toml" in err
