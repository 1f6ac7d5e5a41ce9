"""The front door's one certificate per deployment, made on the operator's machine.

Both platforms serve the certificate and key stored as the latest version of `<name>-tls`:
GKE's replicas behind one Service (a certificate each pod made for itself would differ per pod,
and a client pinning one fingerprint would be refused by every other replica), and the TPU VM's
node, which reads it at every boot (one it made itself would change at every preemption,
`make recover`, flex-start renewal or config change, and break every agent's pin). The key and
certificate are made here in memory (a P-256 leaf, CA:FALSE, serverAuth, 397 days, as the TPU
VM's boot used to make), stored as one version (certificate, then key), and never printed: only
the fingerprint is. The private key exists only in this process's memory and in Secret Manager.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from dataclasses import dataclass
from typing import Protocol, TextIO

from tpudeploy.config import DeployConfig
from tpudeploy.errors import UserError

# The lifetime the TPU VM's boot gave its own certificate before this (openssl req -days 397): at
# most 398 days is what browsers and Apple's TLS clients accept for a server certificate.
DAYS = 397
BEGIN_CERT = "-----BEGIN CERTIFICATE-----"


class TlsBundleError(ValueError):
    """A stored bundle that is not one certificate and one private key."""


@dataclass(frozen=True, slots=True)
class Bundle:
    cert_pem: str
    key_pem: str

    @property
    def text(self) -> str:
        """What the secret's version holds: the certificate, then the key (PEM)."""
        return self.cert_pem + self.key_pem


def make_bundle(common_name: str, *, ips: tuple[str, ...] = ("127.0.0.1",)) -> Bundle:
    """A self-signed P-256 server certificate for localhost and `ips`, and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        # A leaf, not a CA (issue 22): given as a client's only trust anchor, it signs nothing.
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Bundle(
        cert.public_bytes(serialization.Encoding.PEM).decode(),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
    )


def certificate_of(text: str) -> str:
    """The certificate (PEM) of a stored bundle; the key is never returned or kept."""
    start = text.find(BEGIN_CERT)
    end_marker = "-----END CERTIFICATE-----"
    end = text.find(end_marker, start)
    if start < 0 or end < 0 or "PRIVATE KEY-----" not in text:
        raise TlsBundleError("not a certificate followed by its private key (PEM)")
    return text[start : end + len(end_marker)] + "\n"


def fingerprints(cert_pem: str) -> dict[str, str]:
    """{"sha256": hex of the DER certificate, "spki": curl's sha256//<base64> key pin}."""
    import base64

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    der = cert.public_bytes(serialization.Encoding.DER)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {
        "sha256": hashlib.sha256(der).hexdigest(),
        "spki": "sha256//" + base64.b64encode(hashlib.sha256(spki).digest()).decode(),
    }


class AddsVersions(Protocol):
    """What `make tls-cert` needs of Secret Manager (gcp.secretmanager.SecretStore has it)."""

    def add_version(self, secret_id: str, value: str) -> str: ...

    def version_state(self, secret_id: str) -> str: ...


class CertificateInPlace(UserError):
    """`make tls-cert` without ROTATE=1 where agents may already pin the stored certificate."""


def store_new_tls_cert(
    cfg: DeployConfig, store: AddsVersions, out: TextIO, *, rotate: bool, takes_effect: str
) -> int:
    """One front-door certificate for the deployment, made in memory and stored as a new
    version of <name>-tls (certificate then key); only its fingerprint is printed.

    A latest version that is enabled is the certificate agents pin: replacing it takes
    `rotate` (ROTATE=1), and the output then says that every agent must re-pin and how.
    `takes_effect`: when the platform's front door starts serving a new version."""
    state = store.version_state(cfg.tls_secret_id)
    if state == "NO_SECRET":
        raise CertificateInPlace(
            f"secret {cfg.tls_secret_id} does not exist yet: `make deploy-secrets` creates it, "
            "then run `make tls-cert`"
        )
    replacing = state == "ENABLED"
    if replacing and not rotate:
        raise CertificateInPlace(
            f"{cfg.tls_secret_id} already holds {cfg.name}'s front-door certificate: agents pin "
            "it, and every re-creation of the front door serves it again. Nothing was changed. "
            "To replace it (every agent must then re-pin): make tls-cert ROTATE=1"
        )
    bundle = make_bundle(cfg.name)
    version = store.add_version(cfg.tls_secret_id, bundle.text)
    pins = fingerprints(bundle.cert_pem)
    print(
        f"stored a new front-door certificate and key as {version or 'a new version'} of "
        f"{cfg.tls_secret_id} (the key is in no file).\n"
        f"certificate SHA-256: {pins['sha256']}\n"
        f"public key pin:      {pins['spki']}\n"
        f"The front door serves it {takes_effect}.",
        file=out,
    )
    if replacing:
        print(
            "ROTATED: agents that pinned the previous certificate will refuse the front door as "
            "soon as it serves this one. Then every agent must re-pin: `make endpoint` prints "
            "the new fingerprint and public key pin (the lines above).",
            file=out,
        )
    else:
        print(
            "Every re-creation of the front door (a preemption, `make recover`, a config change, "
            "a renewal) serves this same certificate: agents pin it once (`make endpoint`).",
            file=out,
        )
    return 0
