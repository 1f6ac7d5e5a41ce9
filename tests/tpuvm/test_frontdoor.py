"""`make endpoint` and `make tunnel` against the loopback TPU API and a stand-in gcloud."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from tests.fake_boot_apis import FakeFrontDoor, FakeTpu, LoopbackCertificate
from tpudeploy import cli, endpoint
from tpudeploy.config import parse_config
from tpudeploy.tpuvm import frontdoor

STUBS = Path(__file__).resolve().parents[1] / "stubs"
KEY = "vk-frontDoorTestKey-0123456789abcdefghijkl"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> LoopbackCertificate:
    return LoopbackCertificate.create(tmp_path_factory.mktemp("tls"))


def test_endpoint_prints_addresses_fingerprint_and_a_pin(
    monkeypatch: pytest.MonkeyPatch, cert: LoopbackCertificate
) -> None:
    cfg = parse_config({"project": "test-proj", "network": {"allowed_cidrs": ["10.8.0.0/16"]}})
    attributes = {"tls-sha256": cert.sha256, "tls-spki": "sha256//c29tZS1waW4="}
    out = io.StringIO()
    with FakeTpu([("ready", "")], ip="203.0.113.5", attributes=attributes) as tpu:
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        assert frontdoor.endpoint_report(cfg, "test-proj", out=out) == 0
    text = out.getvalue()
    assert "from 10.8.0.0/16: https://203.0.113.5:8443/v1" in text
    assert "inside the VPC: https://10.182.0.2:8443/v1" in text
    assert "make tunnel`, then https://localhost:8443/v1" in text
    assert endpoint.colon_fingerprint(cert.sha256) in text
    assert "--pinnedpubkey sha256//c29tZS1waW4=" in text


def test_endpoint_writes_the_pinned_certificate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cert: LoopbackCertificate
) -> None:
    cfg = parse_config({"project": "test-proj"})
    target = tmp_path / "node.pem"
    with (
        FakeTpu([("ready", "")], attributes={"tls-sha256": cert.sha256}) as tpu,
        FakeFrontDoor(KEY, cert) as door,
    ):
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        monkeypatch.setenv("ENDPOINT", door.url)
        out = io.StringIO()
        frontdoor.endpoint_report(cfg, "test-proj", cert_out=str(target), out=out)
        assert door.requests == []  # the certificate is read from the handshake alone
    assert target.read_text() == cert.cert.read_text()
    assert "no address range may reach it" in out.getvalue()


def test_endpoint_before_the_node_published_its_certificate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text('project = "test-proj"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    with FakeTpu([("starting-vllm", "")]) as tpu:
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        assert cli.main(["endpoint"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "tpudeploy/tls-sha256" in err and "make wait" in err


def _tunnel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, status: int, stderr: str = "", **env: str
) -> list[list[str]]:
    stub_dir = tmp_path / "stub"
    stub_dir.mkdir(parents=True)
    config = {"gcloud_status": status, "gcloud_stderr": stderr}
    (stub_dir / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("STUB_DIR", str(stub_dir))
    monkeypatch.setenv("PATH", f"{STUBS}:{os.environ['PATH']}")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cfg = parse_config({"project": "test-proj"})
    frontdoor.run_tunnel(cfg, "test-proj", out=io.StringIO())
    lines = (stub_dir / "calls.jsonl").read_text().splitlines()
    return [json.loads(line)["argv"] for line in lines]


def test_tunnel_forwards_a_local_port_to_the_proxy_through_iap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (argv,) = _tunnel(monkeypatch, tmp_path, 0, LOCAL_PORT="9443")
    assert argv[:6] == ["alpha", "compute", "tpus", "tpu-vm", "ssh", "gemma4-v5e"]
    assert "--tunnel-through-iap" in argv and "--zone=us-west4-a" in argv
    assert argv[argv.index("--") + 1 :] == ["-N", "-L", "9443:localhost:8443"]


# gcloud's own words for two causes (issue 23 item 5: the old message listed four at once).
NOT_LOGGED_IN = (
    "ERROR: (gcloud.alpha.compute.tpus.tpu-vm.ssh) You do not currently have an active account "
    "selected.\nPlease run:\n\n  $ gcloud auth login\n\nto obtain new credentials."
)
IAP_REFUSED = (
    "ERROR: (gcloud.compute.start-iap-tunnel) Error while connecting [4033: 'not authorized']."
)


def test_tunnel_failure_says_the_real_cause(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(endpoint.FrontDoorError) as caught:
        _tunnel(monkeypatch, tmp_path / "auth", 1, stderr=NOT_LOGGED_IN)
    text = str(caught.value)
    assert "gcloud is not logged in" in text and "You do not currently have an active" in text
    assert "Tunnel User" not in text and "alpha component" not in text
    with pytest.raises(endpoint.FrontDoorError) as caught:
        _tunnel(monkeypatch, tmp_path / "iap", 1, stderr=IAP_REFUSED)
    assert "IAP-secured Tunnel User" in str(caught.value) and "4033" in str(caught.value)
    assert "logged in" not in str(caught.value)
    with pytest.raises(endpoint.FrontDoorError, match="gcloud ended with status 255"):
        _tunnel(monkeypatch, tmp_path, 255)
    with pytest.raises(endpoint.FrontDoorError, match="LOCAL_PORT='80'"):
        _tunnel(monkeypatch, tmp_path / "low", 0, LOCAL_PORT="80")
