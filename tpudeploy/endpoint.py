"""The client side of the front door, on both platforms: a TLS connection pinned to a certificate.

Every connection here checks the certificate the server presents against the pinned SHA-256
fingerprint before a byte of the request, so the API key is never sent to anything but the
deployment's own proxy. Where the fingerprint comes from is each platform's: the TPU VM's node
publishes it as a guest attribute (tpudeploy/tpuvm/frontdoor.py), GKE's is read from Secret
Manager (tpudeploy/gke/frontdoor.py).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import os
import ssl
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from tpudeploy.errors import UserError

ENDPOINT_ENV = "ENDPOINT"
FINGERPRINT_ENV = "TLS_SHA256"


class FrontDoorError(UserError):
    """The endpoint cannot be found, reached or trusted; the message says what to do."""


def normalize_fingerprint(text: str) -> str:
    """`AB:CD:...` (openssl's spelling) or `abcd...` -> 64 lowercase hex digits, or raise."""
    hexdigits = text.strip().replace(":", "").lower()
    if len(hexdigits) != 64 or any(c not in "0123456789abcdef" for c in hexdigits):
        raise FrontDoorError(
            f"{FINGERPRINT_ENV}={text!r} is not a SHA-256 fingerprint: write the 64 hex digits "
            "`make endpoint` prints (colons allowed)"
        )
    return hexdigits


def colon_fingerprint(hexdigits: str) -> str:
    """64 hex digits as openssl prints them: AB:CD:..."""
    return ":".join(hexdigits[i : i + 2] for i in range(0, 64, 2)).upper()


@dataclass(frozen=True)
class Endpoint:
    """https://host:port of the proxy and the fingerprint its certificate must have."""

    url: str
    tls_sha256: str

    @property
    def host_port(self) -> tuple[str, int]:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme != "https" or not parts.hostname:
            raise FrontDoorError(
                f"{ENDPOINT_ENV}={self.url!r}: the node's API is served over TLS only; write "
                "https://HOST:PORT (through `make tunnel`: https://localhost:8443)"
            )
        return parts.hostname, parts.port or 443


def connect(endpoint: Endpoint, *, timeout: float) -> http.client.HTTPSConnection:
    """A TLS connection whose server certificate has the pinned fingerprint, or FrontDoorError.

    The self-signed certificate has no CA to verify it against: the pin replaces the CA check,
    and it is done right after the handshake, before any request (and its key) is written."""
    host, port = endpoint.host_port
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the fingerprint below is the check
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    conn = http.client.HTTPSConnection(host, port, context=context, timeout=timeout)
    try:
        conn.connect()
    except (OSError, ssl.SSLError) as exc:
        conn.close()
        raise FrontDoorError(
            f"cannot reach {endpoint.url} ({exc}). Is it ready (`make wait`)? A TPU VM's default "
            "deployment opens no port: run `make tunnel` in another terminal and use "
            "https://localhost:8443; GKE's load balancer is internal: run from the VPC. Either "
            "way your range must be in [network] allowed_cidrs"
        ) from None
    assert conn.sock is not None
    der = conn.sock.getpeercert(binary_form=True) or b""
    actual = hashlib.sha256(der).hexdigest()
    if not hmac.compare_digest(actual, endpoint.tls_sha256):
        conn.close()
        raise FrontDoorError(
            f"{endpoint.url} presented a certificate with SHA-256 {colon_fingerprint(actual)}, "
            f"not the node's {colon_fingerprint(endpoint.tls_sha256)}: something else answers "
            "there (or the node rebooted and made a new one: `make endpoint`). Nothing was sent"
        )
    return conn


def fetch_certificate(endpoint: Endpoint, *, timeout: float = 10.0) -> str:
    """The proxy's certificate in PEM, checked against the pinned fingerprint."""
    conn = connect(endpoint, timeout=timeout)
    try:
        assert conn.sock is not None
        der = conn.sock.getpeercert(binary_form=True) or b""
    finally:
        conn.close()
    return ssl.DER_cert_to_PEM_cert(der)


def resolve_pinned(find_url: Callable[[], str], find_sha256: Callable[[], str]) -> Endpoint:
    """ENDPOINT (https://host:port) and TLS_SHA256 when set, each skipping its own lookup;
    otherwise what the platform finds (its front door's address, the fingerprint it published).
    The scheme is checked now, with the message that says why."""
    url = os.environ.get(ENDPOINT_ENV, "").strip().rstrip("/") or find_url()
    pinned = os.environ.get(FINGERPRINT_ENV, "").strip()
    endpoint = Endpoint(url, normalize_fingerprint(pinned) if pinned else find_sha256())
    endpoint.host_port  # noqa: B018 - validates the scheme now, with the message that says why
    return endpoint
