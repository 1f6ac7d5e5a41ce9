"""The GKE pod's per-client keys (issue 37): the init script renders every client's key file
(the Secret Manager add-on's) into the key map; the key loop re-renders it from the refreshed
files; the front door's watcher reloads nginx when the map changed and only then. The expected
map lines are computed here from the keys (secure_link's MD5 of "Bearer <key>")."""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.boot_sandbox import TLS
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.gke import pod

CLIENTS = ["default", "planner", "ci"]
KEYS = {n: f"TEST{n}PodKeyNeverPrinted".ljust(43, "x") for n in ("a", "b", "c", "d")}


def _cfg(name: str = "gemma4-gke") -> DeployConfig:
    return parse_config(
        {"platform": "gke", "project": "test-proj", "name": name, "access": {"clients": CLIENTS}}
    )


def line(client: str, key: str) -> str:
    digest = hashlib.md5(f"Bearer {key}".encode(), usedforsecurity=False).digest()
    return f'"{key[:11]}" "{client} {base64.urlsafe_b64encode(digest).decode().rstrip("=")}";'


def entries(out: Path) -> list[str]:
    text = (out / "api_keys.conf").read_text()
    return [ln.split(";")[0] + ";" for ln in text.splitlines() if ln and not ln.startswith("#")]


def until(seconds: float) -> str:
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


class Pod:
    """The pod's scripts with their paths moved under `root` (as tests/gke/test_gke_frontdoor
    does): the add-on's files, the front door's memory volume, the ConfigMap."""

    def __init__(self, root: Path, cfg: DeployConfig, keys: dict[str, str]) -> None:
        self.cfg = cfg
        self.secrets, self.out, self.scripts = root / "secrets", root / "frontdoor", root / "sc"
        for d in (self.secrets, self.out, self.scripts):
            d.mkdir(parents=True)
        for client, payload in keys.items():
            self.put(client, payload)
        (self.secrets / pod.TLS_BUNDLE_FILE).write_text(TLS.text)
        for name, text in pod.scripts(cfg).items():
            text = text.replace(pod.SECRETS_DIR, str(self.secrets))
            text = text.replace(pod.FRONTDOOR_DIR, str(self.out))
            text = text.replace(pod.SCRIPTS_DIR, str(self.scripts))
            if name == pod.KEYS_SCRIPT:  # the loop's period, shortened for the test
                assert f"sleep {pod.KEY_LOOP_S} &" in text
                text = text.replace(f"sleep {pod.KEY_LOOP_S} &", "sleep 0.2 &")
            (self.scripts / name).write_text(text)

    def put(self, client: str, payload: str) -> None:
        """What the add-on's rotation does: the file rewritten in place."""
        (self.secrets / pod.client_key_file(client)).write_text(payload)

    def prep(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/bin/sh", str(self.scripts / pod.PREP_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def test_the_init_script_renders_every_clients_key_and_names_the_files(tmp_path: Path) -> None:
    cfg = _cfg()
    p = Pod(tmp_path, cfg, {"default": KEYS["a"], "planner": KEYS["b"], "ci": KEYS["c"] + "\n"})
    done = p.prep()
    assert done.returncode == 0, done.stderr
    assert entries(p.out) == [
        line("default", KEYS["a"]),
        line("planner", KEYS["b"]),
        line("ci", KEYS["c"]),
    ]
    # Ids and digests only: no key in any file the front door reads.
    for path in p.out.iterdir():
        text = path.read_text()
        assert all(k not in text for k in KEYS.values()), path
    # The add-on's file of each client, each its own secret.
    assert [f for _, f in pod.secret_files(cfg, "frontdoor")][:3] == [
        "api_key.default",
        "api_key.planner",
        "api_key.ci",
    ]


def test_an_empty_or_malformed_client_file_stops_the_pod_naming_the_client(
    tmp_path: Path,
) -> None:
    cfg = _cfg()
    empty = Pod(tmp_path / "e", cfg, {"default": KEYS["a"], "planner": "", "ci": KEYS["c"]})
    done = empty.prep()
    assert done.returncode == 1 and "make api-key CLIENT=planner" in done.stderr
    bad = Pod(tmp_path / "b", cfg, {"default": KEYS["a"], "planner": KEYS["b"], "ci": "abc"})
    done = bad.prep()
    assert done.returncode == 1
    assert "client ci: line 1 is not a key" in done.stderr and "abc" not in done.stderr
    assert not (bad.out / "api_keys.conf").exists()


def test_the_key_loop_follows_rotation_expiry_and_a_bad_payload(tmp_path: Path) -> None:
    cfg = _cfg()
    p = Pod(tmp_path, cfg, {"default": KEYS["a"], "planner": KEYS["b"], "ci": KEYS["c"]})
    assert p.prep().returncode == 0
    # The loop's stderr goes to a file the test can poll while the loop runs: a fixed sleep
    # missed the bad payload's line on a loaded machine.
    err_path = tmp_path / "loop.err"
    err_file = err_path.open("w")
    loop = subprocess.Popen(
        ["/bin/sh", str(p.scripts / pod.KEYS_SCRIPT)],
        stdout=subprocess.DEVNULL,
        stderr=err_file,
        text=True,
    )

    def wait_for(expected: list[str]) -> None:
        deadline = time.monotonic() + 30  # generous: a loaded machine, never a pass by waiting
        while entries(p.out) != expected:
            assert time.monotonic() < deadline, entries(p.out)
            time.sleep(0.05)

    try:
        # make api-key CLIENT=ci ROTATE=1, as the add-on's rotation writes it into the pod.
        p.put("ci", f"{KEYS['d']}\n{KEYS['c']} {until(2)}")
        rotated = [line("default", KEYS["a"]), line("planner", KEYS["b"])]
        wait_for([*rotated, line("ci", KEYS["d"]), line("ci", KEYS["c"])])
        # Readable by nginx's master whatever the container's umask (0444, as the init's files).
        assert (p.out / "api_keys.conf").stat().st_mode & 0o777 == 0o444
        # The overlap ends: the previous key drops with no new version.
        wait_for([*rotated, line("ci", KEYS["d"])])
        # A payload keymap.py refuses keeps the map.
        p.put("planner", "not a key")
        deadline = time.monotonic() + 30  # generous: a loaded machine, never a pass by waiting
        while "stays as it was" not in err_path.read_text():
            assert time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.05)
        assert entries(p.out) == [*rotated, line("ci", KEYS["d"])]
    finally:
        loop.terminate()
        loop.wait(timeout=5)
        err_file.close()
    err = err_path.read_text()
    assert loop.returncode == 0  # TERM ends the loop at once (the pod's shutdown)
    assert "key map changed: clients default planner ci" in err
    assert "client planner: line 1 is not a key" in err and "stays as it was" in err
    assert all(k not in err for k in KEYS.values())


