"""`make smoke` against a loopback TLS front door: pass, and each way it must fail."""

from __future__ import annotations

import io
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.fake_boot_apis import (
    FakeFrontDoor,
    FakeSecretManager,
    FakeTpu,
    LoopbackCertificate,
    chat_answer,
    weather_call,
)
from tpudeploy import smoke
from tpudeploy.config import parse_config
from tpudeploy.endpoint import Endpoint

KEY = "vk-smokeTestKey-0123456789abcdefghijklmnopq"
MODEL = "google/gemma-4-E2B-it"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> LoopbackCertificate:
    return LoopbackCertificate.create(tmp_path_factory.mktemp("tls"))


def run(fake: FakeFrontDoor, cert: LoopbackCertificate, key: str = KEY) -> str:
    out = io.StringIO()
    assert smoke.run(Endpoint(fake.url, cert.sha256), key, MODEL, out=out) == 0
    return out.getvalue()


def test_front_door_then_chat_and_tool_call_pass_and_report_latencies(
    cert: LoopbackCertificate,
) -> None:
    with FakeFrontDoor(KEY, cert) as fake:
        out = run(fake, cert)
        requests = list(fake.requests)
    unauthenticated = [r for r in requests if "authorization" not in r["headers"]]
    assert [r["path"] for r in unauthenticated] == [
        "/health",
        "/v1/models",
        "/invocations",
        "/metrics",
    ]
    chats = [r for r in requests if "authorization" in r["headers"]]
    # Never /v1/completions (seed: "" on -it models), the key on chat requests only.
    assert {r["path"] for r in chats} == {"/v1/chat/completions"}
    assert chats[0]["body"]["model"] == MODEL and "tools" not in chats[0]["body"]
    assert chats[1]["body"]["tools"][0]["function"]["name"] == "get_weather"
    assert "refused without the key" in out and "/invocations" in out
    assert "Hi there" in out and '"city": "Paris"' in out and " ms " in out
    assert KEY not in out


def test_an_open_front_door_fails_before_the_key_is_sent(cert: LoopbackCertificate) -> None:
    """Issue 13, defect 1: /invocations and /metrics served without the key."""
    with (
        FakeFrontDoor(KEY, cert, locked=False) as fake,
        pytest.raises(smoke.SmokeError, match=r"POST .*/invocations answered 200 without"),
    ):
        smoke.run(Endpoint(fake.url, cert.sha256), KEY, MODEL, out=io.StringIO())
    assert not [r for r in fake.requests if "authorization" in r["headers"]]


def test_another_certificate_is_refused_before_anything_is_sent(
    cert: LoopbackCertificate, tmp_path: Path
) -> None:
    """Issue 13, defect 2: the key crossed the network in clear text; now it goes only to the
    certificate the node published."""
    impostor = LoopbackCertificate.create(tmp_path, "impostor")
    with (
        FakeFrontDoor(KEY, impostor) as fake,
        pytest.raises(smoke.SmokeError, match=r"not the node's .*Nothing was sent"),
    ):
        smoke.run(Endpoint(fake.url, cert.sha256), KEY, MODEL, out=io.StringIO())
    assert fake.requests == []


def test_plain_http_is_refused() -> None:
    with pytest.raises(smoke.SmokeError, match="over TLS only"):
        smoke.run(Endpoint("http://127.0.0.1:1", "0" * 64), KEY, MODEL, out=io.StringIO())


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (dict(api_key="another-key-0123456789abcdefghijklmno"), "refused the API key (401)"),
        (dict(chat=chat_answer("")), "empty content"),
        (dict(chat={"object": "error"}), "no choices[0].message"),
        (dict(tool=chat_answer("It is sunny in Paris.")), "no get_weather tool call"),
        (dict(tool=chat_answer(None, [weather_call(name="get_time")])), "no get_weather"),
        (dict(tool=chat_answer(None, [weather_call("city=Paris")])), "not JSON"),
        (dict(tool=chat_answer(None, [weather_call('{"city": "Lyon"}')])), "without city Paris"),
    ],
)
def test_bad_answers_fail_clearly(
    cert: LoopbackCertificate, server: dict[str, Any], message: str
) -> None:
    with (
        FakeFrontDoor(**{"api_key": KEY, "tls": cert, **server}) as fake,
        pytest.raises(smoke.SmokeError, match=re.escape(message)),
    ):
        smoke.run(Endpoint(fake.url, cert.sha256), KEY, MODEL, out=io.StringIO())


