"""Loopback fakes for the boot path: TPU v2alpha1 guest attributes/node, Secret Manager, the
node's TLS front door. Each is a tools.rehearsal.fakes.base.LoopbackServer (the rehearsal's
fakes share it): scripted answers, recorded requests, on 127.0.0.1."""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.rehearsal.fakes.base import Answer, LoopbackServer, api_error


@dataclass(frozen=True)
class LoopbackCertificate:
    """A self-signed certificate for 127.0.0.1/localhost, like the one the node makes at boot."""

    cert: Path
    key: Path
    sha256: str  # of the DER encoding, what the node publishes as tpudeploy/tls-sha256

    @classmethod
    def create(cls, directory: Path, name: str = "node") -> LoopbackCertificate:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .sign(key, hashes.SHA256())
        )
        directory.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        der = cert.public_bytes(serialization.Encoding.DER)
        return cls(cert_path, key_path, hashlib.sha256(der).hexdigest())


class FakeTpu(LoopbackServer):
    """Node get + getGuestAttributes; `phases` is what successive polls show (last one sticks).
    A phase of None means "no guest attribute yet" (404); "no-node" makes the node itself 404."""

    def __init__(
        self,
        phases: list[tuple[str | None, str]],
        ip: str = "127.0.0.1",
        attributes: dict[str, str] | None = None,
    ) -> None:
        self.phases = list(phases)
        self.ip = ip
        # More tpudeploy/ guest attributes, e.g. the certificate's tls-sha256 and tls-spki.
        self.attributes = dict(attributes or {})
        super().__init__(self.route)

    def route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        m = re.fullmatch(
            r"/v2alpha1/(projects/[^/]+/locations/[^/]+/nodes/[^/:?]+)(:getGuestAttributes)?(\?.*)?",
            path,
        )
        if not m:
            return api_error(404, f"no route {method} {path}")
        phase, reason = self.phases[0]
        if m.group(2):
            if len(self.phases) > 1:
                self.phases.pop(0)
            if phase in (None, "no-node"):
                return api_error(404, "guest attributes not found")
            items = [{"namespace": "tpudeploy", "key": "phase", "value": phase}]
            if reason:
                items.append({"namespace": "tpudeploy", "key": "reason", "value": reason})
            for key, value in self.attributes.items():
                items.append({"namespace": "tpudeploy", "key": key, "value": value})
            return 200, {
                "guestAttributes": [{"queryPath": "tpudeploy/", "queryValue": {"items": items}}]
            }
        if phase == "no-node":
            return api_error(404, f"Resource '{m.group(1)}' was not found")
        return 200, {
            "name": m.group(1),
            "state": "READY",
            "networkEndpoints": [
                {"ipAddress": "10.182.0.2", "accessConfig": {"externalIp": self.ip}}
            ],
        }


class FakeSecretManager(LoopbackServer):
    def __init__(
        self,
        secrets: dict[str, list[str]],
        *,
        latest_state: dict[str, str] | None = None,
        forbidden: frozenset[str] = frozenset(),
    ) -> None:
        self.secrets = secrets  # secret id -> versions (values); missing id = 404
        # The latest version's state when it is not ENABLED (metadata reads only).
        self.latest_state = dict(latest_state or {})
        # Secrets whose metadata this caller may not read (HTTP 403).
        self.forbidden = forbidden
        super().__init__(self.route)

    def route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        meta = re.fullmatch(r"/v1/projects/([^/]+)/secrets/([^/:]+)(/versions/latest)?", path)
        if meta and method == "GET":
            project, secret_id, latest = meta.groups()
            if secret_id in self.forbidden:
                return api_error(403, f"Permission denied on secret {secret_id}")
            if secret_id not in self.secrets:
                return api_error(404, f"Secret [{secret_id}] not found.")
            name = f"projects/{project}/secrets/{secret_id}"
            if not latest:
                return 200, {"name": name, "replication": {"automatic": {}}}
            versions = self.secrets[secret_id]
            if not versions:
                return api_error(404, f"Secret [{name}] not found or has no versions.")
            state = self.latest_state.get(secret_id, "ENABLED")
            return 200, {"name": f"{name}/versions/{len(versions)}", "state": state}
        m = re.fullmatch(
            r"/v1/projects/([^/]+)/secrets/([^/:]+)(:addVersion|/versions/latest:access)", path
        )
        if not m or m.group(2) not in self.secrets:
            return api_error(404, f"Secret [{path}] not found or has no versions.")
        project, secret_id, verb = m.groups()
        versions = self.secrets[secret_id]
        if verb == ":addVersion" and method == "POST":
            versions.append(base64.b64decode(body["payload"]["data"]).decode())
            return 200, {"name": f"projects/{project}/secrets/{secret_id}/versions/{len(versions)}"}
        if verb.endswith(":access") and method == "GET":
            if not versions:
                return api_error(404, "no versions")
            data = base64.b64encode(versions[-1].encode()).decode()
            return 200, {
                "name": f"projects/{project}/secrets/{secret_id}/versions/{len(versions)}",
                "payload": {"data": data},
            }
        return api_error(404, "no route")


def chat_answer(
    content: str | None = None, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def weather_call(arguments: str = '{"city": "Paris"}', name: str = "get_weather") -> dict[str, Any]:
    return {"id": "call-1", "type": "function", "function": {"name": name, "arguments": arguments}}


class FakeFrontDoor(LoopbackServer):
    """What the node's TLS proxy shows a client (templates/nginx.conf.j2): /health open, every
    other path 401 without the Bearer key, /v1/chat/completions answered with it, the rest 404.
    `locked=False` plays vLLM without a proxy: every path but /v1 served without a key."""

    def __init__(
        self,
        api_key: str,
        tls: LoopbackCertificate,
        chat: Any = None,
        tool: Any = None,
        *,
        locked: bool = True,
    ) -> None:
        self.api_key = api_key
        self.locked = locked
        self.chat = chat if chat is not None else chat_answer("Hi there, nice to meet you!")
        self.tool = tool if tool is not None else chat_answer(None, [weather_call()])
        super().__init__(self.route, tls=(tls.cert, tls.key))

    @property
    def url(self) -> str:
        return f"https://{self.host}"

    def route(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Answer:
        if path == "/health":
            return 200, {}
        authorized = headers.get("authorization") == f"Bearer {self.api_key}"
        if not authorized and (self.locked or path.startswith("/v1/")):
            return 401, {"error": "missing or wrong API key"}
        if path == "/v1/chat/completions" and method == "POST":
            return 200, self.tool if body.get("tools") else self.chat
        return (404, {"error": "not found"}) if self.locked else (200, {"served": path})