def test_the_front_door_reloads_nginx_when_the_map_changes_and_only_then(
    tmp_path: Path,
) -> None:
    """The watcher beside nginx (pod.key_reload_watched): a stand-in nginx records its calls;
    the command exec'd after the watcher stands in for nginx's own foreground process.

    The test waits on the watcher's own checks (a cksum stand-in counts them), never on the
    clock: on a loaded machine a fixed sleep could end before the watcher's first look, and a
    map written in place could be seen half-written (empty, then full: two reloads). The map is
    replaced as keymap.write_if_changed replaces it (os.replace)."""
    map_file = tmp_path / "api_keys.conf"
    map_file.write_text("# 0 keys\n")
    calls = tmp_path / "calls"
    looks = tmp_path / "looks"
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nginx").write_text(f'#!/bin/sh\necho "$*" >>{calls}\n')
    real_cksum = shutil.which("cksum")
    assert real_cksum
    (fake / "cksum").write_text(f'#!/bin/sh\necho look >>{looks}\nexec {real_cksum} "$@"\n')
    for stand_in in fake.iterdir():
        stand_in.chmod(0o755)
    command = pod.key_reload_watched(["sleep", "300"])
    script, label, watched, period, *rest = command[2:]
    assert watched == f"{pod.FRONTDOOR_DIR}/api_keys.conf"
    assert int(period) == pod.KEY_RELOAD_CHECK_S
    assert rest[: rest.index("--")] == pod.nginx_signal("reload")
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}

    def looked() -> int:
        return len(looks.read_text().splitlines()) if looks.exists() else 0

    def wait_for_looks(count: int) -> None:
        deadline = time.monotonic() + 60  # generous: a loaded machine, never a pass by waiting
        while looked() < count:
            assert time.monotonic() < deadline, f"the watcher looked {looked()} times"
            time.sleep(0.05)

    proc = subprocess.Popen(
        ["/bin/sh", "-c", script, label, str(map_file), "0.1", *rest],
        env=env,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the watcher runs in the background: end its group with it
    )
    try:
        wait_for_looks(4)  # its first look, then three with nothing changed
        assert not calls.exists()  # nothing changed: no reload
        staged = tmp_path / "api_keys.conf.new"
        staged.write_text("# 1 key\n")
        os.replace(staged, map_file)
        seen = looked()
        wait_for_looks(seen + 4)  # the change is seen within one look; three more unchanged
        said = calls.read_text().splitlines() if calls.exists() else []
        assert said == [" ".join(pod.nginx_signal("reload")[1:])]  # once, for one change
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_worst_case_propagation_is_within_a_minute() -> None:
    """The add-on's rotation interval, the key loop's period and the watcher's: what a rotated
    key may take to reach a running pod (issue 37: within a minute)."""
    assert pod.key_propagation_worst_s() <= 60
