"""The `vllm serve` command line: the seed's flags, optional ones only when set."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
from pathlib import Path

import jinja2
import pytest

from tpudeploy import bootcheck, cacheguard, facts, nodebuild, render
from tpudeploy.config import DeployConfig, parse_config
from tpudeploy.render import (
    PROXY_BODY_TIMEOUT,
    PROXY_CONNECTIONS_PER_ADDRESS,
    PROXY_HEADER_TIMEOUT,
    PROXY_METRICS_SOCKET,
    PROXY_POOL_SOCKET,
    PROXY_TLS_SOCKET,
    boot_check_source,
    compile_cache_key,
    image_repository,
    node_metadata,
    render_login_gate,
    render_proxy_config,
    render_shutdown_script,
    render_startup_script,
    vllm_serve_args,
)

# The build log's `vllm serve` line, flag for flag, plus what the front door adds: vLLM on
# loopback only, and the media allow-list that fetches nothing.
SEED_SERVE = [
    "vllm",
    "serve",
    "google/gemma-4-E2B-it",
    "--host",
    "127.0.0.1",
    "--port",
    "8000",
    "--dtype",
    "bfloat16",
    "--kv-cache-dtype",
    "auto",
    "--max-model-len",
    "32768",
    "--max-num-batched-tokens",
    "4096",
    "--tensor-parallel-size",
    "1",
    "--gpu-memory-utilization",
    "0.92",
    "--enable-prefix-caching",
    "--disable-chunked-mm-input",
    "--limit-mm-per-prompt",
    '{"image":4,"audio":1}',
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "gemma4",
    "--reasoning-parser",
    "gemma4",
    "--allowed-media-domains",
    "media-urls-disabled.invalid",
]


def flag_value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_seed_flags_in_order_of_the_seed() -> None:
    args = vllm_serve_args(parse_config({}).vllm)
    assert args[:3] == ["vllm", "serve", "google/gemma-4-E2B-it"]
    assert flag_value(args, "--max-model-len") == "32768"
    assert flag_value(args, "--max-num-batched-tokens") == "4096"
    assert flag_value(args, "--gpu-memory-utilization") == "0.92"
    assert flag_value(args, "--limit-mm-per-prompt") == '{"image":4,"audio":1}'
    assert "--block-size" not in args  # the backend scales it (seed: do not set it)
    assert "--kv-cache-memory-bytes" not in args


def test_optional_pins_reach_the_command_line() -> None:
    cfg = parse_config({"vllm": {"block_size": 64, "kv_cache_memory_bytes": 5923602432}})
    args = vllm_serve_args(cfg.vllm)
    assert flag_value(args, "--block-size") == "64"
    # The seed's --kv-cache-memory is spelled --kv-cache-memory-bytes in current vLLM.
    assert flag_value(args, "--kv-cache-memory-bytes") == "5923602432"


def test_extra_args_are_shell_quoted_in_the_script() -> None:
    cfg = parse_config({"vllm": {"extra_args": ["--served-model-name", "gemma; rm -rf /"]}})
    assert "'gemma; rm -rf /'" in render_startup_script(cfg)


def test_prefix_caching_off_is_said_explicitly() -> None:
    """vLLM's default is on: leaving the flag out would never turn it off."""
    on = vllm_serve_args(parse_config({}).vllm)
    assert "--enable-prefix-caching" in on and "--no-enable-prefix-caching" not in on
    off = vllm_serve_args(parse_config({"vllm": {"enable_prefix_caching": False}}).vllm)
    assert "--no-enable-prefix-caching" in off and "--enable-prefix-caching" not in off


def test_vllm_listens_on_loopback_without_a_key() -> None:
    """Issue 13, defect 1: the proxy checks the key on every path; vLLM is reachable only from
    the node, and no key reaches its command line, metadata or state."""
    args = vllm_serve_args(parse_config({}).vllm)
    assert flag_value(args, "--host") == "127.0.0.1"
    assert "--api-key" not in args


