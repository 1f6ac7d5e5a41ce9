"""Which `vllm serve` arguments [vllm] extra_args may carry: flags on the allow-list, spelled
and valued the way the pinned vLLM's CLI takes them, no repeat of a flag the config models, no
credential."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from tpudeploy.config.secretshape import redact, secret_shape

# Flags the config models: `extra_args` must not repeat them (vLLM takes the last occurrence, so
# a repeat would silently win over the validated value). tests/render/test_render.py checks that
# every flag tpudeploy.render emits is listed here.
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
# listens on the loopback port the boot script and the proxy both expect. Every other flag not
# on ALLOWED_EXTRA_FLAGS is refused too; these get their own reason.
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
    # Issue 22: flags that load code or open ports.
    "--tool-parser-plugin": "imports a Python file as code in the serving process",
    "--reasoning-parser-plugin": "imports a Python file as code in the serving process",
    "--middleware": "imports a Python object into the API server, in front of every request",
    "--enable-prompt-embeds": "accepts raw tensors from clients (torch.load of request data)",
    "--kv-events-config": "publishes KV-cache events on a ZMQ socket, a port the proxy does not "
    "guard",
}
# The flags extra_args may carry: scheduling, sampling limits, logging and the served name, none
# of which loads code, opens a port, reads a file or changes who may call. Each is checked
# against vLLM's own CLI (VLLM_FLAGS) for its value, nargs and choices.
ALLOWED_EXTRA_FLAGS = frozenset(
    {
        "--max-num-seqs",
        "--long-prefill-token-threshold",
        "--scheduling-policy",
        "--enable-chunked-prefill",
        "--async-scheduling",
        "--stream-interval",
        "--seed",
        "--max-logprobs",
        "--logprobs-mode",
        "--return-tokens-as-token-ids",
        "--enable-prompt-tokens-details",
        "--enable-force-include-usage",
        "--override-generation-config",
        "--disable-sliding-window",
        "--disable-cascade-attn",
        "--num-gpu-blocks-override",
        "--prefix-caching-hash-algo",
        "--mm-processor-cache-gb",
        "--skip-mm-profiling",
        "--disable-log-stats",
        "--enable-log-requests",
        "--max-log-len",
        "--disable-uvicorn-access-log",
        "--uvicorn-log-level",
        "--served-model-name",
    }
)
# vLLM's CLI at the version the project pins, generated from its source by tools/vllm_flags.py
# (the file names the command): each flag's value, nargs, choices and --no- form.
_FLAGS_FILE = Path(__file__).with_name("vllm_cli_flags.json")
_FLAGS_DOCUMENT = json.loads(_FLAGS_FILE.read_text(encoding="utf-8"))
VLLM_VERSION: str = _FLAGS_DOCUMENT["vllm_version"]
VLLM_FLAGS: dict[str, dict[str, Any]] = _FLAGS_DOCUMENT["flags"]
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


def _value_problem(flag: str, spec: dict[str, Any], values: list[str]) -> str:
    choices = spec.get("choices")
    for value in values:
        if choices and value not in choices:
            return f"{flag} takes one of {', '.join(choices)}, not {redact(value)!r}"
    return ""


def _is_value(arg: str) -> bool:
    """A token argparse reads as a value, not an option: no leading '-', or a negative number."""
    if not arg.startswith("-"):
        return True
    try:
        float(arg)
    except ValueError:
        return False
    return True


def _flag_problems(v: tuple[str, ...]) -> tuple[int, str, str] | None:
    """(item, problem, fix) for the first item vLLM would refuse or that must not reach it."""
    for i, arg in enumerate(v):  # values too: a secret is refused wherever it stands
        if secret_shape(arg):
            return i, extra_arg_problem(arg), "remove it from extra_args"
    i = 0
    while i < len(v):
        arg = v[i]
        problem = extra_arg_problem(arg)
        if problem:
            return i, problem, "remove it from extra_args"
        if arg == "--":
            return i, "ends vLLM's options: what follows is read as the model", "remove it"
        if not arg.startswith("--"):
            if arg.startswith("-") and arg != "-" and not _is_value(arg):
                return i, "a short or bare option", "write the flag's full --name from vLLM's CLI"
            # The modelled flags follow extra_args; a value with no flag of its own would be read
            # as the model, or extend a list flag (--allowed-media-domains took any bare host).
            return (
                i,
                "a value with no flag before it",
                "put it right after the flag it belongs to (e.g. --max-num-seqs 128)",
            )
        spelled = arg.partition("=")[0]
        name = _flag_name(arg)
        negated = spelled.lower().replace("_", "-").startswith("--no-")
        spec = VLLM_FLAGS.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, sorted(ALLOWED_EXTRA_FLAGS | set(VLLM_FLAGS)))
            hint = f"did you mean {close[0]}?" if close else "remove it from extra_args"
            return i, f"{name} is not a `vllm serve` flag in vLLM {VLLM_VERSION}", hint
        if name not in ALLOWED_EXTRA_FLAGS:
            return (
                i,
                f"{name} is not on the extra_args allow-list (flags that load code, open ports, "
                "read files or change who may call are kept out)",
                "remove it, or add it to ALLOWED_EXTRA_FLAGS in tpudeploy/config/serveflags.py "
                "with the reason it is safe",
            )
        if negated and not spec.get("negatable"):
            return i, f"vLLM has no --no- form of {name}", f"remove it, or write {name}"
        takes = bool(spec.get("value")) and not negated
        # --x.key=v and --x.key v set one key of a JSON table: vLLM's FlexibleArgumentParser
        # takes the one value after it and passes --x '{"key": v}' on to argparse
        # (vllm/utils/argparse_utils.py, parse_args), which no option with choices accepts.
        dotted = "." in spelled
        if dotted and spec.get("choices"):
            return (
                i,
                f"{name} takes one of {', '.join(spec['choices'])}, and vLLM reads {spelled} as a "
                "JSON table, which is none of them",
                f"write {name} VALUE",
            )
        if "=" in arg:
            if not takes:
                return i, f"{name} takes no value", f"write {name} alone"
            problem = _value_problem(name, spec, [arg.partition("=")[2]])
            if problem:
                return i, problem, "use one of the listed values"
            i += 1
            continue
        nargs = None if dotted else spec.get("nargs")
        values: list[str] = []
        j = i + 1
        while j < len(v) and _is_value(v[j]) and takes:
            values.append(v[j])
            j += 1
            if nargs is None or (isinstance(nargs, int) and len(values) == nargs):
                break
        if takes and not values:
            return i, f"{name} needs a value", f"put its value in the next item ({name} VALUE)"
        # tools/vllm_flags.py writes a whole number for an option of fixed arity (a tuple of
        # N); argparse refuses it with fewer ("expected N arguments").
        if isinstance(nargs, int) and len(values) < nargs:
            return i, f"{name} takes {nargs} values, not {len(values)}", f"give it {nargs}"
        problem = _value_problem(name, spec, values)
        if problem:
            return i, problem, "use one of the listed values"
        i = j
    return None


def check_extra_args(v: tuple[str, ...]) -> tuple[str, ...]:
    """[vllm] extra_args: the first item that must not reach `vllm serve` (shown redacted):
    off the allow-list, unknown to the pinned vLLM, valued wrongly, or a value with no flag."""
    found = _flag_problems(v)
    if found:
        i, problem, fix = found
        raise ValueError(f"item {i}, {redact(v[i])!r}: {problem}; {fix}")
    return v


def served_model_name(model: str, extra_args: tuple[str, ...]) -> str:
    """The name clients send as "model": vLLM answers to the first --served-model-name when one
    is given (extra_args), else to the model id itself."""
    for i, arg in enumerate(extra_args):
        if _flag_name(arg) == "--served-model-name":
            if "=" in arg:
                return arg.partition("=")[2]
            if i + 1 < len(extra_args):
                return extra_args[i + 1]
    return model
