#!/usr/bin/env -S python3 -S
"""Stand-in for docker, curl, gcloud and sleep when a rendered boot script runs under tests.

Invoked through symlinks named after the command. Each call appends one JSON line to
$STUB_DIR/calls.jsonl: the command, its argv, and the name and sha256 of every environment
variable (never a value), so a test can prove no secret reached a command or its environment.
Scripted answers come from $STUB_DIR/config.json (written by the test) and mutable state lives in
$STUB_DIR/state.json.

With `serve` in config.json (the rehearsal), `docker run` starts each container's program as a
real process on this machine: the vLLM container's `vllm serve ...` through serve.vllm (a fake
engine), the proxy container's nginx as the real nginx (serve.nginx) on the rendered config,
listening on loopback only. A container's paths and `-e` values are mapped to the host paths
mounted there; `docker ps` and `docker rm` then look at and stop that process.
"""

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

# Stands in for what `docker image inspect` reports as the pulled manifest's digest.
DEFAULT_DIGEST = "5" * 64
METADATA = "http://metadata.test/computeMetadata/v1"
SECRETMANAGER = "http://secretmanager.test/v1"
STORAGE = "http://storage.test"


def load(name: str, default: Any) -> Any:
    path = STUB_DIR / name
    return json.loads(path.read_text()) if path.exists() else default


# Set by main() for each call: one process answers many calls when stand_in_server.py runs it.
STUB_DIR = Path()
CONFIG: dict[str, Any] = {}
STATE: dict[str, Any] = {}


def save_state() -> None:
    (STUB_DIR / "state.json").write_text(json.dumps(STATE))


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def record(cmd: str, extra: dict[str, Any] | None = None) -> None:
    entry = {
        "cmd": cmd,
        "argv": sys.argv[1:],
        "env_names": sorted(os.environ),
        "env_sha256": {name: sha256(value) for name, value in os.environ.items()},
    }
    entry.update(extra or {})
    with open(STUB_DIR / "calls.jsonl", "a") as fh:
        fh.write(json.dumps(entry) + "\n")


# ---- docker


def run_options(args: list[str]) -> dict[str, Any]:
    """Name, image, mounts and -e values of `docker run ARGS` (the flags the scripts use)."""
    with_value = {
        "--name",
        "-v",
        "-e",
        "--shm-size",
        "--tmpfs",
        "--cap-add",
        "--cap-drop",
        "--security-opt",
        "--entrypoint",
        "--user",
    }
    opts: dict[str, Any] = {
        "name": None,
        "mounts": [],
        "env": {},
        "image": None,
        "entrypoint": None,
        "command": [],
    }
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in with_value:
            value = args[i + 1]
            if arg == "--name":
                opts["name"] = value
            elif arg == "-v":
                src, dst = value.split(":")[:2]
                opts["mounts"].append((src, dst))
            elif arg == "-e":
                key, _, val = value.partition("=")
                opts["env"][key] = val
            elif arg == "--entrypoint":
                opts["entrypoint"] = value
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            opts["image"] = arg
            opts["command"] = args[i + 1 :]
            break
    return opts


# ---- serving containers for real (the rehearsal)


def host_path(value: str, mounts: list[tuple[str, str]]) -> str:
    """A path inside the container -> the host path mounted there (unchanged otherwise)."""
    for src, dst in mounts:
        if value == dst or value.startswith(dst.rstrip("/") + "/"):
            return src + value[len(dst.rstrip("/")) :]
    return value


def alive(name: str) -> bool:
    pid = STATE.get("pids", {}).get(name)
    if pid is None:
        return True  # not a served container: the scripted state decides
    stat = Path(f"/proc/{pid}/stat")
    # Gone, or a zombie nobody reaped: either way not running.
    return stat.exists() and not stat.read_text().rsplit(") ", 1)[-1].startswith("Z")


def stop(name: str) -> None:
    pid = STATE.get("pids", {}).pop(name, None)
    if pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGTERM)


