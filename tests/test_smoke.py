"""`make smoke` against a loopback OpenAI-compatible server: pass, and each way it must fail."""

from __future__ import annotations

import io
import re
import socket

import pytest

from tests.fake_boot_apis import FakeSecretManager, FakeTpu, FakeVllm, chat_answer, weather_call
from tpudeploy import smoke
from tpudeploy.config import parse_config

KEY = "vk-smokeTestKey-0123456789abcdefghijklmnopq"
MODEL = "google/gemma-4-E2B-it"


def run(fake: FakeVllm, key: str = KEY) -> str:
    out = io.StringIO()
    assert smoke.run(f"http://{fake.host}", key, MODEL, out=out) == 0
    return out.getvalue()


def test_chat_and_tool_call_pass_and_report_latencies() -> None:
    with FakeVllm(KEY) as fake:
        out = run(fake)
        bodies = [r["body"] for r in fake.requests]
        paths = {r["path"] for r in fake.requests}
    assert paths == {"/v1/chat/completions"}  # never /v1/completions (seed: "" on -it models)
    assert bodies[0]["model"] == MODEL and "tools" not in bodies[0]
    assert bodies[1]["tools"][0]["function"]["name"] == "get_weather"
    assert "Hi there" in out and '"city": "Paris"' in out and " ms " in out
    assert KEY not in out


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (dict(api_key="another-key"), "refused the API key (401)"),
        (dict(chat=chat_answer("")), "empty content"),
        (dict(chat={"object": "error"}), "no choices[0].message"),
        (dict(tool=chat_answer("It is sunny in Paris.")), "no get_weather tool call"),
        (dict(tool=chat_answer(None, [weather_call(name="get_time")])), "no get_weather"),
        (dict(tool=chat_answer(None, [weather_call("city=Paris")])), "not JSON"),
        (dict(tool=chat_answer(None, [weather_call('{"city": "Lyon"}')])), "without city Paris"),
    ],
)
def test_bad_answers_fail_clearly(server, message) -> None:
    with (
        FakeVllm(**{"api_key": KEY, **server}) as fake,
        pytest.raises(smoke.SmokeError, match=re.escape(message)),
    ):
        smoke.run(f"http://{fake.host}", KEY, MODEL, out=io.StringIO())


def test_unreachable_endpoint_names_the_firewall() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(smoke.SmokeError, match=r"cannot reach .* allowed_cidrs"):
        smoke.run(f"http://127.0.0.1:{port}", KEY, MODEL, out=io.StringIO())


def test_cli_finds_endpoint_and_key_without_env(monkeypatch, tmp_path, capsys) -> None:
    """No ENDPOINT, no VLLM_API_KEY: the node's IP from the TPU API, the key from Secret Manager."""
    from tpudeploy import cli

    cfg = parse_config({"project": "test-proj"})
    monkeypatch.delenv("ENDPOINT", raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    with (
        FakeVllm(KEY) as vllm,
        FakeTpu([("ready", "")]) as tpu,
        FakeSecretManager({cfg.api_key_secret_id: [KEY]}) as sm,
    ):
        # The fake node's IP is 127.0.0.1; the config's port points at the fake vLLM.
        port = vllm.host.rsplit(":", 1)[1]
        config = tmp_path / "deploy.toml"
        config.write_text(f'project = "test-proj"\n[vllm]\nport = {port}\n')
        monkeypatch.setenv("DEPLOY_CONFIG", str(config))
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", sm.host)
        rc = cli.main(["smoke"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "smoke test passed" in captured.out
    assert KEY not in captured.out + captured.err


def test_cli_unauthorized_is_an_error_line_not_a_traceback(monkeypatch, tmp_path, capsys) -> None:
    from tpudeploy import cli

    config = tmp_path / "deploy.toml"
    config.write_text('project = "test-proj"\n')
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    with FakeVllm(KEY) as fake:
        monkeypatch.setenv("ENDPOINT", f"http://{fake.host}")
        monkeypatch.setenv("VLLM_API_KEY", "stale-key")
        rc = cli.main(["smoke"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("error: ") and "401" in err and "Traceback" not in err
    assert "stale-key" not in err


def test_a_missing_node_says_deploy_then_wait(monkeypatch) -> None:
    cfg = parse_config({"project": "test-proj"})
    monkeypatch.delenv("ENDPOINT", raising=False)
    with FakeTpu([("no-node", "")]) as tpu:
        monkeypatch.setenv("TPU_EMULATOR_HOST", tpu.host)
        with pytest.raises(smoke.SmokeError, match="does not exist in us-west4-a: `make deploy`"):
            smoke.resolve_endpoint(cfg, "test-proj")
        paths = [r["path"].split("?")[0] for r in tpu.requests]
    assert paths == [f"/v2alpha1/projects/test-proj/locations/us-west4-a/nodes/{cfg.node_id}"]
