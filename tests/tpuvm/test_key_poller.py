"""The TPU VM's per-client keys (issue 37) in the boot sandbox (tests/boot_sandbox.py): the boot
renders every client's key into the proxy's key map and starts the key poller; the poller picks
up a rotation, drops an expired previous key with no new version, keeps the map on a bad payload,
drops a revoked client, and HUPs nginx only on a change. The expected map lines are computed
here from the keys (secure_link's MD5 of "Bearer <key>"), not by tpudeploy/node/keymap.py."""

from __future__ import annotations

import base64
import datetime
import hashlib
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.boot_sandbox import HF_TOKEN, TLS, Node
from tpudeploy.config import DeployConfig, parse_config

# Built at run time (no tracked file holds a key-shaped string); 43 URL-safe characters each.
KEYS = {n: f"TEST{n}KeyNeverPrinted".ljust(43, n[0]) for n in ("ci1", "ci2", "dflt", "ci3")}


def _cfg(name: str = "gemma4-v5e") -> DeployConfig:
    return parse_config(
        {"project": "test-proj", "name": name, "access": {"clients": ["default", "ci"]}}
    )


def line(client: str, key: str) -> str:
    digest = hashlib.md5(f"Bearer {key}".encode(), usedforsecurity=False).digest()
    tag = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    return f'"{key[:11]}" "{client} {tag}";'


def entries(node: Node) -> list[str]:
    """The map's entries, without comments (keymap.py notes a previous key's time)."""
    text = (node.proxy_dir / "api_keys.conf").read_text()
    return [ln.split(";")[0] + ";" for ln in text.splitlines() if ln and not ln.startswith("#")]


def until(seconds: float) -> str:
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(tmp_path: Path, cfg: DeployConfig) -> Node:
    ids = cfg.client_key_secret_ids
    return Node(
        tmp_path,
        cfg,
        secrets={
            cfg.hf_token_secret_id: HF_TOKEN,
            ids["default"]: KEYS["dflt"],
            ids["ci"]: KEYS["ci1"],
            cfg.tls_secret_id: TLS.text,
        },
    )


def hups(node: Node, cfg: DeployConfig) -> int:
    return sum(
        1
        for c in node.docker("kill")
        if c["argv"] == ["kill", "--signal=HUP", cfg.proxy.container_name]
    )


@pytest.fixture
def booted(tmp_path: Path) -> tuple[Node, DeployConfig, Path]:
    cfg = _cfg()
    node = _node(tmp_path, cfg)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    node.assert_no_secret_leaked(boot)
    return node, cfg, node.run_dir / "keypoll.sh"


def test_the_boot_serves_every_clients_key_and_starts_the_poller(
    booted: tuple[Node, DeployConfig, Path],
) -> None:
    node, cfg, poller = booted
    assert entries(node) == [line("default", KEYS["dflt"]), line("ci", KEYS["ci1"])]
    (run,) = node.calls("systemd-run")
    assert f"--unit=tpudeploy-keypoll-{cfg.name}" in run["argv"]
    assert run["argv"][-2:] == ["/bin/bash", str(poller)]
    assert "--property=Restart=always" in run["argv"]
    # The poller's script lives on the tmpfs and holds ids, never a key.
    assert node.run_dir in poller.parents
    text = poller.read_text()
    assert cfg.client_key_secret_ids["ci"] in text
    assert all(k not in text for k in KEYS.values())