def serve(opts: dict[str, Any], vllm: bool) -> None:
    """Start the container's program: the fake engine, or nginx bound to loopback."""
    mounts = opts["mounts"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update({key: host_path(value, mounts) for key, value in opts["env"].items()})
    if vllm:
        argv = [*CONFIG["serve"]["vllm"], *opts["command"]]
    else:
        argv = [CONFIG["serve"]["nginx"], *[host_path(a, mounts) for a in opts["command"]]]
        conf = Path(argv[argv.index("-c") + 1])
        # The node's proxy listens on every address; here, on loopback only.
        local = conf.with_name("nginx.loopback.conf")
        text = re.sub(
            r"^( *)listen (\d+) ssl;", r"\1listen 127.0.0.1:\2 ssl;", conf.read_text(), flags=re.M
        )
        local.write_text(text)
        argv[argv.index("-c") + 1] = str(local)
        prefix = STUB_DIR / f"{opts['name']}-tmp"
        prefix.mkdir(exist_ok=True)
        argv[argv.index("-p") + 1] = f"{prefix}/"
    with open(STUB_DIR / f"{opts['name']}.log", "ab") as log:
        proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    STATE.setdefault("pids", {})[opts["name"]] = proc.pid


def docker(args: list[str]) -> int:
    sub = args[0]
    containers = STATE.setdefault("containers", {})
    if sub == "run":
        opts = run_options(args[1:])
        files = {
            dst: sha256(Path(src).read_bytes())
            for src, dst in opts["mounts"]
            if Path(src).is_file()
        }
        record("docker", {"run": {**opts, "file_sha256": files}})
    else:
        record("docker")
    if sub == "ps":
        name = next(a for a in args if a.startswith("name=")).removeprefix("name=^/").rstrip("$")
        if containers.get(name) == "running" and alive(name):
            print("3f2a1b0c9d8e")
        return 0
    if sub == "pull":
        STATE["pulls"] = STATE.get("pulls", 0) + 1
        save_state()
        if STATE["pulls"] <= CONFIG.get("pull_failures", 0):
            print("Error response from daemon: net/http: TLS handshake timeout", file=sys.stderr)
            return 1
        STATE.setdefault("images", []).append(args[-1])
        save_state()
        return 0
    if sub == "image" and args[1] == "inspect":
        image = args[-1]
        if image not in STATE.get("images", []):
            print(f"Error: No such image: {image}", file=sys.stderr)
            return 1
        repo = image.rsplit(":", 1)[0] if "/" not in image.rsplit(":", 1)[-1] else image
        digest = CONFIG.get("digests", {}).get(image, DEFAULT_DIGEST)
        print(json.dumps([{"RepoTags": [image], "RepoDigests": [f"{repo}@sha256:{digest}"]}]))
        return 0
    if sub == "rm":
        name = args[-1]
        if containers.get(name):
            STATE["removed"] = STATE.get("removed", 0) + 1
            containers.pop(name)
            stop(name)
            save_state()
            return 0
        return 1
    if sub == "run":
        name = opts["name"]
        if containers.get(name):
            print("Conflict. The container name is already in use", file=sys.stderr)
            return 125
        is_vllm = any(dst == "/root/.cache/vllm" for _, dst in opts["mounts"])
        containers[name] = CONFIG.get("container_after_run", "running") if is_vllm else "running"
        if CONFIG.get("serve"):
            serve(opts, is_vllm)
        if not is_vllm and CONFIG.get("compile_on_proxy_start") and STATE.get("cache_dir"):
            # A first request through the proxy makes vLLM compile one more program.
            late = Path(STATE["cache_dir"]) / "xla_cache" / CONFIG["compile_on_proxy_start"]
            late.write_bytes(b"t" * 16)
        save_state()
        # The engine compiles into the mounted cache, like the real one (xla_cache/).
        for src, dst in opts["mounts"]:
            if dst == "/root/.cache/vllm":
                STATE["cache_dir"] = src
                save_state()
                host = Path(src) / "xla_cache"
                host.mkdir(parents=True, exist_ok=True)
                for name in CONFIG.get("compiles", ["jit_decode-cache", "jit_prefill-cache"]):
                    (host / name).write_bytes(b"x" * 64)
                if CONFIG.get("compile_symlink"):
                    (host / "escape").symlink_to("/etc/passwd")
        print("3f2a1b0c9d8e")
        return 0
    print(f"stand-in docker: unexpected command {sub}", file=sys.stderr)
    return 2


# ---- curl


def parse_curl(args: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "headers": [],
        "method": None,
        "data": None,
        "out": None,
        "write": None,
        "upload": None,
        "fail": False,
        "config": [],
        "url": None,
    }
    flags_with_value = {"--retry", "--max-time", "-m", "--connect-timeout", "--cacert"}
    it = iter(args)
    for arg in it:
        if arg == "-H":
            opts["headers"].append(next(it))
        elif arg == "-X":
            opts["method"] = next(it)
        elif arg == "--data-binary":
            opts["data"] = next(it)
        elif arg == "-o":
            opts["out"] = next(it)
        elif arg == "-w":
            opts["write"] = next(it)
        elif arg in ("--upload-file", "-T"):
            opts["upload"] = next(it)
        elif arg == "-K":
            opts["config"].append(next(it))
        elif arg in flags_with_value:
            next(it)
        elif arg.startswith("http://") or arg.startswith("https://"):
            opts["url"] = arg
        elif arg.startswith("-") and not arg.startswith("--"):
            if "f" in arg[1:]:
                opts["fail"] = True
        elif arg.startswith("--"):
            pass
    for cfg in opts["config"]:
        text = sys.stdin.read() if cfg == "-" else Path(cfg).read_text()
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "header":
                opts["headers"].append(value.strip().strip('"'))
    return opts


def bearer_ok(opts: dict[str, Any]) -> bool:
    return f"Authorization: Bearer {CONFIG['access_token']}" in opts["headers"]


def curl_answer(opts: dict[str, Any]) -> tuple[int, bytes]:
    """(status, body bytes) for one request; status 0 means connection refused."""
    url, method = opts["url"], opts["method"] or ("PUT" if opts["upload"] else "GET")
    if url.startswith(METADATA):
        if "Metadata-Flavor: Google" not in opts["headers"]:
            return 403, b"Missing Metadata-Flavor:Google header."
        path = url[len(METADATA) + 1 :]
        if path == "instance/service-accounts/default/token":
            body = {
                "access_token": CONFIG["access_token"],
                "expires_in": 3599,
                "token_type": "Bearer",
            }
            return 200, json.dumps(body).encode()
        if path == "project/project-id":
            return 200, CONFIG.get("project", "test-proj").encode()
        if path == "instance/network-interfaces/0/ip":
            return 200, CONFIG.get("internal_ip", "10.182.0.2").encode()
        if path == "instance/network-interfaces/0/access-configs/0/external-ip":
            if CONFIG.get("external_ip"):
                return 200, CONFIG["external_ip"].encode()
            return 404, b"not found"
        if path.startswith("instance/guest-attributes/") and method == "PUT":
            with open(STUB_DIR / "guest_attributes.jsonl", "a") as fh:
                key = path.removeprefix("instance/guest-attributes/")
                fh.write(json.dumps({"key": key, "value": opts["data"]}) + "\n")
            return 200, b""
        return 404, b"not found"
    if url.startswith(SECRETMANAGER):
        if not bearer_ok(opts):
            return 401, b'{"error": {"code": 401}}'
        name = url[len(SECRETMANAGER) + 1 :]
        project = CONFIG.get("project", "test-proj")
        for secret_id, value in CONFIG.get("secrets", {}).items():
            if name == f"projects/{project}/secrets/{secret_id}/versions/latest:access":
                import base64

                data = base64.b64encode(value.encode()).decode()
                return 200, json.dumps({"name": name, "payload": {"data": data}}).encode()
        return 404, b'{"error": {"code": 404, "status": "NOT_FOUND"}}'
    if url.startswith(STORAGE):
        if not bearer_ok(opts):
            return 401, b"<Error><Code>AuthenticationRequired</Code></Error>"
        target = STUB_DIR / "gcs" / url[len(STORAGE) + 1 :]
        forced = CONFIG.get("storage_put_status" if method == "PUT" else "storage_get_status")
        if forced:
            return forced, b"<Error><Code>ServiceUnavailable</Code></Error>"
        if method == "PUT":
            if target.exists():
                # Create-only: the precondition fails first; without it, objectCreator has no
                # storage.objects.delete, which replacing an object needs.
                if "x-goog-if-generation-match: 0" in opts["headers"]:
                    return 412, b"<Error><Code>PreconditionFailed</Code></Error>"
                return 403, b"<Error><Code>AccessDenied</Code></Error>"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(Path(opts["upload"]).read_bytes())
            return 200, b""
        if target.exists():
            return 200, target.read_bytes()
        return 404, b"<Error><Code>NoSuchKey</Code></Error>"
    if url.startswith("http://127.0.0.1:") and url.endswith("/health"):
        # vLLM on loopback: scripted answers, one per poll (the last one sticks).
        codes = CONFIG.get("health", [200])
        i = STATE.get("health_polls", 0)
        STATE["health_polls"] = i + 1
        save_state()
        return int(codes[min(i, len(codes) - 1)]), b""
    if url.startswith("https://127.0.0.1:"):
        # The TLS proxy: /health passes through, every other path needs the key.
        if (
            STATE.get("containers", {}).get(CONFIG.get("proxy_name", "tpudeploy-proxy"))
            != "running"
        ):
            return 0, b""
        if url.endswith("/health"):
            return int(CONFIG.get("proxy_health", 200)), b""
        return int(CONFIG.get("proxy_without_key", 401)), b""
    return 0, b""


def curl(args: list[str]) -> int:
    opts = parse_curl(args)
    status, body = curl_answer(opts)
    record("curl", {"url": opts["url"], "status": status})
    write = (opts["write"] or "").replace("\\n", "\n").replace("%{http_code}", f"{status:03d}")
    if status == 0:
        sys.stdout.write(write)
        print("curl: (7) Failed to connect", file=sys.stderr)
        return 7
    if opts["fail"] and status >= 400:
        print(f"curl: (22) The requested URL returned error: {status}", file=sys.stderr)
        return 22
    if opts["out"]:
        Path(opts["out"]).write_bytes(body)
    else:
        sys.stdout.buffer.write(body)
    sys.stdout.write(write)
    return 0


def main() -> int:
    """One call: sys.argv is [command, args...], os.environ and the working directory its own."""
    global STUB_DIR, CONFIG, STATE
    STUB_DIR = Path(os.environ["STUB_DIR"])
    CONFIG = load("config.json", {})
    STATE = load("state.json", {})
    cmd = Path(sys.argv[0]).name
    args = sys.argv[1:]
    if cmd == "docker":
        return docker(args)
    if cmd == "curl":
        return curl(args)
    record(cmd)
    if cmd == "sleep":
        return 0
    if cmd == "gcloud" and "gcloud_status" in CONFIG:
        # `make tunnel`'s IAP SSH: the test scripts how it ends.
        return int(CONFIG["gcloud_status"])
    print(f"stand-in {cmd}: not expected to be called", file=sys.stderr)
    return 1


if __name__ == "__main__":
    if Path(sys.argv[0]).name == "stand_in.py":
        # Started as `python3 stand_in.py COMMAND ARGS...` (stand_in.sh without a server).
        sys.argv = sys.argv[1:]
    sys.exit(main())
