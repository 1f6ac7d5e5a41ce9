"""`make endpoint` and `make smoke` on GKE: the Service's load balancer address from a loopback
Kubernetes API, the one certificate every replica serves (Secret Manager's <name>-tls), pinned,
against loopback front doors that play two replicas."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.fake_boot_apis import FakeFrontDoor, LoopbackCertificate, chat_answer, weather_call
from tests.gke import test_gke_ops
from tests.gke.test_gke_ops import CFG, NS, PROJECT, Cluster
from tools.rehearsal.fakes import k8s_ops as k8s
from tpudeploy import facts, smoke, tlscert
from tpudeploy.config import parse_config
from tpudeploy.endpoint import FrontDoorError
from tpudeploy.gke import frontdoor as gke_frontdoor

# The loopback cluster (clusters.get and the Kubernetes API) of tests/gke/test_gke_ops.py.
cluster = test_gke_ops.cluster
# --- the front door: the Service's address and the one certificate --------------------------


class Store:
    """Secret Manager's access_latest for <name>-tls and <name>-api-key."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def access_latest(self, secret_id: str) -> str:
        return self.values[secret_id]


def _certificate(bundle: tlscert.Bundle, directory: Path) -> LoopbackCertificate:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_text(bundle.cert_pem)
    (directory / "tls.key").write_text(bundle.key_pem)
    sha = tlscert.fingerprints(bundle.cert_pem)["sha256"]
    return LoopbackCertificate(directory / "tls.crt", directory / "tls.key", sha)


KEY = "vk-gkeSmokeKey-0123456789abcdefghijklmnopq"


