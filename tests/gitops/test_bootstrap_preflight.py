"""`make bootstrap` checks first (issue 23, item 4): the shipped placeholders are refused, one
line per key with where the real value comes from, before npm or cdktf run."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tpudeploy import bootstrap_preflight
from tpudeploy.bootstrap_config import BOOTSTRAP_ENV


def _run(monkeypatch: pytest.MonkeyPatch, root: Path) -> tuple[int, str, str]:
    monkeypatch.chdir(root)
    monkeypatch.setenv(BOOTSTRAP_ENV, str(root / "gitops.toml"))
    out, err = io.StringIO(), io.StringIO()
    rc = bootstrap_preflight.run(out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def _credentials(tmp_path: Path) -> Path:
    path = tmp_path / "adc.json"
    path.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "x.apps.googleusercontent.com",
                "client_secret": "not-a-secret",
                "refresh_token": "not-a-token",
            }
        )
    )
    return path


def test_the_shipped_placeholders_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(_credentials(tmp_path)))
    rc, out, err = _run(monkeypatch, REPO_ROOT)
    assert rc == 1 and not out
    lines = err.strip().splitlines()
    keys = [
        "project",
        "github_repository",
        "github_repository_id",
        "github_repository_owner_id",
        "state_bucket",
    ]
    assert len(lines) == len(keys), err
    for key, line in zip(keys, lines, strict=True):
        assert line.startswith(f"bootstrap preflight: {REPO_ROOT / 'gitops.toml'}: {key} = ")
        assert "is the shipped example, not yours" in line and "set it to" in line
    assert "gh api repos/OWNER/NAME --jq .id" in lines[2]


def test_an_edited_gitops_toml_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "deployments", repo / "deployments")
    text = (REPO_ROOT / "gitops.toml").read_text()
    for old, new in [
        ("my-gemma-project-tfstate", "acme-llm-tfstate"),
        ("my-gemma-project", "acme-llm-1"),
        ("example-org/gemma4-tpu", "acme/llm-infra"),
        ("123456789", "424242"),
        ("987654321", "777"),
    ]:
        text = text.replace(old, new)
    (repo / "gitops.toml").write_text(text)
    for deployment in (repo / "deployments").glob("*.toml"):
        edited = deployment.read_text().replace("my-gemma-project-tfstate", "acme-llm-tfstate")
        deployment.write_text(edited.replace("my-gemma-project", "acme-llm-1"))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(_credentials(tmp_path)))
    rc, out, err = _run(monkeypatch, repo)
    assert rc == 0, err
    assert "acme/llm-infra (id 424242, owner id 777) into acme-llm-1" in out
    # Without credentials the same file is refused, with the login command.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    rc, _, err = _run(monkeypatch, repo)
    assert rc == 1 and "is not a file" in err


def test_make_bootstrap_runs_the_preflight_before_npm_and_cdktf() -> None:
    dry = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "bootstrap"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    steps = [i for i, line in enumerate(dry) if "bootstrap_preflight" in line]
    npm = [i for i, line in enumerate(dry) if "node_modules/.installed" in line]
    deploy = [i for i, line in enumerate(dry) if "cdktf deploy" in line]
    assert steps and npm and deploy, dry
    assert steps[0] < npm[0] < deploy[0]
