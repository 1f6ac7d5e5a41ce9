"""What a login on the node could take (issue 22), proven in the boot sandbox (boot_sandbox.py):
only root reaches the metadata server, vLLM's downloads live in a root-only tmpfs, a login that is
not root-equivalent forwards the API port and nothing else, and every hostile compile-cache archive
ends in a cold boot within the restore's time bound."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.boot_sandbox import ACCESS_TOKEN, PROJECT, STUBS, Node
from tests.hostile_archives import HOSTILE
from tpudeploy import facts
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.render import hf_tmpfs_size

LOGIN_UID = "1000"
TOKEN_PATH = "computeMetadata/v1/instance/service-accounts/default/token"  # noqa: S105 - a path


@pytest.fixture(scope="module")
def cfg() -> DeployConfig:
    return parse_config({"project": PROJECT})


@pytest.fixture(scope="module")
def booted(tmp_path_factory: pytest.TempPathFactory, cfg: DeployConfig) -> Node:
    """One node booted twice (the guest agent reruns the script): the checks below only read it."""
    node = Node(tmp_path_factory.mktemp("booted"), cfg)
    for _ in range(2):
        boot = node.run()
        assert boot.returncode == 0, boot.stderr
    return node


def ask_for_token(node: Node, host: str, uid: str) -> subprocess.CompletedProcess[str]:
    """A process on the node, running as `uid`, asks the metadata server for the token."""
    env = {
        "PATH": f"{STUBS}:{node.bin}:{os.environ['PATH']}",
        "STUB_DIR": str(node.stub_dir),
        "STUB_UID": uid,
    }
    return subprocess.run(
        ["curl", "-sS", "-H", "Metadata-Flavor: Google", f"http://{host}/{TOKEN_PATH}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def rules(node: Node) -> dict[str, list[list[str]]]:
    state = json.loads((node.stub_dir / "state.json").read_text())
    found: dict[str, list[list[str]]] = state.get("iptables", {})
    return found


# --- the metadata server ----------------------------------------------------------------------


def test_only_root_reaches_the_metadata_server_from_the_first_step(booted: Node) -> None:
    """Issue 22, item 1: any process on the node, a `make tunnel` login included, could ask the
    metadata server for the node account's token."""
    node = booted
    for host in ("metadata.test", "169.254.169.254", "[fd20:ce::254]"):
        login = ask_for_token(node, host, LOGIN_UID)
        assert login.returncode == 7, (host, login.stdout)  # connection refused
        assert ACCESS_TOKEN not in login.stdout
        root = ask_for_token(node, host, "0")
        assert root.returncode == 0 and ACCESS_TOKEN in root.stdout
    # Before anything else: the rules are the boot's first commands, ahead of every request to
    # the metadata server (its first is clearing the last boot's failure reason).
    calls = node.calls()
    assert [c["cmd"] for c in calls[:4]] == ["iptables", "iptables", "ip6tables", "ip6tables"]
    first_metadata = next(i for i, c in enumerate(calls) if c["cmd"] == "curl")
    assert first_metadata > 3
    # DNS stays open to every process: the metadata server is also the VM's resolver.
    (v4,) = rules(node)["iptables"]
    assert v4[v4.index("--dport") - 1 : v4.index("--dport") + 2] == [
        "!",
        "--dport",
        str(facts.METADATA_SERVER_DNS_PORT),
    ]


def test_the_metadata_rules_are_added_once_over_two_boots(booted: Node) -> None:
    node = booted
    found = rules(node)
    assert {family: len(r) for family, r in found.items()} == {"iptables": 1, "ip6tables": 1}
    inserts = [c for c in node.calls() if c["cmd"].endswith("tables") and "-I" in c["argv"]]
    assert len(inserts) == 2  # the second boot found both rules with -C


