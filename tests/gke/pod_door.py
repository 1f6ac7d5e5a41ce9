"""The GKE pod's real front door on loopback, shared by the tests that run it (the replicas' in
tests/gke/test_gke_frontdoor.py, the wake responder's in tests/gke/test_gke_wake.py, the drain's):
the pod's init script (templates/pod_frontdoor.sh.j2) run under sh on an API key file, then
Debian's nginx on the files it wrote, in front of whatever listens on a backend port.

Only listen lines change (127.0.0.1 and free ports), so nothing is reachable off this machine.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.render.test_proxy import NGINX, free_port, loopback_config, stop_nginx
from tpudeploy import facts, render, tlscert
from tpudeploy.config import parse_config
from tpudeploy.gke import pod

KEY = "k" * 43
# What `make tls-cert` stores in <name>-tls: one certificate for every replica.
BUNDLE = tlscert.make_bundle("demo")
# With [routing] gateway on, so the front door has all three listeners: TLS, metrics, the pool's.
ROUTED = {
    "platform": "gke",
    "gke": {"min_version": facts.GKE_INFERENCE_CRDS_MIN_VERSION},
    "routing": {"gateway": True, "certificate": "gemma4-gateway", "proxy_subnet_exists": True},
    # Short agent turns: the planner sends a replica more streams than the TLS port's allowance.
    "load": {"expected_context": 2048},
}


@dataclass
class PodDoor:
    """A running front door: its loopback ports, a client context trusting its certificate,
    the files its init script wrote and nginx's -p prefix (the pod's /tmp)."""

    tls_port: int
    metrics_port: int
    pool_port: int
    context: ssl.SSLContext
    out: Path
    prefix: Path


def prep(
    tmp: Path, key: str, cfg_port: int, bundle: str = BUNDLE.text
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the pod's init script with its paths moved under tmp."""
    cfg = parse_config({**ROUTED, "vllm": {"port": cfg_port}})
    secrets, out, scripts = tmp / "secrets", tmp / "frontdoor", tmp / "scripts"
    for d in (secrets, out, scripts):
        d.mkdir()
    (secrets / pod.client_key_file("default")).write_text(key)
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


def loopback_pod_ports(text: str, place: Callable[[str], Path]) -> tuple[str, int, int]:
    """The pod's metrics and pool listeners on free loopback ports and their relays' sockets
    where PLACE puts each socket path (what loopback_config does for the TLS port):
    (text, metrics port, pool port)."""
    metrics, pool = free_port(), free_port()
    for port, free in ((pod.METRICS_PORT, metrics), (pod.POOL_PORT, pool)):
        assert text.count(f"listen {port};") == 1, port
        text = text.replace(f"listen {port};", f"listen 127.0.0.1:{free};")
    for socket_path in (render.PROXY_POOL_SOCKET, render.PROXY_METRICS_SOCKET):
        assert text.count(socket_path) == 2, socket_path  # each relay's two ends
        text = text.replace(socket_path, str(place(socket_path)))
    return text, metrics, pool


@contextmanager
def running(tmp: Path, backend_port: int) -> Iterator[PodDoor]:
    """The pod's front door, prepared under tmp, with nginx in front of backend_port; stopped
    and its sockets and prefix removed on exit."""
    result, out = prep(tmp, KEY, backend_port)
    assert result.returncode == 0, result.stderr
    # The same relay and TLS socket as the node's front door (tests/render/test_proxy.py).
    sockets = Path(tempfile.mkdtemp(prefix="pod-door-"))
    sockets.chmod(0o711)
    text, metrics, pool = loopback_pod_ports(
        (out / pod.NGINX_CONF).read_text(), lambda path: sockets / Path(path).name
    )
    tls = free_port()
    conf = out / "nginx.loopback.conf"
    conf.write_text(loopback_config(text, tls, sockets / "tls.sock"))
    # The pod's /tmp: where nginx's workers (not root, when the suite is) write their temp
    # files, so it must be reachable by them, as the pod's emptyDir is.
    prefix = Path(tempfile.mkdtemp(prefix="pod-door-prefix-"))
    prefix.chmod(0o711)
    assert NGINX is not None
    proc = subprocess.Popen(
        [NGINX, "-p", f"{prefix}/", "-c", str(conf), "-e", "stderr"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
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
        yield PodDoor(tls, metrics, pool, context, out, prefix)
    finally:
        stop_nginx(proc)
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(prefix, ignore_errors=True)
