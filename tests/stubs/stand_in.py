#!/usr/bin/env -S python3 -S
"""Stand-in for docker, curl, gcloud and sleep when a rendered boot script runs under tests.

Invoked through symlinks named after the command. Each call appends one JSON line to
$STUB_DIR/calls.jsonl: the command, its argv, the NAMES of its environment variables and a sha256
of the secret-bearing ones (never a value). Scripted answers come from $STUB_DIR/config.json
(written by the test) and mutable state lives in $STUB_DIR/state.json.
"""

import hashlib
import json
import os
import sys
from pathlib import Path

STUB_DIR = Path(os.environ["STUB_DIR"])
SECRET_ENV = ("HF_TOKEN", "VLLM_API_KEY")
METADATA = "http://metadata.test/computeMetadata/v1"
SECRETMANAGER = "http://secretmanager.test/v1"
STORAGE = "http://storage.test"


def load(name, default):
    path = STUB_DIR / name
    return json.loads(path.read_text()) if path.exists() else default


CONFIG = load("config.json", {})
STATE = load("state.json", {})


def save_state():
    (STUB_DIR / "state.json").write_text(json.dumps(STATE))


def record(cmd, extra=None):
    entry = {
        "cmd": cmd,
        "argv": sys.argv[1:],
        "env_names": sorted(os.environ),
        "secret_env_sha256": {
            name: hashlib.sha256(os.environ[name].encode()).hexdigest()
            for name in SECRET_ENV
            if name in os.environ
        },
    }
    entry.update(extra or {})
    with open(STUB_DIR / "calls.jsonl", "a") as fh:
        fh.write(json.dumps(entry) + "\n")


# ---- docker


def docker(args):
    record("docker")
    sub = args[0]
    if sub == "ps":
        if STATE.get("container") == "running":
            print("3f2a1b0c9d8e")
        return 0
    if sub == "pull":
        STATE["pulls"] = STATE.get("pulls", 0) + 1
        save_state()
        if STATE["pulls"] <= CONFIG.get("pull_failures", 0):
            print("Error response from daemon: net/http: TLS handshake timeout", file=sys.stderr)
            return 1
        return 0
    if sub == "rm":
        if STATE.get("container"):
            STATE["removed"] = STATE.get("removed", 0) + 1
        STATE["container"] = None
        save_state()
        return 0 if STATE.get("removed") else 1
    if sub == "run":
        if STATE.get("container"):
            print("Conflict. The container name is already in use", file=sys.stderr)
            return 125
        STATE["container"] = CONFIG.get("container_after_run", "running")
        save_state()
        # The engine compiles into the mounted cache, like the real one (xla_cache/).
        for i, arg in enumerate(args):
            if arg == "-v" and args[i + 1].endswith(":/root/.cache/vllm"):
                host = Path(args[i + 1].rsplit(":", 1)[0]) / "xla_cache"
                host.mkdir(parents=True, exist_ok=True)
                for name in CONFIG.get("compiles", ["jit_decode-cache", "jit_prefill-cache"]):
                    (host / name).write_bytes(b"x" * 64)
        print("3f2a1b0c9d8e")
        return 0
    print(f"stand-in docker: unexpected command {sub}", file=sys.stderr)
    return 2


# ---- curl


def parse_curl(args):
    opts = {
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
    flags_with_value = {"--retry", "--max-time", "-m", "--connect-timeout"}
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


def bearer_ok(opts):
    return f"Authorization: Bearer {CONFIG['access_token']}" in opts["headers"]


def curl_answer(opts):
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
        if CONFIG.get("storage_status"):
            return CONFIG["storage_status"], b"<Error><Code>ServiceUnavailable</Code></Error>"
        target = STUB_DIR / "gcs" / url[len(STORAGE) + 1 :]
        if method == "PUT":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(Path(opts["upload"]).read_bytes())
            return 200, b""
        if target.exists():
            return 200, target.read_bytes()
        return 404, b"<Error><Code>NoSuchKey</Code></Error>"
    if url.startswith("http://localhost:") and url.endswith("/health"):
        codes = CONFIG.get("health", [200])
        i = STATE.get("health_polls", 0)
        STATE["health_polls"] = i + 1
        save_state()
        return int(codes[min(i, len(codes) - 1)]), b""
    return 0, b""


def curl(args):
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


def main():
    cmd = Path(sys.argv[0]).name
    args = sys.argv[1:]
    if cmd == "docker":
        return docker(args)
    if cmd == "curl":
        return curl(args)
    record(cmd)
    if cmd == "sleep":
        return 0
    print(f"stand-in {cmd}: not expected to be called", file=sys.stderr)
    return 1


sys.exit(main())