def test_without_a_packet_filter_the_boot_fails_closed(tmp_path: Path, cfg: DeployConfig) -> None:
    """No rule, no vLLM: a node that would hand its token to every login never serves."""
    node = Node(tmp_path, cfg)
    stubs = tmp_path / "stubs-without-iptables"
    stubs.mkdir()
    for stub in STUBS.iterdir():
        if stub.name != "iptables":
            (stubs / stub.name).symlink_to(stub.resolve())
    boot = node.run(PATH=f"{stubs}:{node.bin}:/usr/bin:/bin")
    assert boot.returncode == 1
    assert node.phases() == ["failed"]
    assert "iptables is missing" in node.reasons()[-1]
    assert node.docker("run") == [] and node.calls("sshd") == []


# --- HF_HOME ----------------------------------------------------------------------------------


def test_vllm_downloads_into_a_root_only_tmpfs_not_the_hosts_dev_shm(
    booted: Node, cfg: DeployConfig
) -> None:
    """Issue 22, item 1: HF_HOME was the host's world-writable /dev/shm, which any login could
    read or pre-seed with what vLLM then loads."""
    node = booted
    # The second boot on the same VM found the tmpfs mounted and kept it: one mount.
    (mount,) = node.calls("mount")
    options = mount["argv"][3].split(",")
    assert {"mode=0700", "uid=0", "nosuid", "nodev", f"size={hf_tmpfs_size()}"} <= set(options)
    assert mount["argv"][-1] == str(node.hf_dir)
    # The build log's checkpoint (9.54 GiB) fits, with room to spare, in whole GiB.
    size = int(hf_tmpfs_size().removesuffix("g")) * facts.GIB
    assert facts.CHECKPOINT_BYTES < size < 2 * facts.CHECKPOINT_BYTES
    run = node.docker_runs()[cfg.vllm.container_name]
    mounts = dict(map(tuple, run["mounts"]))
    assert "/dev/shm" not in mounts.values()  # noqa: S108 - the host's, which it must not mount
    assert mounts[str(node.hf_dir)] == run["env"]["HF_HOME"]
    assert oct(node.hf_dir.stat().st_mode & 0o777) == "0o700"
    # The container keeps the seed's --shm-size for a /dev/shm of its own.
    argv = node.docker("run")[0]["argv"]
    assert argv[argv.index("--shm-size") + 1] == cfg.vllm.shm_size


# --- logins -----------------------------------------------------------------------------------


def drop_in(node: Node) -> list[str]:
    path = node.sshd_config.parent / "sshd_config.d" / "10-tpudeploy-tunnel.conf"
    return [line.strip() for line in path.read_text().splitlines() if not line.startswith("#")]


def test_a_login_may_forward_the_api_port_and_nothing_else(booted: Node, cfg: DeployConfig) -> None:
    """Issue 22, item 1: a `make tunnel` login was a full shell on the node."""
    node = booted
    lines = drop_in(node)
    port = cfg.proxy.port
    assert lines[0] == "Match User *,!root" and lines[-1] == "Match all"
    for setting in (
        "AllowTcpForwarding local",
        f"PermitOpen localhost:{port} 127.0.0.1:{port}",
        "AllowStreamLocalForwarding no",
        "AllowAgentForwarding no",
        "X11Forwarding no",
        "PermitTunnel no",
        "PermitUserRC no",
        f"ForceCommand {node.login_gate}",
    ):
        assert setting in lines
    checks = node.calls("sshd")
    assert [c["argv"] for c in checks] == [["-t", "-f", str(node.sshd_config)]] * 2
    assert node.calls("systemctl")[0]["argv"] == ["reload", "ssh.service"]


