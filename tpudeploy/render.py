"""Renders the node's boot scripts from templates/ with every value shell-quoted."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jinja2

from tpudeploy.config import DeployConfig, VllmConfig

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"


def vllm_serve_args(v: VllmConfig) -> list[str]:
    """The seed's `vllm serve` command line, from the config (secrets never appear here)."""
    args = [
        "vllm",
        "serve",
        v.model,
        "--port",
        str(v.port),
        # The next three restate defaults; the seed keeps them for auditability because the real
        # defaults are computed several layers away from where they look declared.
        "--dtype",
        v.dtype,
        "--kv-cache-dtype",
        v.kv_cache_dtype,
        "--max-model-len",
        str(v.max_model_len),
        "--max-num-batched-tokens",
        str(v.max_num_batched_tokens),
        "--tensor-parallel-size",
        str(v.tensor_parallel_size),
        "--gpu-memory-utilization",
        f"{v.gpu_memory_utilization:g}",
    ]
    if v.enable_prefix_caching:
        args.append("--enable-prefix-caching")
    if v.disable_chunked_mm_input:
        args.append("--disable-chunked-mm-input")
    if v.limit_mm_per_prompt:
        args += ["--limit-mm-per-prompt", json.dumps(v.limit_mm_per_prompt, separators=(",", ":"))]
    if v.enable_auto_tool_choice:
        args.append("--enable-auto-tool-choice")
    args += ["--tool-call-parser", v.tool_call_parser, "--reasoning-parser", v.reasoning_parser]
    args += list(v.extra_args)
    return args


def _argv_lines(argv: list[str]) -> list[str]:
    """Group argv into shell-quoted lines, one flag (with its values) per line, for readability."""
    lines: list[list[str]] = []
    for arg in argv:
        if not lines or arg.startswith("--"):
            lines.append([])
        lines[-1].append(shlex.quote(arg))
    return [" ".join(line) for line in lines]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701 - shell scripts, not HTML; values go through |q instead
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return env


def render_startup_script(cfg: DeployConfig) -> str:
    """The startup script stored in the node's metadata: ids of secrets, never their values."""
    v = cfg.vllm
    return (
        _environment()
        .get_template("startup.sh.j2")
        .render(
            deployment=cfg.name,
            hf_token_secret_id=cfg.hf_token_secret_id,
            image=v.image,
            container_name=v.container_name,
            shm_size=v.shm_size,
            port=v.port,
            container_env=v.tpu_inference_env(),
            serve_lines=_argv_lines(vllm_serve_args(v)),
        )
    )


def node_metadata(cfg: DeployConfig) -> dict[str, str]:
    """The node's metadata, shared by the VM and flex-start paths: the boot script, and OS Login
    so that no project-wide SSH keys apply."""
    return {
        "startup-script": render_startup_script(cfg),
        "enable-oslogin": "TRUE",
        "block-project-ssh-keys": "TRUE",
    }
