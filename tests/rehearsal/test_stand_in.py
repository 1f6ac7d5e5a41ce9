"""The stand-in server answers a call exactly as the stand-in run as its own process does.

tests/stubs/* are stand_in.sh: with STAND_IN_PORT (tests/boot_sandbox.py) a call goes to the
long-lived stand_in_server.py, without it to `python3 stand_in.py` of its own. The boot-script
tests rely on the first being the second, only cheaper.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.boot_sandbox import ACCESS_TOKEN, STUBS, stand_in_port

# Each call: (command, argv, stdin). Together they cover stdout (text and a body), stderr, exit
# codes, stdin read by `curl -K -`, a relative output path, and a command with no behaviour.
CALLS: list[tuple[str, list[str], str]] = [
    (
        "curl",
        [
            "-sS",
            "-H",
            "Metadata-Flavor: Google",
            "-w",
            "\\n%{http_code}",
            "--max-time",
            "5",
            "http://metadata.test/computeMetadata/v1/project/project-id",
        ],
        "",
    ),
    (
        "curl",
        [
            "-fsS",
            "-K",
            "-",
            "-o",
            "relative/secret.json",
            "--max-time",
            "5",
            "http://secretmanager.test/v1/projects/test-proj/secrets/s/versions/latest:access",
        ],
        f'header = "Authorization: Bearer {ACCESS_TOKEN}"\n',
    ),
    ("curl", ["-fsS", "--max-time", "5", "http://storage.test/bucket/missing"], ""),
    ("docker", ["ps", "--quiet", "--filter", "name=^/vllm$", "--filter", "status=running"], ""),
    ("docker", ["image", "inspect", "vllm/vllm-tpu:nightly"], ""),
    ("sleep", ["1"], ""),
    ("gcloud", ["compute", "instances", "list"], ""),
    # The node's own commands (issue 22): a rule inserted then checked, a tmpfs mounted then
    # asked for, each through the state the calls share.
    ("iptables", ["-w", "-I", "OUTPUT", "--destination", "169.254.169.254", "-j", "REJECT"], ""),
    ("iptables", ["-w", "-C", "OUTPUT", "--destination", "169.254.169.254", "-j", "REJECT"], ""),
    ("mountpoint", ["-q", "/run/x"], ""),
    ("mount", ["-t", "tmpfs", "-o", "size=1g,mode=0700", "x", "/run/x"], ""),
    ("mountpoint", ["-q", "/run/x"], ""),
    ("systemctl", ["reload", "ssh.service"], ""),
]


def _run_all(root: Path, port: str | None) -> tuple[list[Any], list[dict[str, Any]]]:
    stub = root / "stub"
    stub.mkdir(parents=True)
    (stub / "config.json").write_text(
        json.dumps({"access_token": ACCESS_TOKEN, "secrets": {"s": "v"}, "project": "test-proj"})
    )
    (root / "relative").mkdir()
    python = root / "bin"
    python.mkdir()
    (python / "python3").symlink_to(os.path.realpath(sys.executable))
    env = {"PATH": f"{STUBS}:{python}:/usr/bin:/bin", "STUB_DIR": str(stub)}
    if port:
        env["STAND_IN_PORT"] = port
    results: list[Any] = []
    for cmd, argv, stdin in CALLS:
        done = subprocess.run(
            [cmd, *argv],
            cwd=root,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        results.append((done.returncode, done.stdout, done.stderr))
    results.append((root / "relative" / "secret.json").read_text())
    records = [json.loads(line) for line in (stub / "calls.jsonl").read_text().splitlines()]
    for record in records:
        # The server records the environment the command was given (/proc/PID/environ); the
        # process of its own records it after bash (PWD, SHLVL) and Python's locale coercion
        # (LC_CTYPE) added theirs. Besides those, the server adds the variable naming its port.
        added = {"STAND_IN_PORT", "PWD", "SHLVL", "LC_CTYPE", "_"}
        record["env_names"] = [n for n in record["env_names"] if n not in added]
    return results, records


def test_the_server_answers_like_the_stand_in_process(tmp_path: Path) -> None:
    served, served_records = _run_all(tmp_path / "served", stand_in_port())
    alone, alone_records = _run_all(tmp_path / "alone", None)
    assert served == alone
    assert len(served_records) == len(CALLS)
    # The records name the same commands, argv and environment (STUB_DIR differs by path).
    for a, b in zip(served_records, alone_records, strict=True):
        assert (a["cmd"], a["argv"], a["env_names"]) == (b["cmd"], b["argv"], b["env_names"])
    # What the calls did, not only that they matched: the token reached the fake Secret Manager
    # through stdin (200, the payload written relative to the caller's directory), a storage
    # request without the token is curl's exit 22, and a command without behaviour fails loudly.
    assert served[0] == (0, "test-proj\n200", "")
    assert served[1][0] == 0 and json.loads(served[-1])["payload"]["data"] == "dg=="
    assert served[2][0] == 22 and "401" in served[2][2]
    assert served[4][0] == 1 and "No such image" in served[4][2]
    assert served[6] == (1, "", "stand-in gcloud: not expected to be called\n")


def test_a_missing_server_is_an_error_not_a_silent_slow_path(tmp_path: Path) -> None:
    env = {"PATH": f"{STUBS}:/usr/bin:/bin", "STUB_DIR": str(tmp_path), "STAND_IN_PORT": "9"}
    done = subprocess.run(
        ["sleep", "1"], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 127
    assert "no stand-in server on 127.0.0.1:9" in done.stderr


# Every stub, listed from the folder: the node's system commands (issue 22) were once linked to
# stand_in.py itself, a new Python per call (~0.8 s of every boot).
@pytest.mark.parametrize("cmd", sorted(p.name for p in STUBS.iterdir()))
def test_every_stub_is_the_bash_client(cmd: str) -> None:
    assert (STUBS / cmd).resolve().name == "stand_in.sh"