def test_every_flag_the_render_sets_is_protected_from_extra_args() -> None:
    """extra_args may not repeat a modelled flag: the list must cover every flag emitted."""
    from tpudeploy.config import DENIED_SERVE_FLAGS, MODELLED_SERVE_FLAGS

    flags: set[str] = set()
    for vllm in (
        {"block_size": 64, "kv_cache_memory_bytes": 5923602432},
        {"enable_prefix_caching": False, "enable_auto_tool_choice": False},
    ):
        args = vllm_serve_args(parse_config({"vllm": vllm}).vllm)
        # --no-X is X to vLLM's parser (and to the extra_args check).
        flags |= {"--" + a[5:] if a.startswith("--no-") else a for a in args if a[:2] == "--"}
    assert flags <= MODELLED_SERVE_FLAGS | set(DENIED_SERVE_FLAGS)
    assert {"--host", "--port"} <= set(DENIED_SERVE_FLAGS)


def test_the_seeds_serve_line_flag_for_flag() -> None:
    assert vllm_serve_args(parse_config({}).vllm) == SEED_SERVE


def test_every_setting_reaches_its_flag() -> None:
    v = parse_config(
        {
            "vllm": {
                "model": "google/gemma-4-E4B-it",
                "port": 8100,
                "dtype": "float16",
                "kv_cache_dtype": "fp8",
                "max_model_len": 16384,
                "max_num_batched_tokens": 8192,
                "tensor_parallel_size": 2,
                "gpu_memory_utilization": 0.9,
                "block_size": 32,
                "kv_cache_memory_bytes": 5923602432,
                "enable_prefix_caching": False,
                "disable_chunked_mm_input": False,
                "limit_mm_per_prompt": {},
                "enable_auto_tool_choice": False,
                "tool_call_parser": "hermes",
                "reasoning_parser": "qwen3",
                "allowed_media_domains": ["upload.wikimedia.org", "images.example.com"],
                "extra_args": ["--max-num-seqs", "64"],
            }
        }
    ).vllm
    assert vllm_serve_args(v) == [
        "vllm",
        "serve",
        "google/gemma-4-E4B-it",
        # extra_args first: nothing after them can be extended, every modelled flag wins.
        "--max-num-seqs",
        "64",
        "--host",
        "127.0.0.1",
        "--port",
        "8100",
        "--dtype",
        "float16",
        "--kv-cache-dtype",
        "fp8",
        "--max-model-len",
        "16384",
        "--max-num-batched-tokens",
        "8192",
        "--tensor-parallel-size",
        "2",
        "--gpu-memory-utilization",
        "0.9",
        "--block-size",
        "32",
        "--kv-cache-memory-bytes",
        "5923602432",
        "--no-enable-prefix-caching",
        "--tool-call-parser",
        "hermes",
        "--reasoning-parser",
        "qwen3",
        "--allowed-media-domains",
        "upload.wikimedia.org",
        "images.example.com",
    ]


def settings(script: str) -> dict[str, str]:
    """The startup script's `readonly NAME=value` lines, each value as bash reads it."""
    found = {}
    for line in script.splitlines():
        if line.startswith("readonly ") and "=" in line:
            name, _, value = shlex.split(line.removeprefix("readonly "))[0].partition("=")
            found[name] = value
    return found


@pytest.fixture(scope="module")
def own() -> DeployConfig:
    """A deployment whose every boot value differs from the defaults."""
    return parse_config(
        {
            "name": "agents",
            "vllm": {
                "image": "example.org/team/vllm-tpu:v0.33.0",
                "container_name": "llm",
                "port": 8100,
            },
            "proxy": {"image": "nginx:1.30.5", "container_name": "door", "port": 9443},
        }
    )


