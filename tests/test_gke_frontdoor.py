"""The GKE pod's front door for real: its init script (templates/pod_frontdoor.sh.j2) run under
sh on an API key file, then Debian's nginx on the files it wrote, in front of a fake vLLM.

Only listen lines change (127.0.0.1 and free ports), so nothing is reachable off this machine.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_proxy import NGINX, FakeVllm, free_port, loopback_config, stop_nginx
from tpudeploy.config import parse_config
from tpudeploy.gke import pod, tlscert

pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed; CI runs these")
KEY = "k" * 43
# What `make tls-cert` stores in <name>-tls: one certificate for every replica.
BUNDLE = tlscert.make_bundle("demo")


@dataclass
class Door:
    tls_port: int
    metrics_port: int
    context: ssl.SSLContext
    vllm: FakeVllm
    out: Path


def _prep(
    tmp: Path, key: str, cfg_port: int, bundle: str = BUNDLE.text
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the pod's init script with its paths moved under tmp."""
    cfg = parse_config({"platform": "gke", "vllm": {"port": cfg_port}})
    secrets, out, scripts = tmp / "secrets", tmp / "frontdoor", tmp / "scripts"
    for d in (secrets, out, scripts):
        d.mkdir()
    (secrets / pod.API_KEY_FILE).write_text(key)
    (secrets / pod.TLS_BUNDLE_FILE).write_text(bundle)
    for name, text in pod.scripts(cfg).items():
        text = text.replace(pod.SECRETS_DIR, str(secrets)).replace(pod.FRONTDOOR_DIR, str(out))
        (scripts / name).write_text(text.replace(pod.SCRIPTS_DIR, str(scripts)))
    result = subprocess.run(
        ["/bin/sh", str(scripts / pod.PREP_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result, out


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    tmp = tmp_path_factory.mktemp("pod-door")
    with FakeVllm() as vllm:
        result, out = _prep(tmp, KEY, vllm.port)
        assert result.returncode == 0, result.stderr
        text = (out / pod.NGINX_CONF).read_text()
        tls, metrics = free_port(), free_port()
        text = text.replace(f"listen {pod.METRICS_PORT};", f"listen 127.0.0.1:{metrics};")
        # The same relay and TLS socket as the node's front door (tests/test_proxy.py).
        sockets = Path(tempfile.mkdtemp(prefix="pod-door-"))
        sockets.chmod(0o711)
        text = loopback_config(text, tls, sockets / "tls.sock")
        conf = out / "nginx.loopback.conf"
        conf.write_text(text)
        prefix = tmp / "prefix"
        prefix.mkdir()
        assert NGINX is not None
        proc = subprocess.Popen(
            [NGINX, "-p", f"{prefix}/", "-c", str(conf), "-e", "stderr"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            import socket
            import time

            deadline = time.monotonic() + 15
            while True:
                try:
                    socket.create_connection(("127.0.0.1", metrics), timeout=1).close()
                    break
                except OSError:
                    assert proc.poll() is None, proc.communicate()[1]
                    assert time.monotonic() < deadline, "nginx did not start"
                    time.sleep(0.05)
            context = ssl.create_default_context(cafile=str(out / "tls.crt"))
            context.check_hostname = False
            yield Door(tls, metrics, context, vllm, out)
        finally:
            stop_nginx(proc)
            shutil.rmtree(sockets, ignore_errors=True)


def _get(door: Door, path: str, *, tls: bool, key: str | None = None) -> int:
    if tls:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", door.tls_port, context=door.context, timeout=10
        )
    else:
        conn = http.client.HTTPConnection("127.0.0.1", door.metrics_port, timeout=10)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    conn.request("GET", path, headers=headers)
    status = conn.getresponse().status
    conn.close()
    return status


def test_the_key_file_becomes_a_digest_and_never_a_copy(door: Door) -> None:
    for path in door.out.iterdir():
        assert KEY not in path.read_text(errors="replace"), path.name
    assert re.fullmatch(
        r'secure_link "[A-Za-z0-9_-]{22}";\n', (door.out / "api_key.conf").read_text()
    )


def test_metrics_listener_serves_vllm_metrics_and_nothing_else(door: Door) -> None:
    before = len(door.vllm.paths())
    assert _get(door, "/metrics", tls=False) == 200
    assert door.vllm.paths()[before:] == ["/metrics"]
    for path in ("/v1/models", "/invocations", "/tokenize", "/metrics/../v1/models", "/"):
        assert _get(door, path, tls=False) == 404, path
    # dot segments resolve before matching: /health/../metrics is /metrics, and only that goes on
    assert _get(door, "/health/../metrics", tls=False) == 200
    assert door.vllm.paths()[before:] == ["/metrics", "/metrics"]


def test_the_api_still_needs_the_key_on_the_tls_port(door: Door) -> None:
    assert _get(door, "/v1/models", tls=True) == 401
    assert _get(door, "/v1/models", tls=True, key=KEY) == 200
    assert _get(door, "/health", tls=True) == 200
    assert _get(door, "/metrics", tls=True) == 401


def test_an_empty_key_file_stops_the_pod_with_the_fix(tmp_path: Path) -> None:
    result, out = _prep(tmp_path, "", 8000)
    assert result.returncode != 0
    assert "make api-key" in result.stderr
    assert not (out / "api_key.conf").exists()


def test_every_replica_serves_the_one_stored_certificate(door: Door, tmp_path: Path) -> None:
    """Issue 25: each pod made its own self-signed certificate, so a client pinning one
    fingerprint was refused by every other replica behind the load balancer. Now two replicas'
    init containers write the certificate of the secret's bundle, byte for byte."""
    second, out2 = _prep(tmp_path, KEY, 8000)
    assert second.returncode == 0, second.stderr
    assert (door.out / "tls.crt").read_text() == BUNDLE.cert_pem
    assert (out2 / "tls.crt").read_text() == BUNDLE.cert_pem
    assert (out2 / "tls.key").read_text() == BUNDLE.key_pem
    assert (out2 / "tls.key").stat().st_mode & 0o777 == 0o440
    # nginx serves it: the running front door's certificate is the stored one's fingerprint.
    conn = http.client.HTTPSConnection("127.0.0.1", door.tls_port, context=door.context)
    conn.connect()
    assert conn.sock is not None
    served = conn.sock.getpeercert(binary_form=True) or b""
    conn.close()
    assert hashlib.sha256(served).hexdigest() == tlscert.fingerprints(BUNDLE.cert_pem)["sha256"]


@pytest.mark.parametrize(
    "bundle",
    ["", BUNDLE.cert_pem, BUNDLE.text + BUNDLE.cert_pem],
    ids=["empty", "no-key", "two-certificates"],
)
def test_a_missing_or_malformed_certificate_stops_the_pod_with_the_fix(
    tmp_path: Path, bundle: str
) -> None:
    result, out = _prep(tmp_path, KEY, 8000, bundle=bundle)
    assert result.returncode != 0
    assert "make tls-cert" in result.stderr
    assert BUNDLE.key_pem not in result.stderr
    assert not (out / "tls.key").exists() or not (out / "tls.key").read_text()
