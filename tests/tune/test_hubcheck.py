"""The MTP arm's draft is a gated checkpoint: its licence and download size are asked of Hugging
Face with the stored token before any spend (tpudeploy/tune/hubcheck.py), against the loopback
Hub and Secret Manager. Two deployments in one project, each with its own token secret: one
account accepted the licences, the other did not."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from tests.fake_boot_apis import FakeSecretManager
from tests.hub_fixture import ACCEPTED, DRAFT, DRAFT_FILES, NOT_ACCEPTED, gemma_hub, serving_hub
from tools.rehearsal.fakes.base import api_error
from tpudeploy import cli, facts
from tpudeploy.config import parse_config
from tpudeploy.config.speculative import DRAFTS
from tpudeploy.tune import __main__ as tune_main

GRANTED = parse_config({"project": "test-proj", "name": "granted"})
REFUSED = parse_config({"project": "test-proj", "name": "refused"})


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Any:
    sm = FakeSecretManager(
        {GRANTED.hf_token_secret_id: [ACCEPTED], REFUSED.hf_token_secret_id: [NOT_ACCEPTED]}
    )
    with sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        yield sm


def config_file(tmp_path: Path, name: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'project = "test-proj"\nname = "{name}"\n', encoding="utf-8")
    return str(path)


def run_mtp(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`make tune AUTO_APPROVE=1` with the MTP arm; what was started (nothing, if refused)."""
    started: list[str] = []

    def no_boot(plan: Any, out: Path, *, step: Any, keep: Any) -> list[Any]:
        started.extend(p.arm.name for p in plan.arms)
        return []

    monkeypatch.setattr(tune_main, "run_tune", no_boot)
    monkeypatch.setattr(tune_main, "make_step", lambda: None)
    argv = ["run", "--config", config_file(tmp_path, name), "--arms", "mtp-assistant", "--yes"]
    assert tune_main.main([*argv, "--out", str(tmp_path / name)]) in (0, 2)
    return started


def test_make_tune_refuses_the_draft_before_any_node_when_the_token_may_not_download_it(
    tmp_path: Path,
    secrets: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving_hub(monkeypatch) as hub:
        assert run_mtp(tmp_path, "refused", monkeypatch) == []
        err = capsys.readouterr().err
        assert run_mtp(tmp_path, "granted", monkeypatch) == ["baseline", "mtp-assistant"]
        out = capsys.readouterr().out
    # Each deployment's own secret, read into memory; the token only in the Hub's header.
    read = [r["path"] for r in secrets.requests]
    assert read == [
        f"/v1/projects/test-proj/secrets/{REFUSED.hf_token_secret_id}/versions/latest:access",
        f"/v1/projects/test-proj/secrets/{GRANTED.hf_token_secret_id}/versions/latest:access",
    ]
    assert {r["authorization"] for r in hub.requests} == {
        f"Bearer {t}" for t in (NOT_ACCEPTED, ACCEPTED)
    }
    assert f"{DRAFT}: Hugging Face answered HTTP 403 (X-Error-Code GatedRepo)" in err
    assert f"Accept the licence at https://huggingface.co/{DRAFT}" in err
    assert "bill and then fail at the download" in err and "Traceback" not in err
    assert f"{DRAFT}: checked on Hugging Face" in out and "this token may download it" in out
    for text in (err, out):
        assert ACCEPTED not in text and NOT_ACCEPTED not in text


def test_a_draft_larger_than_its_stated_bound_is_refused_with_the_measured_size(
    tmp_path: Path,
    secrets: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bound = DRAFTS[DRAFT].bytes
    hub = gemma_hub({**DRAFT_FILES, "model.safetensors": bound})  # the other files tip it over
    with serving_hub(monkeypatch, hub):
        assert run_mtp(tmp_path, "granted", monkeypatch) == []
    measured = bound + sum(v for k, v in DRAFT_FILES.items() if k.endswith((".json", ".md")))
    err = capsys.readouterr().err
    assert f"measured {-(-measured // 10**6):,} MB on Hugging Face" in err
    assert f"over the stated bound of {bound // 10**6:,} MB" in err
    assert f"bytes) to at least {measured}" in err


def test_make_tune_plan_checks_with_credentials_and_says_so_without(
    tmp_path: Path,
    secrets: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = ["plan", "--arms", "mtp-assistant", "--profile", "quick", "--config"]
    with serving_hub(monkeypatch):
        assert tune_main.main([*plan, config_file(tmp_path, "refused")]) == 0
    out = capsys.readouterr().out
    assert f"REFUSED before spend: {DRAFT}: Hugging Face answered HTTP 403" in out
    # Offline: no emulator, no credentials on disk (and no metadata server: tests/conftest.py).
    monkeypatch.delenv("SECRETMANAGER_EMULATOR_HOST")
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    assert tune_main.main([*plan, config_file(tmp_path, "granted")]) == 0
    out = capsys.readouterr().out
    assert f"Hugging Face check not run for {DRAFT}" in out and "gcloud auth" in out


def test_make_secret_checks_the_model_and_the_arms_drafts_and_only_warns(
    tmp_path: Path,
    secrets: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DEPLOY_CONFIG", config_file(tmp_path, "refused"))
    with serving_hub(monkeypatch):
        monkeypatch.setattr("sys.stdin", io.StringIO(NOT_ACCEPTED))
        assert cli.main(["secret"]) == 0  # stored all the same
        refused = capsys.readouterr().out
        monkeypatch.setenv("DEPLOY_CONFIG", config_file(tmp_path, "granted"))
        monkeypatch.setattr("sys.stdin", io.StringIO(ACCEPTED))
        assert cli.main(["secret"]) == 0
        granted = capsys.readouterr().out
    assert secrets.secrets[REFUSED.hf_token_secret_id][-1] == NOT_ACCEPTED
    for repo in (facts.MODEL, DRAFT):
        assert f"warning: {repo}: Hugging Face answered HTTP 403" in refused
        assert f"checked: this token may download {repo}" in granted
    assert NOT_ACCEPTED not in refused and ACCEPTED not in granted


class RefusingSecretManager(FakeSecretManager):
    """A caller without secretmanager.versions.access on the token's secret: 403 to :access."""

    def route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        if path.endswith(":access"):
            return api_error(403, "Permission 'secretmanager.versions.access' denied")
        return super().route(method, path, body, headers)


def test_a_refused_secret_read_names_the_role_and_stops_make_tune_before_any_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with RefusingSecretManager({GRANTED.hf_token_secret_id: [ACCEPTED]}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        with serving_hub(monkeypatch) as hub:
            assert run_mtp(tmp_path, "granted", monkeypatch) == []
            err = capsys.readouterr().err
            plan = ["plan", "--arms", "mtp-assistant", "--config", config_file(tmp_path, "granted")]
            assert tune_main.main(plan) == 0
            out = capsys.readouterr().out
    assert hub.requests == []  # nothing asked of the Hub without the token
    assert "could not read the token" in err and "secretAccessor (to read)" in err
    assert f"Hugging Face check not run for {DRAFT}" in out and "HTTP 403" in out
