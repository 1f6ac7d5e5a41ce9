"""The TPU VM's boot serves the deployment's one certificate from Secret Manager (issue 37): the
rendered startup script under bash with the fake APIs (tests/boot_sandbox.py)."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.boot_sandbox import PROJECT, TLS, Node, key_lines
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.tlscert import fingerprints, make_bundle


@pytest.fixture(scope="module")
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT})


def test_every_node_of_a_deployment_serves_the_stored_certificate(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    """Two nodes (a re-creation: a new VM, a new tmpfs) read the same version and publish the
    same fingerprint, the one `make tls-cert` printed: an agent's pin survives. The boot used to
    make a new certificate each time."""
    expected = fingerprints(TLS.cert_pem)
    published = []
    for disk in ("first", "re-created"):
        node = Node(tmp_path / disk, cfg, internal_ip="10.182.0.9", external_ip="203.0.113.9")
        boot = node.run()
        assert boot.returncode == 0, boot.stderr[-2000:]
        served = (node.proxy_dir / "tls.crt").read_text()
        assert ssl.PEM_cert_to_DER_cert(served) == ssl.PEM_cert_to_DER_cert(TLS.cert_pem)
        assert (node.proxy_dir / "tls.key").read_text().strip() == TLS.key_pem.strip()
        # The key stays on the tmpfs, readable by root alone.
        assert (node.proxy_dir / "tls.key").stat().st_mode & 0o077 == 0
        published.append((node.attribute("tls-sha256"), node.attribute("tls-spki")))
        node.assert_no_secret_leaked(boot)
    assert published == [(expected["sha256"], expected["spki"])] * 2
    # No certificate is made on the node: no openssl req, no key generation.
    script = (tmp_path / "first" / "scripts" / "startup.sh").read_text()
    assert "openssl req" not in script and "genpkey" not in script


def _boot_with(tmp_path: Path, cfg: DeployConfig, bundle_text: str) -> tuple[Node, str, str]:
    node = Node(tmp_path, cfg)
    secrets = node.config["secrets"]
    assert isinstance(secrets, dict)
    secrets[cfg.tls_secret_id] = bundle_text
    boot = node.run()
    assert boot.returncode != 0
    assert node.phases()[-1] == "failed" and "ready" not in node.phases()
    # Refused while reading the secrets: no image pulled, no vLLM, no front door.
    assert node.docker("pull") == [] and node.docker_runs() == {}
    assert not (node.proxy_dir / "tls.key").exists()
    node.assert_no_secret_leaked(boot)
    return node, boot.stdout + boot.stderr, node.reasons()[-1]


def test_a_key_that_is_not_the_certificates_is_refused_naming_neither(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    other = make_bundle("impostor")
    node, output, reason = _boot_with(tmp_path, cfg, TLS.cert_pem + other.key_pem)
    assert cfg.tls_secret_id in reason and "not the certificate's" in reason
    assert "make tls-cert ROTATE=1" in reason
    # Neither key, nor the certificate, in what the boot printed or published.
    printed = output + "".join(v for _, v in node.guest_attributes())
    for line in key_lines(other.key_pem) + key_lines(TLS.key_pem) + key_lines(TLS.cert_pem):
        assert line not in printed


@pytest.mark.parametrize(
    ("bundle_text", "said"),
    [
        (TLS.cert_pem, "not one certificate and one private key"),
        (TLS.key_pem + TLS.cert_pem + TLS.cert_pem, "not one certificate and one private key"),
        (
            TLS.cert_pem.replace("\n", "\nAAAA", 3) + TLS.key_pem,
            "no certificate openssl can read",
        ),
    ],
    ids=["certificate-only", "two-certificates", "damaged-certificate"],
)
def test_a_bundle_that_is_not_one_certificate_and_its_key_is_refused(
    tmp_path: Path, cfg: DeployConfig, bundle_text: str, said: str
) -> None:
    _, _, reason = _boot_with(tmp_path, cfg, bundle_text)
    assert said in reason and cfg.tls_secret_id in reason


def test_an_expired_certificate_is_refused(tmp_path: Path, cfg: DeployConfig) -> None:
    """openssl x509 -checkend 0: a certificate past its notAfter is refused before any client
    would refuse it."""
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "old")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=400))
        .not_valid_after(now - datetime.timedelta(days=3))
        .sign(private, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    pkcs8 = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    _, _, reason = _boot_with(tmp_path, cfg, pem + pkcs8)
    assert "expired" in reason


def test_a_missing_certificate_points_at_make_tls_cert(tmp_path: Path, cfg: DeployConfig) -> None:
    node = Node(tmp_path, cfg)
    secrets = node.config["secrets"]
    assert isinstance(secrets, dict)
    del secrets[cfg.tls_secret_id]
    boot = node.run()
    assert boot.returncode != 0
    reason = node.reasons()[-1]
    assert cfg.tls_secret_id in reason and "make tls-cert" in reason
    assert node.docker_runs() == {}