def test_unreachable_endpoint_names_the_tunnel() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(smoke.SmokeError, match=r"cannot reach .*make tunnel"):
        smoke.run(Endpoint(f"https://127.0.0.1:{port}", "0" * 64), KEY, MODEL, out=io.StringIO())


def test_cli_pins_the_published_certificate_and_reads_the_key(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cert: LoopbackCertificate,
) -> None:
    """ENDPOINT from the tunnel, no TLS_SHA256, no VLLM_API_KEY: the fingerprint from the node's
    guest attributes (TPU API), the key from Secret Manager."""
    from tpudeploy import cli

    cfg = parse_config({"project": "test-proj"})
    monkeypatch.delenv("TLS_SHA256", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    attributes = {"tls-sha256": cert.sha256, "tls-spki": "sha256//x"}
    with (
        FakeFrontDoor(KEY, cert) as door,
        FakeTpu([("ready", "")], attributes=attributes) as tpu,
        FakeSecretManager({cfg.api_key_secret_id: [KEY]}) as sm,
    ):
        config = tmp_path / "deploy.toml"
        config.write_text('project = "test-proj"\n')
        monkeypatch.setenv("DEPLOY_CONFIG", str(config))
        monkeypatch.setenv("ENDPOINT", door.url)
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        rc = cli.main(["smoke"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "smoke test passed" in captured.out and "certificate pinned" in captured.out
    assert KEY not in captured.out + captured.err


def test_cli_without_an_open_range_points_at_the_tunnel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default deployment opens no port: smoke says how to get in instead of timing out."""
    from tpudeploy import cli

    config = tmp_path / "deploy.toml"
    config.write_text('project = "test-proj"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.delenv("ENDPOINT", raising=False)
    rc = cli.main(["smoke"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("error: ")
    assert "make tunnel" in err and "ENDPOINT=https://localhost:8443 make smoke" in err


def test_cli_unauthorized_is_an_error_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cert: LoopbackCertificate,
) -> None:
    from tpudeploy import cli

    config = tmp_path / "deploy.toml"
    config.write_text('project = "test-proj"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    with FakeFrontDoor(KEY, cert) as fake:
        monkeypatch.setenv("ENDPOINT", fake.url)
        monkeypatch.setenv("TLS_SHA256", cert.sha256)
        monkeypatch.setenv("VLLM_API_KEY", "stale-key-0123456789abcdefghijklmnopqrstuvw")
        rc = cli.main(["smoke"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("error: ") and "401" in err and "Traceback" not in err
    assert "stale-key" not in err


def test_a_malformed_fingerprint_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tpudeploy import cli

    config = tmp_path / "deploy.toml"
    config.write_text('project = "test-proj"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    monkeypatch.setenv("ENDPOINT", "https://localhost:8443")
    monkeypatch.setenv("TLS_SHA256", "abc")
    assert cli.main(["smoke"]) == 1
    err = capsys.readouterr().err
    assert "TLS_SHA256='abc' is not a SHA-256 fingerprint" in err


@pytest.mark.parametrize(
    "key",
    ["short-key-0123456789abcdefghijklmn", "x" * 44, "vk-smokeTestKey-0123456789abcdefghijklmno+"],
    ids=["32-characters", "44-characters", "not-url-safe"],
)
def test_a_key_make_api_key_did_not_make_is_refused_before_any_request(
    monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    """Issue 22, item 7: the front door's digest check is safe because the key is 256 random
    bits; a hand-made key of another shape is refused where it is read, never echoed."""
    from tpudeploy.config import parse_config

    monkeypatch.setenv("VLLM_API_KEY", key)
    with pytest.raises(smoke.SmokeError) as info:
        smoke.resolve_api_key(parse_config({"project": "test-proj"}), "test-proj")
    said = str(info.value)
    assert "VLLM_API_KEY is not a key `make api-key` made" in said and "make api-key" in said
    assert key not in said
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    assert smoke.resolve_api_key(parse_config({"project": "test-proj"}), "test-proj") == KEY
