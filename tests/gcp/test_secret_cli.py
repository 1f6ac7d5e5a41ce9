"""`make secret` / `make api-key` against a loopback Secret Manager: value in the body only."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.fake_boot_apis import FakeSecretManager
from tpudeploy import cli
from tpudeploy.config import parse_config
from tpudeploy.gcp.secretmanager import SecretStore, SecretStoreError

# Built at run time (no tracked file holds a token-shaped string); a fake that proves the real
# one never leaks, in the format the node accepts (tpudeploy/config/secretshape.py).
TOKEN = "hf_" + "TESTsecretCliToken0123456789abc"
CFG = parse_config({"project": "test-proj"})


@pytest.fixture
def deploy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    config = tmp_path / "deploy.toml"
    config.write_text('project = "test-proj"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.chdir(tmp_path)
    return tmp_path


class FakeStdin(io.StringIO):
    def __init__(self, text: str, tty: bool) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def files_text(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def test_secret_from_a_pipe_goes_in_the_body_only(
    deploy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeSecretManager({CFG.hf_token_secret_id: []}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        monkeypatch.setattr("sys.stdin", FakeStdin(TOKEN + "\n", tty=False))
        assert cli.main(["secret"]) == 0
        (request,) = sm.requests
    assert sm.secrets[CFG.hf_token_secret_id] == [TOKEN]  # trailing newline stripped
    assert request["method"] == "POST"
    assert request["path"] == f"/v1/projects/test-proj/secrets/{CFG.hf_token_secret_id}:addVersion"
    assert TOKEN not in request["path"] and TOKEN not in str(request["headers"])
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err
    assert "versions/1" in out.out
    assert TOKEN not in files_text(deploy)


def test_secret_on_a_terminal_uses_a_hidden_prompt(
    deploy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = []

    def fake_getpass(prompt: str) -> str:
        prompts.append(prompt)
        return TOKEN

    monkeypatch.setattr("getpass.getpass", fake_getpass)
    with FakeSecretManager({CFG.hf_token_secret_id: []}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        monkeypatch.setattr("sys.stdin", FakeStdin("", tty=True))
        assert cli.main(["secret"]) == 0
    assert prompts and "hidden" in prompts[0]
    assert sm.secrets[CFG.hf_token_secret_id] == [TOKEN]
    assert TOKEN not in "".join(capsys.readouterr())


def test_empty_token_is_refused_before_any_call(
    deploy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeSecretManager({CFG.hf_token_secret_id: []}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        monkeypatch.setattr("sys.stdin", FakeStdin("\n", tty=False))
        assert cli.main(["secret"]) == 2
        assert sm.requests == []
    assert "no token given" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["api_org_" + "x" * 30, "hf_short", "hf_" + "x" * 20 + "!" * 12])
def test_a_malformed_token_is_refused_like_the_node_would(
    deploy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    """The node fails its boot on a token that is not hf_ + letters and digits: say it now."""
    with FakeSecretManager({CFG.hf_token_secret_id: []}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        monkeypatch.setattr("sys.stdin", FakeStdin(bad + "\n", tty=False))
        assert cli.main(["secret"]) == 2
        assert sm.requests == []
    out = capsys.readouterr().out
    assert "not a Hugging Face access token" in out and bad not in out


# make api-key: tests/gcp/test_api_key_cli.py (per client, rotation, disable).


def test_missing_secret_is_a_clear_error(
    deploy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeSecretManager({}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert cli.main(["api-key"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: secret gemma4-v5e-api-key")
    assert "make deploy" in err and "Traceback" not in err


def test_access_latest_reads_the_newest_version(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeSecretManager({"s": ["old", "new"]}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert SecretStore.from_env("p").access_latest("s") == "new"
        with pytest.raises(SecretStoreError, match="does not exist"):
            SecretStore.from_env("p").access_latest("absent")


def test_no_emulator_and_no_credentials_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SECRETMANAGER_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    with pytest.raises(SecretStoreError, match="application-default login"):
        SecretStore.from_env("p")


def test_make_secret_recommends_a_read_only_fine_grained_token(
    deploy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 22, item 1: root on the node can read the token, so it should read models only."""
    monkeypatch.setattr("getpass.getpass", lambda prompt: TOKEN)
    with FakeSecretManager({CFG.hf_token_secret_id: []}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        monkeypatch.setattr("sys.stdin", FakeStdin("", tty=True))
        assert cli.main(["secret"]) == 0
    out = capsys.readouterr().out
    before, after = out.split("stored the Hugging Face token")
    for text in (before, after):  # before the prompt, and once it is stored
        assert "read-only" in text and "fine-grained" in text and CFG.vllm.model in text