def test_the_startup_script_carries_each_value_shell_quoted(own: DeployConfig) -> None:
    expected = {
        "CONTAINER": "llm",
        "IMAGE": "example.org/team/vllm-tpu:v0.33.0",
        "PROXY_CONTAINER": "door",
        "PROXY_IMAGE": "nginx:1.30.5",
        # What `nginx -v` in that image must say (the tag's version).
        "PROXY_VERSION": "1.30.5",
        # Secret ids, never secret values (the script is instance metadata).
        "HF_TOKEN_SECRET": "agents-hf-token",
        # The format the boot checks the token against: an ERE full of shell syntax, quoted.
        "HF_TOKEN_FORMAT": "^hf_[A-Za-z0-9]{30,200}$",
        "PORT": "8100",
        "PROXY_PORT": "9443",
        "CACHE_KEY": compile_cache_key(own),
        "BUCKET_SUFFIX": "agents-xla",
        # The seed's cold boot took 857 s; readiness waits 2400 s unless a test shortens it.
        "READY_TIMEOUT": "${TPUDEPLOY_READY_TIMEOUT:-2400}",
    }
    script = render_startup_script(own)
    found = settings(script)
    assert {k: found.get(k) for k in expected} == expected
    # Each [access] client and its key's secret id (issue 37), as bash arrays.
    arrays = [ln for ln in script.splitlines() if ln.startswith("readonly CLIENT")]
    said = subprocess.run(
        ["bash", "-c", "\n".join([*arrays, 'echo "${CLIENTS[*]}/${CLIENT_SECRETS[*]}"'])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert said == "default/agents-api-key\n"


def docker_run(script: str) -> list[str]:
    """The `docker run` command that starts vLLM, as the shell joins its continued lines."""
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if "docker run --detach" in line)
    command = []
    for line in lines[start:]:
        command.append(line.strip().removesuffix("\\").strip())
        if not line.endswith("\\"):
            break
    return command


def test_docker_run_is_one_command_ending_in_the_serve_line() -> None:
    """Every line continues the last: a blank line would end the command before vllm serve."""
    cfg = parse_config({"vllm": {"shm_size": "12gb", "slice_rope_cache": True}})
    command = docker_run(render_startup_script(cfg))
    assert "--shm-size 12gb" in command
    assert "-e SLICE_ROPE_CACHE=1" in command and "-e VLLM_MEDIA_URL_ALLOW_REDIRECTS=0" in command
    assert command[command.index('"$IMAGE"') + 1 :] == [
        "vllm serve google/gemma-4-E2B-it",
        "--host 127.0.0.1",
        "--port 8000",
        "--dtype bfloat16",
        "--kv-cache-dtype auto",
        "--max-model-len 32768",
        "--max-num-batched-tokens 4096",
        "--tensor-parallel-size 1",
        "--gpu-memory-utilization 0.92",
        "--enable-prefix-caching",
        "--disable-chunked-mm-input",
        '--limit-mm-per-prompt \'{"image":4,"audio":1}\'',
        "--enable-auto-tool-choice",
        "--tool-call-parser gemma4",
        "--reasoning-parser gemma4",
        "--allowed-media-domains media-urls-disabled.invalid",
    ]
    assert shlex.split(" ".join(command[command.index('"$IMAGE"') + 1 :])) == SEED_SERVE


def test_the_proxy_listens_on_its_port_and_forwards_to_vllms(own: DeployConfig) -> None:
    conf = render_proxy_config(own)
    assert conf.startswith("# The front door of the agents node")
    assert "server 127.0.0.1:8100;" in conf and "listen 9443;" in conf
    # The startup script writes it whole, its heredoc terminator on a line of its own.
    assert f"<<'NGINX_CONF'\n{conf}NGINX_CONF\n" in render_startup_script(own)


def test_the_cache_guard_runs_from_its_own_source() -> None:
    source = Path(cacheguard.__file__).read_text(encoding="utf-8")
    assert source.isascii()  # so any locale reads it the same
    assert source in render_startup_script(parse_config({}))


def test_a_value_no_one_passes_is_an_error_not_an_empty_string() -> None:
    """StrictUndefined: a missing value fails the render instead of writing '' into a script."""
    with pytest.raises(jinja2.UndefinedError):
        render._environment().from_string("readonly X={{ x | q }}\n").render()
    rendered = render._environment().from_string("X={{ x | q }}\n").render(x="a b; c")
    assert rendered == "X='a b; c'\n"


def test_metadata_carries_both_scripts_os_login_and_guest_attributes() -> None:
    cfg = parse_config({})
    assert node_metadata(cfg) == {
        "startup-script": render_startup_script(cfg),
        "shutdown-script": render_shutdown_script(cfg),
        "enable-oslogin": "TRUE",
        "block-project-ssh-keys": "TRUE",
        "enable-guest-attributes": "TRUE",
    }


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("vllm/vllm-tpu:nightly", "vllm/vllm-tpu"),
        ("vllm/vllm-tpu", "vllm/vllm-tpu"),
        ("example.org/team/vllm-tpu:v0.33.0", "example.org/team/vllm-tpu"),
        ("nginx@sha256:" + "e" * 64, "nginx"),
        ("example.org/vllm-tpu:nightly@sha256:" + "0" * 64, "example.org/vllm-tpu"),
    ],
)
def test_the_cache_is_keyed_by_repository_not_tag(image: str, repository: str) -> None:
    assert image_repository(image) == repository