def test_the_poller_rotates_expires_keeps_and_revokes(
    booted: tuple[Node, DeployConfig, Path],
) -> None:
    node, cfg, poller = booted
    ci = cfg.client_key_secret_ids["ci"]
    secrets = node.config["secrets"]
    assert isinstance(secrets, dict)

    # Nothing changed: no reload.
    quiet = node.run(str(poller), TPUDEPLOY_KEY_POLL_ROUNDS="1")
    assert quiet.returncode == 0, quiet.stderr
    assert hups(node, cfg) == 0

    # make api-key CLIENT=ci ROTATE=1: the new key, and the old one for a few more seconds.
    secrets[ci] = f"{KEYS['ci2']}\n{KEYS['ci1']} {until(3)}"
    rotated = node.run(str(poller), TPUDEPLOY_KEY_POLL_ROUNDS="1")
    assert entries(node) == [
        line("default", KEYS["dflt"]),
        line("ci", KEYS["ci2"]),
        line("ci", KEYS["ci1"]),
    ]
    assert hups(node, cfg) == 1
    assert "key map changed: nginx reloaded; clients default ci" in rotated.stderr

    # The overlap ends: the old key drops at the next poll, with no new version.
    time.sleep(4)
    expired = node.run(str(poller), TPUDEPLOY_KEY_POLL_ROUNDS="1")
    assert entries(node) == [line("default", KEYS["dflt"]), line("ci", KEYS["ci2"])]
    assert hups(node, cfg) == 2

    # A payload the front door cannot serve keeps the previous map (and names the client).
    secrets[ci] = "not a key"
    bad = node.run(str(poller), TPUDEPLOY_KEY_POLL_ROUNDS="1")
    assert entries(node) == [line("default", KEYS["dflt"]), line("ci", KEYS["ci2"])]
    assert hups(node, cfg) == 2
    assert "client ci: line 1 is not a key" in bad.stderr and "stays as it was" in bad.stderr

    # The client removed from the config: its secret deleted by the apply (404), its key gone.
    del secrets[ci]
    revoked = node.run(str(poller), TPUDEPLOY_KEY_POLL_ROUNDS="1")
    assert entries(node) == [line("default", KEYS["dflt"])]
    assert hups(node, cfg) == 3
    assert "revoked, their secret gone or unreadable: ci" in revoked.stderr
    secrets[ci] = KEYS["ci1"]  # for the leak check's list of keys
    node.assert_no_secret_leaked(quiet, rotated, expired, bad, revoked)


def test_a_poll_that_cannot_reach_secret_manager_keeps_the_map(
    booted: tuple[Node, DeployConfig, Path],
) -> None:
    node, cfg, poller = booted
    before = entries(node)
    # Secret Manager out of reach (the stand-in curl refuses an unknown host: exit 7).
    poller.write_text(poller.read_text().replace("secretmanager.test", "unreachable.test"))
    failed = node.run(str(poller), TPUDEPLOY_KEY_POLL_ROUNDS="1")
    assert entries(node) == before and hups(node, cfg) == 0
    assert "could not read the clients' keys" in failed.stderr


def test_propagation_is_one_poll_period_plus_a_fetch(tmp_path: Path) -> None:
    """The poller as it runs on the node (a loop with a real sleep), one second apart here: a
    rotation reaches the map within a period plus a fetch. On the node the period is 30 s
    (tpudeploy/render.py KEY_POLL_SECONDS), so within about 31 s: under issue 37's minute."""
    cfg = _cfg()
    node = _node(tmp_path, cfg)
    # The period is the boot's (the poller's script keeps the value it was written with).
    assert node.run(TPUDEPLOY_KEY_POLL_SECONDS="1").returncode == 0
    poller = node.run_dir / "keypoll.sh"
    real = tmp_path / "real-sleep"
    real.mkdir()
    sleep = shutil.which("sleep")
    assert sleep is not None
    (real / "sleep").symlink_to(sleep)
    env = node.environment(TPUDEPLOY_KEY_POLL_ROUNDS="20")
    env["PATH"] = f"{real}:{env['PATH']}"
    proc = subprocess.Popen(
        ["bash", str(poller)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(1.5)
        secrets = node.config["secrets"]
        assert isinstance(secrets, dict)
        secrets[cfg.client_key_secret_ids["ci"]] = KEYS["ci3"]
        node.environment()  # writes the fake Secret Manager's new version
        start = time.monotonic()
        while line("ci", KEYS["ci3"]) not in entries(node):
            assert time.monotonic() - start < 10, "the rotation never reached the map"
            time.sleep(0.05)
        took = time.monotonic() - start
        # The poller writes the map, then signals nginx: the HUP follows the map by a moment.
        while hups(node, cfg) == 0 and time.monotonic() - start < 10:
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    print(f"key propagation in the sandbox: {took:.2f} s with a 1 s poll period")
    assert took < 1 + 2.0  # a period plus a fetch round (the stand-ins' curl, python3)
    assert hups(node, cfg) == 1


def test_two_deployments_read_their_own_clients_secrets(tmp_path: Path) -> None:
    a, b = _cfg("team-a"), _cfg("team-b")
    node = _node(tmp_path / "a", a)
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    read = {
        c["url"].split("/secrets/")[1].split("/")[0]
        for c in node.calls("curl")
        if "/secrets/" in (c.get("url") or "")
    }
    assert set(a.client_key_secret_ids.values()) <= read
    assert read.isdisjoint(b.client_key_secret_ids.values())
    (run,) = node.calls("systemd-run")
    assert "--unit=tpudeploy-keypoll-team-a" in run["argv"]
