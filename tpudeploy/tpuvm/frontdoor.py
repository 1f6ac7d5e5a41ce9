"""The TPU VM's front door, from the client side: where the node is, the certificate it published,
`make endpoint` and `make tunnel`.

The node serves the deployment's one certificate (`make tls-cert`, tpudeploy/tlscert.py: the
same at every boot, so a re-created node keeps every pin) and publishes the SHA-256 fingerprint
of what it serves as the guest attribute tpudeploy/tls-sha256 (templates/startup.sh.j2); the
pinned connection itself is shared with GKE (tpudeploy/endpoint.py).
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import TextIO

from tpudeploy.config import DeployConfig
from tpudeploy.endpoint import (
    ENDPOINT_ENV,
    Endpoint,
    FrontDoorError,
    colon_fingerprint,
    fetch_certificate,
    normalize_fingerprint,
    resolve_pinned,
)
from tpudeploy.iapssh import gcloud_failure, ssh_argv
from tpudeploy.tpuvm.guestattributes import node_name, read_attributes
from tpudeploy.tpuvm.queued_resource import ApiError, QueuedResourceError, TpuApi

LOCAL_PORT_ENV = "LOCAL_PORT"


# --- where the node is ------------------------------------------------------------------------


def _api(api: TpuApi | None) -> TpuApi:
    return api or TpuApi(log=sys.stderr)


def node_addresses(cfg: DeployConfig, project: str, *, api: TpuApi | None = None) -> dict[str, str]:
    """{"external": ip, "internal": ip} of the node, as far as it has them."""
    try:
        node = _api(api).get_node(node_name(cfg, project))
    except ApiError as exc:
        raise FrontDoorError(f"cannot read node {cfg.node_id}: {exc.api_message}") from None
    except QueuedResourceError as exc:  # no credentials
        raise FrontDoorError(str(exc)) from None
    if node is None:
        raise FrontDoorError(
            f"node {cfg.node_id} does not exist in {cfg.zone}: `make deploy`, then `make wait`"
        )
    found: dict[str, str] = {}
    for endpoint in node.get("networkEndpoints") or []:
        external = (endpoint.get("accessConfig") or {}).get("externalIp")
        if external and "external" not in found:
            found["external"] = str(external)
        if endpoint.get("ipAddress") and "internal" not in found:
            found["internal"] = str(endpoint["ipAddress"])
    return found


def published_certificate(
    cfg: DeployConfig, project: str, *, api: TpuApi | None = None
) -> dict[str, str]:
    """{"sha256": hex, "spki": "sha256//..."} as the node published them at boot."""
    try:
        values = read_attributes(_api(api), node_name(cfg, project)) or {}
    except ApiError as exc:
        raise FrontDoorError(
            f"cannot read the guest attributes of {cfg.node_id}: {exc.api_message}"
        ) from None
    except QueuedResourceError as exc:  # no credentials
        raise FrontDoorError(str(exc)) from None
    if "tls-sha256" not in values:
        raise FrontDoorError(
            f"node {cfg.node_id} has not published its certificate yet (guest attribute "
            "tpudeploy/tls-sha256): wait for `make wait` to say ready"
        )
    return {
        "sha256": normalize_fingerprint(values["tls-sha256"]),
        "spki": values.get("tls-spki", ""),
    }


def resolve_endpoint(cfg: DeployConfig, project: str, *, api: TpuApi | None = None) -> Endpoint:
    """ENDPOINT (https://host:port) and TLS_SHA256 when set; otherwise the node's address the
    firewall opens to [network] allowed_cidrs, and the fingerprint the node published."""

    def node_url() -> str:
        if not cfg.network.allowed_cidrs:
            raise FrontDoorError(
                "the deployment opens no port ([network] allowed_cidrs is empty): run "
                "`make tunnel` in another terminal, then "
                f"`{ENDPOINT_ENV}=https://localhost:{cfg.proxy.port} make smoke`"
            )
        addresses = node_addresses(cfg, project, api=api)
        ip = addresses.get("external") or addresses.get("internal")
        if not ip:
            raise FrontDoorError(f"node {cfg.node_id} has no IP yet; try `make wait` first")
        return f"https://{ip}:{cfg.proxy.port}"

    return resolve_pinned(node_url, lambda: published_certificate(cfg, project, api=api)["sha256"])


# --- make endpoint, make tunnel ---------------------------------------------------------------


def endpoint_report(
    cfg: DeployConfig,
    project: str,
    *,
    api: TpuApi | None = None,
    cert_out: str = "",
    out: TextIO | None = None,
) -> int:
    """Print where the API is, the certificate to pin and how clients pin it."""
    out = out or sys.stdout
    addresses = node_addresses(cfg, project, api=api)
    cert = published_certificate(cfg, project, api=api)
    port = cfg.proxy.port
    print(f"{cfg.node_id}: the API is served over TLS on port {port} (/v1/*, /health)", file=out)
    if cfg.network.allowed_cidrs:
        ip = addresses.get("external") or addresses.get("internal")
        print(f"  from {', '.join(cfg.network.allowed_cidrs)}: https://{ip}:{port}/v1", file=out)
    else:
        print("  no address range may reach it ([network] allowed_cidrs is empty)", file=out)
    if "internal" in addresses:
        print(
            f"  inside the VPC: https://{addresses['internal']}:{port}/v1 "
            "(once the client's range is in allowed_cidrs)",
            file=out,
        )
    print(f"  through IAP: `make tunnel`, then https://localhost:{port}/v1", file=out)
    print(f"certificate SHA-256: {colon_fingerprint(cert['sha256'])}", file=out)
    print(
        f"  the deployment's one certificate (secret {cfg.tls_secret_id}): every re-created node "
        "serves it, so the pin holds until `make tls-cert ROTATE=1` replaces it",
        file=out,
    )
    if cert["spki"]:
        print(f"public key pin:      {cert['spki']}", file=out)
        print(
            "  curl --insecure checks no CA (there is none) but --pinnedpubkey still refuses any "
            "other key:\n"
            f"  curl --insecure --pinnedpubkey {shlex.quote(cert['spki'])} "
            f'-H "Authorization: Bearer $KEY" https://localhost:{port}/v1/models',
            file=out,
        )
    if cert_out:
        url = os.environ.get(ENDPOINT_ENV, "").strip().rstrip("/") or (
            f"https://{addresses.get('external') or addresses.get('internal')}:{port}"
        )
        pem = fetch_certificate(Endpoint(url, cert["sha256"]))
        with open(cert_out, "w", encoding="ascii") as fh:
            fh.write(pem)
        # A self-signed leaf (CA:FALSE, serverAuth), not a CA: given as the only trust anchor,
        # OpenSSL-based clients (curl, Python, Node) accept exactly this certificate and nothing
        # it could sign (docs/security.md).
        print(
            f"wrote the pinned certificate to {cert_out}: the deployment's self-signed server "
            "certificate (not a CA: it signs nothing), for clients that take a trust file "
            f"(curl --cacert {shlex.quote(cert_out)}, httpx.Client(verify=...)); it names "
            "localhost, so such clients connect through `make tunnel`, or pin it "
            "(curl --pinnedpubkey) by address",
            file=out,
        )
    return 0


def tunnel_command(cfg: DeployConfig, project: str, local_port: int) -> list[str]:
    """gcloud's IAP SSH to the node, forwarding local_port to the proxy on the node's loopback.
    The node's firewall opens port 22 to Google's IAP range only, and no API port at all."""
    return [
        *ssh_argv(cfg.node_id, cfg.zone, project),
        "--",
        "-N",
        "-L",
        f"{local_port}:localhost:{cfg.proxy.port}",
    ]


def run_tunnel(cfg: DeployConfig, project: str, *, out: TextIO | None = None) -> int:
    import subprocess

    out = out or sys.stdout
    raw = os.environ.get(LOCAL_PORT_ENV, "").strip() or str(cfg.proxy.port)
    if not raw.isdigit() or not 1024 <= int(raw) <= 65535:
        raise FrontDoorError(
            f"{LOCAL_PORT_ENV}={raw!r} is not a port you can listen on: use 1024-65535"
        )
    command = tunnel_command(cfg, project, int(raw))
    print(
        f"opening an IAP tunnel from https://localhost:{raw} to the node's TLS proxy "
        "(Ctrl-C to stop); once it is up, in another terminal:\n"
        f"  {ENDPOINT_ENV}=https://localhost:{raw} make smoke\n"
        f"$ {shlex.join(command)}",
        file=out,
        flush=True,
    )
    try:
        # stderr passes through to the terminal line by line, and its tail is kept: a failure
        # is then reported by what gcloud said, not by a list of every possible cause.
        proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        tail: list[str] = []
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            tail = [*tail[-19:], line]
        returncode = proc.wait()
    except FileNotFoundError:
        raise FrontDoorError(
            "gcloud is not installed or not on PATH: install the Google Cloud CLI, then "
            "`gcloud auth login`"
        ) from None
    if returncode not in (0, 130):
        said = "".join(tail)
        cause = gcloud_failure(said)
        if cause:
            raise FrontDoorError(f"the tunnel did not open: {cause}")
        last = " / ".join(x.strip() for x in said.strip().splitlines()[-3:]) or "no output"
        raise FrontDoorError(
            f"the tunnel did not open: gcloud ended with status {returncode} ({last}); run "
            f"the command above yourself to see the whole of it"
        )
    return 0
