"""Which `vllm serve` arguments [vllm] extra_args may carry: no repeat of a flag the config
models, nothing on the deny list, no credential."""

from __future__ import annotations

from tpudeploy.config.secretshape import redact, secret_shape

# Flags the config models: `extra_args` must not repeat them (vLLM takes the last occurrence, so
# a repeat would silently win over the validated value). tests/test_render.py checks that every
# flag tpudeploy.render emits is listed here.
MODELLED_SERVE_FLAGS = frozenset(
    {
        "--dtype",
        "--kv-cache-dtype",
        "--max-model-len",
        "--max-num-batched-tokens",
        "--tensor-parallel-size",
        "--gpu-memory-utilization",
        "--block-size",
        "--kv-cache-memory-bytes",
        "--enable-prefix-caching",
        "--disable-chunked-mm-input",
        "--limit-mm-per-prompt",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "--reasoning-parser",
        "--allowed-media-domains",
        "--speculative-config",
    }
)
# vLLM's short spellings of modelled flags.
_SHORT_FLAGS = {"-tp": "--tensor-parallel-size"}
# Flags no config may pass, and why. The key check moved to the proxy in front of vLLM, which
# listens on the loopback port the boot script and the proxy both expect.
DENIED_SERVE_FLAGS = {
    "--api-key": "a key here lands in instance metadata, Terraform state and the process list "
    "(the key lives in Secret Manager and the TLS proxy checks it: `make api-key`)",
    "--trust-remote-code": "runs Python code shipped with a model repository, as root, on a "
    "privileged container",
    "--allowed-local-media-path": "lets any request read files from the node's disk",
    "--host": "vLLM must listen on 127.0.0.1 only: the TLS proxy is the one way in",
    "--port": "the proxy, the readiness check and the firewall use [vllm] port and [proxy] port "
    "(set those instead)",
    "--uds": "a Unix socket replaces the loopback port the proxy and the readiness check use",
    "--config": "reads more flags from a file, past every check made here",
}
# A flag whose last word is one of these carries a credential (vLLM's --hf-token, --api-key).
_SECRET_FLAG_WORDS = frozenset(
    {"key", "token", "secret", "password", "passwd", "credential", "credentials"}
)


def _flag_name(arg: str) -> str:
    """The option an argument names the way vLLM's parser reads it: `--x_y=v` and `--x-y.k v`
    are `--x-y`; `--no-x` is `--x`."""
    name = arg.partition("=")[0].partition(".")[0].lower()
    if name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
        name = "--" + name[5:] if name.startswith("--no-") else name
    return _SHORT_FLAGS.get(name, name)


def extra_arg_problem(arg: str) -> str:
    """Why one `extra_args` item must not reach `vllm serve`, or "" when it may."""
    what = secret_shape(arg)
    if what:
        return (
            f"looks like {what}, and extra_args land in instance metadata, Terraform state and "
            "the process list (secrets belong in Secret Manager)"
        )
    if not arg.startswith("-"):
        return ""
    name = _flag_name(arg)
    # argparse accepts any unambiguous prefix of a flag (allow_abbrev), so `--api-k` is --api-key.
    # Every prefix past "--" counts: a short one that vLLM finds ambiguous fails at boot anyway.
    protected = [f for f in (*DENIED_SERVE_FLAGS, *MODELLED_SERVE_FLAGS) if f.startswith(name)]
    if name in DENIED_SERVE_FLAGS or (len(name) > 2 and protected):
        flag = name if name in DENIED_SERVE_FLAGS else protected[0]
        if flag in DENIED_SERVE_FLAGS:
            return f"{flag} is not allowed: {DENIED_SERVE_FLAGS[flag]}"
        return (
            f"{flag} is set from its own config key, vllm.{flag[2:].replace('-', '_')}, and a "
            "second one would override the validated value"
        )
    if name.rpartition("-")[2] in _SECRET_FLAG_WORDS:
        return (
            f"{name} carries a credential, and extra_args land in instance metadata, Terraform "
            "state and the process list"
        )
    return ""


def check_extra_args(v: tuple[str, ...]) -> tuple[str, ...]:
    """[vllm] extra_args: the first item that must not reach `vllm serve`, shown redacted."""
    for i, arg in enumerate(v):
        problem = extra_arg_problem(arg)
        if problem:
            raise ValueError(f"item {i}, {redact(arg)!r}: {problem}; remove it from extra_args")
    return v