def test_the_cache_key_format_is_stable() -> None:
    """16 hex digits of sha256 over the compact, sorted JSON of what shapes a compiled program.
    Existing compile caches in the bucket and `make bench` results are filed under it: a format
    change would make every deployment's next boot cold (857 s instead of 497 s)."""
    cfg = parse_config({"vllm": {"port": 8100, "allowed_media_domains": ["example.org"]}})
    inputs = {
        "image": "vllm/vllm-tpu",
        "accelerator_type": "v5litepod-1",
        "runtime_version": "v2-alpha-tpuv5-lite",
        # The port and the media allow-list cannot change a compiled program: normalised.
        "serve": [
            *SEED_SERVE[: SEED_SERVE.index("--allowed-media-domains")],
            "--allowed-media-domains",
            "-",
        ],
        "env": {"VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0"},
    }
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    assert compile_cache_key(cfg) == hashlib.sha256(canonical.encode()).hexdigest()[:16]


def test_the_cache_key_changes_with_what_shapes_a_program_only() -> None:
    base = compile_cache_key(parse_config({}))
    for change in (
        {"vllm": {"max_model_len": 16384}},
        {"vllm": {"max_num_batched_tokens": 8192}},
        {"vllm": {"kv_cache_dtype": "fp8_e4m3", "force_kv_cache_dtype": True}},
        {"vllm": {"limit_mm_per_prompt": {"image": 1}}},
        {"vllm": {"disable_chunked_mm_input": False}},
        {"vllm": {"vllm_tpu_bucket_padding_gap": 128}},
        {"vllm": {"image": "example.org/other/vllm-tpu:nightly"}},
        {"vllm": {"gpu_memory_utilization": 0.9}},
        {"accelerator_type": "v5litepod-4", "provisioning": "spot"},
    ):
        assert compile_cache_key(parse_config(change)) != base, change
    for same in (
        {"vllm": {"port": 8080}},
        {"vllm": {"allowed_media_domains": ["upload.wikimedia.org"]}},
        # The tag does not key the cache; the digest the node pulled does (the boot adds it).
        {"vllm": {"image": "vllm/vllm-tpu:v0.33.0"}},
        {"proxy": {"port": 9443}},
    ):
        assert compile_cache_key(parse_config(same)) == base, same


