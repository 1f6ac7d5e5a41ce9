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

`docker logs NAME` prints config.json's `logs[NAME]` (tests/boot_logs.py: the build log's own
boot), or the served program's log; `docker exec [-i] NAME PROGRAM ...` answers from
`exec[NAME][PROGRAM]` and fails like docker when the image has no such program.
"""

import contextlib
import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Stands in for what `docker image inspect` reports as the pulled manifest's digest.
DEFAULT_DIGEST = "5" * 64
METADATA = "http://metadata.test/computeMetadata/v1"
SECRETMANAGER = "http://secretmanager.test/v1"
STORAGE = "http://storage.test"
# Names of the metadata server -> (packet-filter family, address): metadata.test stands in for
# metadata.google.internal (tpudeploy/facts.py METADATA_SERVER_ADDRESSES).
METADATA_HOSTS = {
    "metadata.test": ("iptables", "169.254.169.254"),
    "169.254.169.254": ("iptables", "169.254.169.254"),
    "[fd20:ce::254]": ("ip6tables", "fd20:ce::254"),
}
NGINX_STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"


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
        "--network",
        "--log-opt",
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
        text = conf.read_text()
        text = re.sub(r"^( *)listen (\d+);", r"\1listen 127.0.0.1:\2;", text, flags=re.M)
        # Its TLS socket sits in the container's private /tmp; here, in a directory of this
        # sandbox's own that nginx's unprivileged worker can traverse.
        sockets = Path(tempfile.mkdtemp(prefix="tpudeploy-proxy-"))
        sockets.chmod(0o711)
        text = text.replace("unix:/tmp/", f"unix:{sockets}/")
        # Debian and Ubuntu build the stream module apart; the official image builds it in.
        built = subprocess.run([argv[0], "-V"], capture_output=True, text=True).stderr
        if "--with-stream=dynamic" in built:
            text = f"load_module {NGINX_STREAM_MODULE};\n{text}"
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
        if not CONFIG.get("internet", True):
            # No external address and no Cloud NAT: Private Google Access reaches Google APIs,
            # never registry-1.docker.io.
            print(
                'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: '
                "lookup registry-1.docker.io: i/o timeout",
                file=sys.stderr,
            )
            return 1
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
        repo = image.split("@", 1)[0]
        repo = repo.rsplit(":", 1)[0] if "/" not in repo.rsplit(":", 1)[-1] else repo
        # An image pulled by digest has that digest; a tag has the scripted (or default) one.
        pinned = image.partition("@sha256:")[2]
        digest = pinned or CONFIG.get("digests", {}).get(image, DEFAULT_DIGEST)
        # The image ID is the config blob's digest, never the manifest's (build log: `docker
        # pull` by it fails with "unexpected media type"); a locally built image has no
        # RepoDigests at all.
        repo_digests = (
            [] if image in CONFIG.get("local_images", []) else [f"{repo}@sha256:{digest}"]
        )
        inspected = {
            "Id": "sha256:" + sha256(f"config-blob {image}"),
            "RepoTags": [image],
            "RepoDigests": repo_digests,
        }
        if "--format" in args:
            template = args[args.index("--format") + 1]
            if template != "{{index .RepoDigests 0}}":
                print(f"stand-in docker: unexpected --format {template}", file=sys.stderr)
                return 2
            if not repo_digests:
                # What docker prints for index of an empty list.
                print(
                    "template parsing error: error calling index: index out of range: 0",
                    file=sys.stderr,
                )
                return 1
            print(repo_digests[0])
            return 0
        print(json.dumps([inspected]))
        return 0
    if sub == "logs":
        # The container's log: the served program's own (the rehearsal), else the scripted one.
        name = args[-1]
        served = STUB_DIR / f"{name}.log"
        if STATE.get("pids", {}).get(name) is not None and served.exists():
            sys.stdout.write(served.read_text(errors="replace"))
            return 0
        if name not in containers:
            print(f"Error response from daemon: No such container: {name}", file=sys.stderr)
            return 1
        sys.stdout.write(CONFIG.get("logs", {}).get(name, ""))
        return 0
    if sub == "inspect" and "--format" in args:
        # `docker inspect --format '{{.LogPath}}' NAME`: where docker's json-file log of the
        # container would be (the Ops Agent reads it through a link, templates/_telemetry.sh.j2).
        name, template = args[-1], args[args.index("--format") + 1]
        if template != "{{.LogPath}}" or name not in containers:
            print(f"stand-in docker: no {template} for {name}", file=sys.stderr)
            return 1
        print(STUB_DIR / f"{name}-json.log")
        return 0
    if sub == "exec":
        # `docker exec [-i] NAME CMD...`: scripted answers per container and program.
        rest = [a for a in args[1:] if a != "-i"]
        name, program = rest[0], rest[1] if len(rest) > 1 else ""
        if containers.get(name) != "running":
            print(f"Error response from daemon: container {name} is not running", file=sys.stderr)
            return 1
        if "-i" in args:
            sys.stdin.read()
        answer = CONFIG.get("exec", {}).get(name, {}).get(program)
        if answer is None:
            print(
                f'OCI runtime exec failed: exec: "{program}": executable file not found in $PATH',
                file=sys.stderr,
            )
            return 126
        sys.stdout.write(answer.get("stdout", ""))
        sys.stderr.write(answer.get("stderr", ""))
        return int(answer.get("rc", 0))
    if sub == "kill":
        # `docker kill --signal=HUP NAME`: the signal goes to the container's main process (a
        # served nginx's master: HUP is its graceful reload).
        name = args[-1]
        if containers.get(name) != "running":
            print(f"Error response from daemon: container {name} is not running", file=sys.stderr)
            return 1
        wanted = next((a.split("=", 1)[1] for a in args if a.startswith("--signal=")), "KILL")
        pid = STATE.get("pids", {}).get(name)
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, getattr(signal, f"SIG{wanted}"))
        print(name)
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
    if (
        sub == "run"
        and "--rm" in args
        and opts["entrypoint"] == "nginx"
        and opts["command"] == ["-v"]
    ):
        # `nginx -v` in an image: the official image's nginx is its tag's version, unless the
        # test scripts another (nginx_versions: a retagged or mistyped image).
        tag = str(opts["image"]).split("@")[0].rsplit(":", 1)[-1].split("-")[0]
        print(
            f"nginx version: nginx/{CONFIG.get('nginx_versions', {}).get(opts['image'], tag)}",
            file=sys.stderr,
        )
        return 0
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
                if CONFIG.get("compile_hardlink"):
                    # A second name of one compiled program (tar stores it as a hard link).
                    os.link(host / "jit_decode-cache", host / "jit_decode-cache.link")
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
        "max_filesize": None,
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
        elif arg == "--max-filesize":
            opts["max_filesize"] = int(next(it))
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
    for alias, (family, address) in METADATA_HOSTS.items():
        if url.startswith(f"http://{alias}/computeMetadata/v1"):
            # The node's packet filter decides first: a rejected connection is refused (7).
            if packet_verdict(family, address, 80, caller_uid()) in ("REJECT", "DROP"):
                return 0, b""
            url = METADATA + url.removeprefix(f"http://{alias}/computeMetadata/v1")
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
        if path == "instance/preempted":
            # "TRUE" once Compute Engine preempts the VM, else "FALSE" (the Spot VM pages).
            answer = CONFIG.get("preempted", "FALSE")
            if isinstance(answer, int):  # a test's HTTP status: the server does not answer
                return answer, b"not found"
            return 200, str(answer).encode()
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
    if url in CONFIG.get("downloads", {}):
        # A download the boot makes from outside Google's APIs (the Ops Agent's installer):
        # the test's stand-in text, never the internet.
        return 200, CONFIG["downloads"][url].encode()
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
    if opts["max_filesize"] is not None and len(body) > opts["max_filesize"]:
        # curl(1): exit 63, nothing written, when the size is known to exceed --max-filesize.
        print("curl: (63) Maximum file size exceeded", file=sys.stderr)
        return 63
    if opts["out"]:
        Path(opts["out"]).write_bytes(body)
    else:
        sys.stdout.buffer.write(body)
    sys.stdout.write(write)
    return 0


# ---- the node's own commands (issue 22): iptables, mount, sshd, systemctl


# Who a command of the test runs as on the fake node: the guest agent runs the boot scripts as
# root (0); a test sets STUB_UID to act as a login user.
def caller_uid() -> int:
    return int(os.environ.get("STUB_UID", "0"))


# What iptables(8) and iptables-extensions(8) refuse in a rule, as data: the owner match exists
# only where a packet has a local socket ("valid in the OUTPUT and POSTROUTING chains"), a port
# match and "--reject-with tcp-reset" need "-p tcp".
OWNER_CHAINS = ("OUTPUT", "POSTROUTING")


def rule_problem(rule: list[str]) -> str | None:
    chain, spec = rule[0], rule[1:]
    if "owner" in spec and chain not in OWNER_CHAINS:
        return "owner: only valid in the OUTPUT and POSTROUTING chains"
    pairs = itertools.pairwise(spec)
    tcp = any(flag in ("-p", "--protocol") and value == "tcp" for flag, value in pairs)
    if ("--dport" in spec or "tcp-reset" in spec) and not tcp:
        return 'unknown option "--dport" / tcp-reset needs -p tcp'
    if "-j" not in spec:
        return "no target (-j)"
    return None


def packet_verdict(family: str, address: str, port: int, uid: int) -> str:
    """The first OUTPUT rule that matches a TCP packet from `uid` to address:port decides;
    ACCEPT when none does (the chain's policy on the node)."""
    for rule in STATE.get("iptables", {}).get(family, []):
        chain, spec = rule[0], rule[1:]
        if chain != "OUTPUT":
            continue
        matched, target, i, negate = True, "ACCEPT", 0, False
        while i < len(spec):
            arg = spec[i]
            if arg == "!":
                negate, i = True, i + 1
                continue
            value = spec[i + 1] if i + 1 < len(spec) else ""
            if arg in ("-d", "--destination"):
                hit = value.split("/")[0] == address
            elif arg in ("-p", "--protocol"):
                hit = value == "tcp"
            elif arg == "--dport":
                hit = int(value) == port
            elif arg == "--uid-owner":
                hit = int(value) == uid
            elif arg == "-j":
                target, hit = value, True
            else:  # -m owner, --reject-with: no condition of their own
                i, negate = i + (2 if arg in ("-m", "--reject-with") else 1), False
                continue
            if hit == negate:
                matched = False
            i, negate = i + 2, False
        if matched:
            return target
    return "ACCEPT"


def iptables(family: str, args: list[str]) -> int:
    rules: list[list[str]] = STATE.setdefault("iptables", {}).setdefault(family, [])
    args = [a for a in args if a != "-w"]
    op, rule = args[0], args[1:]
    if op == "-S":
        for r in rules:
            print("-A " + " ".join(r))
        return 0
    problem = rule_problem(rule)
    if problem:
        print(f"{family} v1.8.7 (nf_tables): {problem}", file=sys.stderr)
        return 2
    if op == "-C":
        if rule in rules:
            return 0
        print(f"{family}: Bad rule (does a matching rule exist in that chain?).", file=sys.stderr)
        return 1
    if op in ("-I", "-A"):
        rules.insert(0 if op == "-I" else len(rules), rule)
        save_state()
        return 0
    print(f"stand-in {family}: unexpected {op}", file=sys.stderr)
    return 2


def mount(args: list[str]) -> int:
    """mount -t tmpfs -o OPTIONS SOURCE DIR: the options are recorded, the mode applied."""
    if args[:2] != ["-t", "tmpfs"] or args[2] != "-o" or len(args) != 6:
        print(f"stand-in mount: unexpected {args}", file=sys.stderr)
        return 1
    options, target = args[3], args[5]
    if not Path(target).is_dir():
        print(f"mount: {target}: mount point does not exist.", file=sys.stderr)
        return 32
    STATE.setdefault("mounts", {})[target] = options
    save_state()
    for option in options.split(","):
        if option.startswith("mode="):
            os.chmod(target, int(option.removeprefix("mode="), 8))
    return 0


# sshd_config(5) keywords the scripts may write, and Match's criteria; real sshd -t refuses any
# other word with "Bad configuration option" (exit 255).
SSHD_KEYWORDS = {
    "include",
    "match",
    "allowtcpforwarding",
    "permitopen",
    "allowstreamlocalforwarding",
    "allowagentforwarding",
    "x11forwarding",
    "permittunnel",
    "gatewayports",
    "permituserrc",
    "forcecommand",
    "permittty",
    "authorizedkeyscommand",
    "authorizedkeyscommanduser",
    "passwordauthentication",
    "kbdinteractiveauthentication",
    "usepam",
    "subsystem",
    "acceptenv",
    "printmotd",
    "challengeresponseauthentication",
    "permitrootlogin",
}
MATCH_CRITERIA = {"all", "user", "group", "host", "localaddress", "localport", "address"}


def sshd_problems(path: Path) -> list[str]:
    import glob

    problems = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        keyword = words[0].lower()
        if keyword not in SSHD_KEYWORDS:
            problems.append(f"{path} line {number}: Bad configuration option: {words[0]}")
        elif keyword == "include":
            for included in sorted(glob.glob(words[1])):
                problems += sshd_problems(Path(included))
        elif keyword == "match" and words[1].lower() not in MATCH_CRITERIA:
            problems.append(f"{path} line {number}: Unsupported Match attribute {words[1]}")
        elif len(words) < 2:
            problems.append(f"{path} line {number}: {words[0]} needs an argument")
    return problems


def sshd(args: list[str]) -> int:
    if args[:1] != ["-t"]:
        print(f"stand-in sshd: unexpected {args}", file=sys.stderr)
        return 1
    config = Path(args[args.index("-f") + 1]) if "-f" in args else Path("/etc/ssh/sshd_config")
    problems = sshd_problems(config)
    if "sshd_error" in CONFIG:  # a test scripts what this node's sshd would refuse
        problems.append(CONFIG["sshd_error"])
    for problem in problems:
        print(problem, file=sys.stderr)
    return 255 if problems else 0


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
    if cmd in ("iptables", "ip6tables", "mount", "sshd"):
        record(cmd)
        if cmd == "mount":
            return mount(args)
        return sshd(args) if cmd == "sshd" else iptables(cmd, args)
    if cmd == "mountpoint":
        record(cmd)
        return 0 if args[-1] in STATE.get("mounts", {}) else 32
    if cmd == "systemctl":
        record(cmd)
        if args[:1] == ["stop"] and len(args) > 1:
            stop(f"unit:{args[1]}")
            save_state()
        return 0
    if cmd == "systemd-run":
        # A transient service (the TPU VM's key poller): recorded; started as a process of its
        # own only when the test or rehearsal asks (run_units), and stopped with `systemctl stop`.
        record(cmd)
        # Like systemd-run: its own options come first, then the command and ITS options
        # (the idle watcher's --metrics-url ...), which are not systemd-run's.
        options: list[str] = []
        for arg in args:
            if not arg.startswith("--"):
                break
            options.append(arg)
        command = args[len(options) :]
        unit = next((o.split("=", 1)[1] for o in options if o.startswith("--unit=")), "")
        if CONFIG.get("run_units") and command:
            with open(STUB_DIR / f"unit-{unit}.log", "ab") as log:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            STATE.setdefault("pids", {})[f"unit:{unit}"] = proc.pid
            save_state()
        return 0
    record(cmd)
    if cmd == "sleep":
        return 0
    if cmd == "gcloud" and "gcloud_status" in CONFIG:
        # `make tunnel`'s IAP SSH: the test scripts how it ends, and what gcloud says.
        if CONFIG.get("gcloud_stderr"):
            print(CONFIG["gcloud_stderr"], file=sys.stderr)
        return int(CONFIG["gcloud_status"])
    print(f"stand-in {cmd}: not expected to be called", file=sys.stderr)
    return 1


if __name__ == "__main__":
    if Path(sys.argv[0]).name == "stand_in.py":
        # Started as `python3 stand_in.py COMMAND ARGS...` (stand_in.sh without a server).
        sys.argv = sys.argv[1:]
    sys.exit(main())
