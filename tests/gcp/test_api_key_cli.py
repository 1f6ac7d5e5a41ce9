"""`make api-key CLIENT=x [ROTATE=1] [OVERLAP=..] [SHOW=1]` against the rehearsal's Secret
Manager fake (tools/rehearsal/fakes/secretmanager.py: versions list, access of a disabled
version refused, versions:disable): one secret per client, the first key, the refusal of a
second without ROTATE, the rotation payload and the old versions disabled (issue 37)."""

from __future__ import annotations

import datetime
import io
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.rehearsal.fakes.inventory import Inventory
from tools.rehearsal.fakes.secretmanager import FakeSecretManager
from tpudeploy import cli
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gcp.secretmanager import SecretStore, store_new_api_key
from tpudeploy.node import keymap

P = "test-proj"
CLIENTS = '[access]\nclients = ["planner", "coder"]\nrotation_overlap = "1h"\n'


def _cfg(name: str = "gemma4-v5e") -> DeployConfig:
    return parse_config(
        {
            "project": P,
            "name": name,
            "access": {"clients": ["planner", "coder"], "rotation_overlap": "1h"},
        }
    )


@pytest.fixture
def sm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeSecretManager]:
    inv = Inventory()
    inv.enable(P, "secretmanager.googleapis.com")
    with FakeSecretManager(inv) as fake:
        for sid in _cfg().client_key_secret_ids.values():
            body = json.dumps({"replication": {"automatic": {}}}).encode()
            req = urllib.request.Request(
                f"http://{fake.host}/v1/projects/{P}/secrets?secretId={sid}", data=body
            )
            req.add_header("Content-Type", "application/json")
            urllib.request.urlopen(req, timeout=10).close()  # noqa: S310 (loopback)
        (tmp_path / "deploy.toml").write_text(f'project = "{P}"\n{CLIENTS}')
        monkeypatch.setenv("DEPLOY_CONFIG", str(tmp_path / "deploy.toml"))
        monkeypatch.setenv("SECRETMANAGER_EMULATOR_HOST", fake.host)
        monkeypatch.chdir(tmp_path)
        yield fake


def _payloads(fake: FakeSecretManager, secret_id: str) -> list[str]:
    return [v.decode() for v in fake.values(P, secret_id)]


def _everything_sent(fake: FakeSecretManager) -> str:
    """Every request path (and query) the fake logged: the key travels in bodies only."""
    with fake.inventory.locked() as inv:
        return json.dumps([c.path for c in inv.calls])


def test_first_key_goes_to_the_clients_own_secret_and_is_not_printed(
    sm: FakeSecretManager, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cfg = _cfg()
    assert cli.main(["api-key", "--client", "coder"]) == 0
    (payload,) = _payloads(sm, "gemma4-v5e-api-key-coder")
    assert _payloads(sm, "gemma4-v5e-api-key-planner") == []
    key = payload.strip()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", key)
    out = capsys.readouterr()
    assert key not in out.out + out.err
    assert f"--secret={cfg.client_key_secret_ids['coder']} --project={P} | head -n1" in out.out
    assert key[:11] not in _everything_sent(sm)
    assert all(key not in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())


def test_client_defaults_to_the_first_and_an_unknown_one_is_refused_naming_the_clients(
    sm: FakeSecretManager, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["api-key"]) == 0
    assert len(_payloads(sm, "gemma4-v5e-api-key-planner")) == 1
    assert cli.main(["api-key", "--client", "ci"]) == 1
    err = capsys.readouterr().err
    assert "CLIENT=ci is not a client" in err and "['planner', 'coder']" in err
    assert "Traceback" not in err


def test_a_second_key_without_rotate_is_refused_and_says_both_ways(
    sm: FakeSecretManager, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["api-key", "--client", "planner"]) == 0
    capsys.readouterr()
    assert cli.main(["api-key", "--client", "planner"]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert "ROTATE=1` rotates it" in err and "ROTATE=1 OVERLAP=0` stops the old key now" in err
    assert captured.out == ""
    assert len(_payloads(sm, "gemma4-v5e-api-key-planner")) == 1


def test_rotation_carries_the_old_current_key_until_the_overlap_and_disables_old_versions(
    sm: FakeSecretManager, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _cfg()
    sid = cfg.client_key_secret_ids["planner"]
    store = SecretStore.from_env(P)
    t0 = datetime.datetime(2026, 12, 3, 6, 0, 0, tzinfo=datetime.UTC)
    io_out = io.StringIO()
    assert store_new_api_key(cfg, store, io_out, client="planner", now=t0) == 0
    first = _payloads(sm, sid)[0].strip()
    t1 = t0 + datetime.timedelta(minutes=10)
    assert store_new_api_key(cfg, store, io_out, client="planner", rotate=True, now=t1) == 0
    second = _payloads(sm, sid)[1]
    new, old_line = second.strip().split("\n")
    assert old_line == f"{first} 2026-12-03T07:10:00Z"  # now + the configured 1h
    # A second rotation keeps only the newest previous key: at most two per client.
    t2 = t1 + datetime.timedelta(minutes=5)
    assert (
        store_new_api_key(cfg, store, io_out, client="planner", rotate=True, overlap="30m", now=t2)
        == 0
    )
    third = _payloads(sm, sid)[2]
    assert third.strip().split("\n")[1] == f"{new} 2026-12-03T06:45:00Z"
    assert first not in third
    assert sm.states(P, sid) == ["DISABLED", "DISABLED", "ENABLED"]
    # What the front door serves from the latest version at each time (tpudeploy/node/keymap).
    served = keymap.served({"planner": store.access_latest(sid)}, t2)
    assert [k for _, k, _ in served] == [third.split("\n")[0], new]
    later = keymap.served({"planner": store.access_latest(sid)}, t2 + datetime.timedelta(hours=1))
    assert [k for _, k, _ in later] == [third.split("\n")[0]]
    said = io_out.getvalue()
    assert "until 2026-12-03 06:45:00 UTC" in said and "Disabled the earlier version(s) 2" in said
    for key in (first, new, third.split("\n")[0]):
        assert key not in said


def test_overlap_zero_stops_the_old_key_now_and_show_prints_the_new_one(
    sm: FakeSecretManager, capsys: pytest.CaptureFixture[str]
) -> None:
    sid = _cfg().client_key_secret_ids["coder"]
    assert cli.main(["api-key", "--client", "coder"]) == 0
    first = _payloads(sm, sid)[0].strip()
    capsys.readouterr()
    args = ["api-key", "--client", "coder", "--rotate", "1", "--overlap", "0", "--show", "1"]
    assert cli.main(args) == 0
    second = _payloads(sm, sid)[1]
    assert "\n" not in second and first not in second
    out = capsys.readouterr().out
    assert "stops now" in out and f"(SHOW=1): {second.strip()}" in out
    assert sm.states(P, sid) == ["DISABLED", "ENABLED"]


def test_a_disabled_version_cannot_be_read_any_more(sm: FakeSecretManager) -> None:
    """The fake's rule the rotation relies on: a disabled version's payload is refused."""
    sid = _cfg().client_key_secret_ids["coder"]
    store = SecretStore.from_env(P)
    store.add_version(sid, "a\n")
    store.add_version(sid, "b\n")
    store.disable(sid, "1")
    assert store.versions(sid) == [("2", "ENABLED"), ("1", "DISABLED")]
    with pytest.raises(Exception, match="HTTP 400"):
        store.access(sid, "1")
    assert store.access(sid, "2") == "b\n"