def test_the_checkpoint_tmpfs_holds_the_checkpoint_and_a_quarter_in_whole_gib() -> None:
    """HF_HOME is a tmpfs (the token and checkpoint never touch disk): it must hold the seed's
    checkpoint with a quarter to spare, and no more than the next whole GiB above that (a
    tmpfs that large could fill the host's memory)."""
    size = render.hf_tmpfs_size()
    assert size.endswith("g")
    gib = int(size.removesuffix("g"))
    assert (
        facts.CHECKPOINT_BYTES * 1.25 <= gib * facts.GIB < facts.CHECKPOINT_BYTES * 1.25 + facts.GIB
    )


@pytest.mark.parametrize("name", ["seed", "own"])
def test_no_boot_setting_is_a_python_none(name: str, own: DeployConfig) -> None:
    """A value the render forgot reaches bash as the word None (a tmpfs of size None, a DNS
    port None): every `readonly` setting carries a value, numbers as numbers."""
    found = settings(render_startup_script(own if name == "own" else parse_config({})))
    assert found and all(value and "None" not in value for value in found.values()), found
    for key in ("METADATA_DNS_PORT", "CACHE_MAX_BYTES"):
        assert found[key].isdigit(), (key, found[key])
    assert found["HF_TMPFS_SIZE"] == render.hf_tmpfs_size()
    assert found["RESTORE_TIMEOUT"] == f"${{TPUDEPLOY_RESTORE_TIMEOUT:-{RESTORE_TIMEOUT}}}"


RESTORE_TIMEOUT = render.RESTORE_TIMEOUT_SECONDS


def test_the_boot_checks_what_this_configuration_expects(own: DeployConfig) -> None:
    """BOOT_EXPECTED is the JSON the node's boot check compares vLLM's own report with."""
    found = settings(render_startup_script(own))
    expected = nodebuild.boot_expectations(own, vllm_serve_args(own.vllm))
    assert json.loads(found["BOOT_EXPECTED"]) == expected


def test_the_boot_check_and_the_login_gate_run_from_their_own_source(own: DeployConfig) -> None:
    source = boot_check_source()
    assert source == Path(bootcheck.__file__).read_text(encoding="utf-8")
    assert source.isascii()  # so any locale reads it the same
    script = render_startup_script(own)
    assert source in script
    gate = render_login_gate(own)
    assert f"<<'LOGIN_GATE_SH'\n{gate}LOGIN_GATE_SH\n" in script
    # The gate names this node and the port `make tunnel` forwards.
    assert "the agents node" in gate and "localhost:9443" in gate and "None" not in gate


def test_the_proxys_limits_and_inner_socket_reach_nginx(own: DeployConfig) -> None:
    conf = render_proxy_config(own)
    assert f"limit_conn per_address {PROXY_CONNECTIONS_PER_ADDRESS};" in conf
    assert f"client_header_timeout {PROXY_HEADER_TIMEOUT};" in conf
    assert f"client_body_timeout {PROXY_BODY_TIMEOUT};" in conf
    assert conf.count(f"unix:{PROXY_TLS_SOCKET}") == 2  # the TLS hop's two ends
    assert "None" not in conf


def test_a_metrics_port_adds_a_listener_and_none_adds_none(own: DeployConfig) -> None:
    """The GKE pod's plain /metrics listener (render_proxy_config's metrics_port), behind its
    own counting relay (tests/gke/test_gke_frontdoor.py runs it under nginx)."""
    conf = render_proxy_config(own, metrics_port=9400)
    assert "listen 9400;" in conf and "None" not in conf
    assert conf.count(f"unix:{PROXY_METRICS_SOCKET}") == 2  # the relay's two ends
    assert "listen 9400;" not in render_proxy_config(own)
    assert PROXY_METRICS_SOCKET not in render_proxy_config(own)


