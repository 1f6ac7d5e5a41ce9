"""`make tls-cert` on both platforms against a loopback Secret Manager (issue 37): one certificate
per deployment, stored once; ROTATE=1 replaces it and says that agents must re-pin."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.boot_sandbox import key_lines
from tests.fake_boot_apis import FakeSecretManager
from tpudeploy import cli, tlscert
from tpudeploy.config import DeployConfig, parse_config

CONFIGS = {
    "tpu-vm": 'project = "test-proj"\n',
    "gke": 'project = "test-proj"\nplatform = "gke"\n',
}


def _config(platform: str) -> DeployConfig:
    return parse_config({"project": "test-proj", "platform": platform})


@pytest.fixture(params=sorted(CONFIGS))
def deploy(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[DeployConfig, Path]:
    config = tmp_path / "deploy.toml"
    config.write_text(CONFIGS[request.param])
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.chdir(tmp_path)
    return _config(request.param), tmp_path


def _files(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def test_tls_cert_stores_one_certificate_and_its_key_and_prints_neither(
    deploy: tuple[DeployConfig, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg, root = deploy
    with FakeSecretManager({cfg.tls_secret_id: []}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert cli.main(["tls-cert"]) == 0
    (stored,) = sm.secrets[cfg.tls_secret_id]
    cert_pem = tlscert.certificate_of(stored)
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    key = serialization.load_pem_private_key(
        stored[stored.index("-----BEGIN PRIVATE KEY-----") :].encode(), password=None
    )
    # The key is the certificate's: the node's boot checks exactly this.
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(serialization.Encoding.DER, public) == (
        cert.public_key().public_bytes(serialization.Encoding.DER, public)
    )
    # What the TPU VM's boot used to make: a P-256 leaf for localhost and 127.0.0.1 (the
    # tunnel's names), CA:FALSE, serverAuth, 397 days.
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 397
    out = capsys.readouterr()
    pins = tlscert.fingerprints(cert_pem)
    assert pins["sha256"] in out.out and pins["spki"] in out.out
    for line in key_lines(stored[stored.index("-----BEGIN PRIVATE KEY-----") :]):
        assert line not in out.out + out.err
        assert line not in _files(root)
        for request in sm.requests:
            assert line not in request["path"] and line not in str(request["headers"])
    assert "ROTATED" not in out.out


def test_a_second_tls_cert_changes_nothing_without_rotate(
    deploy: tuple[DeployConfig, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Agents pin the stored certificate: a repeated `make tls-cert` must not break their pins."""
    cfg, _ = deploy
    first = tlscert.make_bundle(cfg.name).text
    with FakeSecretManager({cfg.tls_secret_id: [first]}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert cli.main(["tls-cert"]) == 1
        assert cli.main(["tls-cert", "--rotate", "0"]) == 1
    assert sm.secrets[cfg.tls_secret_id] == [first]
    err = capsys.readouterr().err
    assert cfg.tls_secret_id in err and "make tls-cert ROTATE=1" in err and "re-pin" in err
    assert "Traceback" not in err


def test_rotate_adds_a_version_and_says_agents_must_re_pin(
    deploy: tuple[DeployConfig, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg, _ = deploy
    first = tlscert.make_bundle(cfg.name).text
    with FakeSecretManager({cfg.tls_secret_id: [first]}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert cli.main(["tls-cert", "--rotate", "1"]) == 0
    old, new = sm.secrets[cfg.tls_secret_id]
    assert old == first
    new_pin = tlscert.fingerprints(tlscert.certificate_of(new))["sha256"]
    assert new_pin != tlscert.fingerprints(tlscert.certificate_of(first))["sha256"]
    out = capsys.readouterr().out
    assert new_pin in out and "ROTATED" in out and "re-pin" in out and "make endpoint" in out


def test_tls_cert_before_deploy_secrets_says_what_to_run(
    deploy: tuple[DeployConfig, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeSecretManager({}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert cli.main(["tls-cert"]) == 1
        assert not [r for r in sm.requests if r["method"] == "POST"]
    assert "make deploy-secrets" in capsys.readouterr().err


def test_two_deployments_in_one_project_each_have_their_own_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deployment a's `make tls-cert` stores a's certificate and never touches b's secret."""
    a = parse_config({"project": "test-proj", "name": "gemma4-a"})
    b = parse_config({"project": "test-proj", "name": "gemma4-b"})
    assert a.tls_secret_id != b.tls_secret_id
    config = tmp_path / "a.toml"
    config.write_text('project = "test-proj"\nname = "gemma4-a"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.chdir(tmp_path)
    with FakeSecretManager({a.tls_secret_id: [], b.tls_secret_id: []}) as sm:
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        assert cli.main(["tls-cert"]) == 0
    assert len(sm.secrets[a.tls_secret_id]) == 1 and sm.secrets[b.tls_secret_id] == []
    assert all(b.tls_secret_id not in r["path"] for r in sm.requests)