def run_gate(node: Node, tmp_path: Path, *, sudoer: bool, command: str) -> Any:
    """The login gate as sshd runs it for a session, with a `sudo` that answers like OS Login's
    sudoers for an osAdminLogin (sudoer) or osLogin user."""
    fake = tmp_path / "sudo-bin"
    fake.mkdir(exist_ok=True)
    sudo = fake / "sudo"
    sudo.write_text(f"#!/bin/sh\nexit {0 if sudoer else 1}\n")
    sudo.chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "SHELL": "/bin/bash", "SSH_ORIGINAL_COMMAND": command}
    return subprocess.run(
        [str(node.login_gate)], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_only_a_login_that_is_already_root_equivalent_gets_a_session(
    booted: Node, tmp_path: Path
) -> None:
    node = booted
    refused = run_gate(node, tmp_path, sudoer=False, command="echo shell")
    assert refused.returncode == 1 and "shell" not in refused.stdout
    assert "make tunnel" in refused.stderr
    admitted = run_gate(node, tmp_path, sudoer=True, command="echo shell")
    assert (admitted.returncode, admitted.stdout) == (0, "shell\n")


def test_a_login_restriction_sshd_refuses_fails_the_boot_and_is_removed(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    node = Node(tmp_path, cfg, sshd_error="line 3: Bad configuration option: PermitOpen")
    boot = node.run()
    assert boot.returncode == 1
    assert "sshd refused the login restrictions" in node.reasons()[-1]
    assert not (node.sshd_config.parent / "sshd_config.d" / "10-tpudeploy-tunnel.conf").exists()
    assert node.docker("run") == []


# --- hostile compile-cache archives -----------------------------------------------------------


def cold_boot(node: Node) -> None:
    files = sorted(p.relative_to(node.cache_dir).as_posix() for p in node.cache_dir.rglob("*"))
    assert files == ["xla_cache", "xla_cache/jit_decode-cache", "xla_cache/jit_prefill-cache"]
    assert node.phases()[-1] == "ready"


@pytest.mark.parametrize("kind", ["negative-size", "huge-pax-header", "many-members"])
def test_each_hostile_archive_of_the_issue_ends_in_a_cold_boot(
    tmp_path: Path, cfg: DeployConfig, kind: str
) -> None:
    """Issue 22, item 3: a 91-byte archive hung the boot at restoring-cache forever."""
    make, why = HOSTILE[kind]
    node = Node(tmp_path, cfg)
    node.seed_bucket({}).write_bytes(make())
    boot = node.run()
    assert boot.returncode == 0, boot.stderr
    assert why in boot.stderr and "booting cold" in boot.stderr
    cold_boot(node)


def test_a_restore_that_outlives_its_time_limit_means_a_cold_boot(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    """Whatever makes python3 hang (an unpatched tarfile, a slow disk), the boot goes on."""
    node = Node(tmp_path, cfg)
    node.seed_bucket({"xla_cache/jit_decode-cache": b"z" * 8})
    # A python3 that hangs when it runs the guard (`python3 - ARCHIVE DEST`), and is the real
    # interpreter otherwise.
    real = os.path.realpath(node.bin / "python3")
    (node.bin / "python3").unlink()
    (node.bin / "python3").write_text(
        f'#!/bin/bash\n[[ $1 == - && $# == 3 ]] && exec /bin/sleep 600\nexec {real} "$@"\n'
    )
    (node.bin / "python3").chmod(0o755)
    started = time.monotonic()
    boot = node.run(TPUDEPLOY_RESTORE_TIMEOUT="1")
    assert boot.returncode == 0, boot.stderr
    assert "took longer than 1s" in boot.stderr
    assert time.monotonic() - started < 60
    cold_boot(node)


def test_a_hard_linked_cache_is_saved_as_files_the_next_boot_restores(
    tmp_path: Path, cfg: DeployConfig
) -> None:
    """Issue 22, item 3: the packer stored hard links, which every later restore refused."""
    first = Node(tmp_path / "first", cfg, compile_hardlink=True)
    assert first.run().returncode == 0
    saved = first.cache_object()
    assert saved.exists()
    second = Node(tmp_path / "second", cfg, compiles=["jit_other"])
    second.seed_bucket({})
    second.cache_object().write_bytes(saved.read_bytes())
    boot = second.run()
    assert boot.returncode == 0, boot.stderr
    assert "compile cache restored" in boot.stderr
    linked = second.cache_dir / "xla_cache" / "jit_decode-cache.link"
    assert linked.read_bytes() == (second.cache_dir / "xla_cache" / "jit_decode-cache").read_bytes()