def test_smoke_reaches_every_replica_pinned_to_the_one_certificate(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas behind the load balancer serve the same stored certificate: one pin passes
    on both. The address is the Service's load balancer ingress."""
    monkeypatch.delenv("ENDPOINT", raising=False)
    monkeypatch.delenv("TLS_SHA256", raising=False)
    bundle = tlscert.make_bundle(CFG.name)
    cert = _certificate(bundle, tmp_path / "tls")
    store = Store({CFG.tls_secret_id: bundle.text})
    chat, tool = chat_answer("Hi from a replica!"), chat_answer(None, [weather_call()])
    for replica in range(2):
        with FakeFrontDoor(KEY, cert, chat, tool) as door:
            port = int(door.host.rsplit(":", 1)[1])
            cfg = parse_config({"platform": "gke", "project": PROJECT, "proxy": {"port": port}})
            cluster.kube.put(k8s.service(cfg.name, NS, ingress_ip="127.0.0.1"))
            endpoint = gke_frontdoor.resolve_endpoint(cfg, PROJECT, store=store)
            assert endpoint.url == f"https://127.0.0.1:{port}"
            out = io.StringIO()
            assert smoke.run(endpoint, KEY, cfg.vllm.served_model_name, out=out) == 0, replica
            assert "smoke test passed" in out.getvalue()


def test_a_pod_local_certificate_is_refused_by_the_pin(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the first slice did: each pod its own certificate. The pin from the secret refuses
    that replica before the key is sent."""
    monkeypatch.delenv("ENDPOINT", raising=False)
    monkeypatch.delenv("TLS_SHA256", raising=False)
    stored = tlscert.make_bundle(CFG.name)
    own = _certificate(tlscert.make_bundle(CFG.name), tmp_path / "own")
    with FakeFrontDoor(KEY, own) as door:
        port = int(door.host.rsplit(":", 1)[1])
        cfg = parse_config({"platform": "gke", "project": PROJECT, "proxy": {"port": port}})
        cluster.kube.put(k8s.service(cfg.name, NS, ingress_ip="127.0.0.1"))
        endpoint = gke_frontdoor.resolve_endpoint(
            cfg, PROJECT, store=Store({cfg.tls_secret_id: stored.text})
        )
        with pytest.raises(smoke.SmokeError, match="presented a certificate"):
            smoke.run(endpoint, KEY, cfg.vllm.served_model_name, out=io.StringIO())
        assert not [r for r in door.requests if "authorization" in r["headers"]]


def test_endpoint_prints_the_address_and_pins_never_the_key(
    cluster: Cluster, tmp_path: Path
) -> None:
    bundle = tlscert.make_bundle(CFG.name)
    cluster.kube.put(k8s.service(CFG.name, NS, ingress_ip="10.128.0.9"))
    out = io.StringIO()
    cert_out = tmp_path / "front-door.pem"
    rc = gke_frontdoor.endpoint_report(
        CFG,
        PROJECT,
        store=Store({CFG.tls_secret_id: bundle.text}),
        cert_out=str(cert_out),
        out=out,
    )
    assert rc == 0
    text = out.getvalue()
    pins = tlscert.fingerprints(bundle.cert_pem)
    assert f"https://10.128.0.9:{CFG.proxy.port}/v1" in text
    assert pins["spki"] in text
    assert pins["sha256"][:2].upper() + ":" in text
    assert cert_out.read_text() == bundle.cert_pem
    assert "PRIVATE KEY" not in text + cert_out.read_text()


def test_a_service_without_an_address_yet_says_to_wait(cluster: Cluster) -> None:
    cluster.kube.put(k8s.service(CFG.name, NS))
    with pytest.raises(FrontDoorError, match="no load balancer address yet"):
        gke_frontdoor.resolve_endpoint(CFG, PROJECT, store=Store({}))


def test_a_stored_value_that_is_not_a_bundle_says_make_tls_cert(cluster: Cluster) -> None:
    cluster.kube.put(k8s.service(CFG.name, NS, ingress_ip="10.0.0.2"))
    bundle = tlscert.make_bundle(CFG.name)
    with pytest.raises(FrontDoorError, match="make tls-cert"):
        gke_frontdoor.resolve_endpoint(
            CFG, PROJECT, store=Store({CFG.tls_secret_id: bundle.cert_pem})
        )


ROUTED = parse_config(
    {
        "platform": "gke",
        "project": PROJECT,
        "gke": {"min_version": facts.GKE_INFERENCE_CRDS_MIN_VERSION},
        "routing": {"gateway": True, "certificate": "gemma4-gateway", "proxy_subnet_exists": True},
    }
)


@pytest.mark.parametrize(
    ("gateway", "words"),
    [
        (k8s.gateway(ROUTED.name, NS, address="10.128.0.50"), ["https://10.128.0.50/v1"]),
        (
            k8s.gateway(ROUTED.name, NS, message="waiting for controller"),
            ["has no address yet (waiting for controller)", "try again"],
        ),
        (None, ["does not exist", "make deploy"]),
    ],
    ids=["programmed", "pending", "absent"],
)
def test_endpoint_names_the_gateway_when_routing_is_on(
    cluster: Cluster, gateway: dict[str, object] | None, words: list[str]
) -> None:
    """Issue 26: with routing on, a client that used the Service's address skipped the picker;
    make endpoint now says where the Gateway answers (or why not yet), and that the Service is
    the plain-balancing path to compare it with."""
    bundle = tlscert.make_bundle(ROUTED.name)
    cluster.kube.put(k8s.service(ROUTED.name, NS, ingress_ip="10.128.0.9"))
    if gateway is not None:
        cluster.kube.put(gateway)
    out = io.StringIO()
    store = Store({ROUTED.tls_secret_id: bundle.text})
    assert gke_frontdoor.endpoint_report(ROUTED, PROJECT, store=store, out=out) == 0
    text = out.getvalue()
    assert f"https://10.128.0.9:{ROUTED.proxy.port}/v1" in text
    assert "Certificate Manager certificate gemma4-gateway" in text
    assert all(w in text for w in words), text
    plain = io.StringIO()
    gke_frontdoor.endpoint_report(CFG, PROJECT, store=store, out=plain)
    assert "Gateway" not in plain.getvalue()  # routing off: nothing about it
