"""The client side of the GKE front door: the Service's internal load balancer address and the
one certificate every replica serves (tlscert.py), pinned as on the TPU VM (tpudeploy.endpoint).
"""

from __future__ import annotations

import shlex
import sys
from typing import Protocol, TextIO

from tpudeploy import tlscert
from tpudeploy.config import DeployConfig
from tpudeploy.endpoint import (
    Endpoint,
    FrontDoorError,
    colon_fingerprint,
    resolve_pinned,
)
from tpudeploy.gcp.container import KubeError
from tpudeploy.gke import ops, reach
from tpudeploy.gke.kube import KubeApi


class LatestVersion(Protocol):
    """What is read of Secret Manager here (tpudeploy.gcp.secretmanager.SecretStore has it)."""

    def access_latest(self, secret_id: str) -> str: ...


def published_certificate(
    cfg: DeployConfig, project: str, *, store: LatestVersion | None = None
) -> str:
    """The certificate (PEM) of the latest <name>-tls version; its key is dropped at once."""
    from tpudeploy.gcp.secretmanager import SecretStore, SecretStoreError

    try:
        text = (store or SecretStore.from_env(project)).access_latest(cfg.tls_secret_id)
        return tlscert.certificate_of(text)
    except SecretStoreError as exc:
        raise FrontDoorError(str(exc)) from None
    except tlscert.TlsBundleError as exc:
        raise FrontDoorError(
            f"the latest version of {cfg.tls_secret_id} is {exc}: run `make tls-cert` for a new "
            "one, then replace the pods (a rollout)"
        ) from None


def _address(cfg: DeployConfig, project: str, api: KubeApi | None) -> str:
    try:
        return ops.service_address(cfg, project, api=api)
    except KubeError as exc:
        raise FrontDoorError(str(exc)) from None


def resolve_endpoint(
    cfg: DeployConfig,
    project: str,
    *,
    api: KubeApi | None = None,
    store: LatestVersion | None = None,
) -> Endpoint:
    """ENDPOINT and TLS_SHA256 when set; otherwise the load balancer's address and the
    fingerprint of the certificate every replica serves."""
    return resolve_pinned(
        lambda: f"https://{_address(cfg, project, api)}:{cfg.proxy.port}",
        lambda: tlscert.fingerprints(published_certificate(cfg, project, store=store))["sha256"],
    )


def endpoint_report(
    cfg: DeployConfig,
    project: str,
    *,
    api: KubeApi | None = None,
    store: LatestVersion | None = None,
    cert_out: str = "",
    out: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    address = _address(cfg, project, api)
    cert = published_certificate(cfg, project, store=store)
    pins = tlscert.fingerprints(cert)
    port = cfg.proxy.port
    sources = reach.service_clients(cfg)
    print(
        f"{cfg.name}: the API is served over TLS on port {port} (/v1/*, /health) by every "
        f"replica behind the Service's internal load balancer",
        file=out,
    )
    print(f"  from {sources}: https://{address}:{port}/v1", file=out)
    print(f"certificate SHA-256: {colon_fingerprint(pins['sha256'])}", file=out)
    print(f"public key pin:      {pins['spki']}", file=out)
    print(
        "  one certificate for every replica (secret "
        f"{cfg.tls_secret_id}; `make tls-cert` replaces it):\n"
        f"  curl --insecure --pinnedpubkey {shlex.quote(pins['spki'])} "
        f'-H "Authorization: Bearer $KEY" https://{address}:{port}/v1/models',
        file=out,
    )
    if cfg.routing.gateway:
        try:
            gateway = ops.gateway_line(cfg, project, api=api)
        except KubeError as exc:
            gateway = str(exc)
        print(
            "through the Gateway (inference-aware routing: the endpoint picker chooses the "
            f"replica), TLS with Certificate Manager certificate {cfg.routing.certificate}:\n"
            f"  {gateway}\n"
            "  the Service's address above balances without the picker: the same key works on "
            "both, to compare them",
            file=out,
        )
    if cert_out:
        with open(cert_out, "w", encoding="ascii") as fh:
            fh.write(cert)
        print(
            f"wrote the pinned certificate to {cert_out}: a self-signed server certificate (not "
            "a CA), for clients that take a trust file; it names localhost, so such clients "
            f"connect by name through a port-forward, or pin it (curl --pinnedpubkey) by address",
            file=out,
        )
    return 0
