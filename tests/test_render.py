"""The `vllm serve` command line: the seed's flags, optional ones only when set."""

from __future__ import annotations

from tpudeploy.config import parse_config
from tpudeploy.render import render_startup_script, vllm_serve_args


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