def test_a_pool_port_adds_the_keyed_plain_listener_and_its_allowance(own: DeployConfig) -> None:
    """GKE routing's InferencePool listener (render_proxy_config's pool_port): behind its relay,
    with the allowance it is given, and the same key check as the TLS server."""
    conf = render_proxy_config(own, pool_port=8080, pool_connections_per_address=306)
    assert "listen 8080;" in conf and "None" not in conf
    assert conf.count(f"unix:{PROXY_POOL_SOCKET}") == 2
    assert "limit_conn per_address 306;" in conf
    assert conf.count('secure_link_md5 "$http_authorization";') == 2  # TLS and pool servers
    default = render_proxy_config(own, pool_port=8080)
    assert default.count(f"limit_conn per_address {PROXY_CONNECTIONS_PER_ADDRESS};") == 2
    plain = render_proxy_config(own)
    assert "listen 8080;" not in plain and PROXY_POOL_SOCKET not in plain
    assert plain.count('secure_link_md5 "$http_authorization";') == 1


def test_a_speculative_config_reaches_vllm_as_one_json_argument() -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    cfg = parse_config({"vllm": {"speculative_config": spec}})
    args = vllm_serve_args(cfg.vllm)
    at = args.index("--speculative-config")
    assert json.loads(args[at + 1]) == spec and " " not in args[at + 1]
    # Added to the seed's line, nothing of it lost.
    assert args[:at] + args[at + 2 :] == SEED_SERVE


def test_the_key_shape_map_admits_only_a_bearer_key_shaped_like_make_api_keys(
    own: DeployConfig,
) -> None:
    """Issue 36 item 16: the front door's map admits `Bearer <key>` only for a key of
    make api-key's shape (secretshape.API_KEY_ERE), anchored at both ends. Its regex is read
    from the rendered config and run as nginx's PCRE would."""
    import re

    conf = render_proxy_config(own)
    (pattern,) = re.findall(r'"~(\^Bearer [^"]*)" 1;', conf)
    shape = re.compile(pattern)
    key = "A" * 21 + "-_" + "z9" * 10
    assert shape.search(f"Bearer {key}")
    for header in ("Bearer abc", f"Bearer {key}x", f"xBearer {key}", f"Bearer {key[:-1]}+", key):
        assert not shape.search(header), header


def test_the_shutdown_scripts_preemption_line_goes_where_the_agent_ships_and_the_alert_counts() -> (
    None
):
    """The shutdown script's preemption entry (issue 38), read from the rendered text alone: it
    appends to the file the Ops Agent ships as the boot log, and its phase is the one the
    preemption log metric counts for this deployment (the boot sandbox runs it:
    tests/render/test_shutdown_preemption.py)."""
    import re

    from tools.rehearsal.fakes.logging_rules import parse_filter
    from tpudeploy import logsources, opsagent
    from tpudeploy.platform import log_metrics_for

    cfg = parse_config({"project": "p-123456", "provisioning": "spot"})
    script = render.render_shutdown_script(cfg)
    log_dir = re.search(r'readonly LOG_DIR="\$\{TPUDEPLOY_LOG_DIR:-([^}]*)\}"', script)
    boot_log = re.search(r'readonly BOOT_LOG="\$LOG_DIR/([^"]+)"', script)
    assert log_dir and boot_log, script
    receivers = opsagent.agent_config(cfg)["logging"]["receivers"]
    shipped = receivers[logsources.TPUVM_LOG_IDS["boot"]]["include_paths"]
    assert shipped == [f"{log_dir[1]}/{boot_log[1]}"]
    line = re.search(r"printf '(\{\"phase\":[^']*)\\n'", script)
    assert line, script
    entry = {
        "logName": f"projects/p-123456/logs/{logsources.TPUVM_LOG_IDS['boot']}",
        "labels": {logsources.DEPLOYMENT_LABEL: cfg.name},
        "jsonPayload": json.loads(line[1].replace("%d", "0")),
    }
    assert parse_filter(log_metrics_for(cfg)["preemptions"]["filter"])(entry)
