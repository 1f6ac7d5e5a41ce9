"""vLLM boot logs for the boot check (tpudeploy/bootcheck.py) and the sandbox's stand-in docker.

The figures are the build log's own (/work/shared/seed/gemma4-v5e-build-log.md, the copy of
https://dev.to/gde/self-hosting-a-lite-agent-backend-on-one-tpu-gemma-4-e2b-vllm-on-a-v5e-1-fk1):

- `Memory statistics | total_hbm_limit_gb=15.75GiB | total_hbm_limit_cap_gb=14.49GiB
  | total_hbm_used_gb=8.97GiB | total_hbm_avail_gb=5.52GiB`: quoted in its quick-start section
  ("You want to see this, which is the whole memory budget in one line"); the log prints it on
  one line, the build log wraps it for the page.
- `block_size 64 x 5,021 blocks = 321,344 tokens` and `regular_attn_shape=(num_blocks, (64, 1,
  2, 256))`: the final configuration table and "fp8 KV was re-verified on this exact build".
- `Hybrid KV cache layout: num_kv_cache_groups=1`: "There's a fifth I haven't been able to fix".
- `--dtype`, `--kv-cache-dtype`, `--gpu-memory-utilization` absent from `non-default args`:
  the final configuration ("confirmed no-ops by vLLM itself").
- cold boot 857 s of which compile 685 s: the final configuration table; vLLM
  `0.26.1rc1.dev125+ga7a204cc6`: "Setup under test".

The build log quotes values, not whole lines; the rest of each line (the logger prefix, the
`Init kv-cache` and `Hybrid KV cache layout` fields) is tpu-inference's format as a public
v5e boot log prints it (`[kv_cache_manager.py:958] Hybrid KV cache layout: num_kv_cache_groups=1,
num_kv_cache_tensors=26, kv_cache_config.num_blocks=15912, ...`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tpudeploy import facts

VERSION = "0.26.1rc1.dev125+ga7a204cc6"
BLOCKS = 5021
BLOCK_SIZE = 64
COLD_BOOT_S = 857
COMPILE_S = 685
START = datetime(2026, 8, 9, 10, 0, 0)
# What the image's Python reports (`docker exec -i C python3 - versions`). Only vLLM's version is
# the build log's; it names no tpu-inference, JAX or libtpu versions, so these are stand-ins.
IMAGE_VERSIONS = {
    "vllm": VERSION,
    "tpu-inference": "0.26.0.dev20260808",
    "jax": "0.7.2",
    "jaxlib": "0.7.2",
    "libtpu": "0.0.21",
}
NGINX_V = (
    f"nginx version: nginx/{facts.PROXY_NGINX_VERSION}\n"  # `nginx -v` of the pinned proxy (stderr)
)

# What vLLM prints for the rendered default line: the seed's flags (less the three no-ops, and
# --port 8000 / --tensor-parallel-size 1, vLLM's defaults) plus this project's --host and
# --allowed-media-domains.
NON_DEFAULT_ARGS = (
    "{'model_tag': 'google/gemma-4-E2B-it', 'host': '127.0.0.1', 'max_model_len': 32768, "
    "'max_num_batched_tokens': 4096, 'enable_prefix_caching': True, "
    "'disable_chunked_mm_input': True, 'limit_mm_per_prompt': {'image': 4, 'audio': 1}, "
    "'enable_auto_tool_choice': True, 'tool_call_parser': 'gemma4', 'reasoning_parser': "
    "'gemma4', 'allowed_media_domains': ['media-urls-disabled.invalid']}"
)


def _stamp(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%m-%d %H:%M:%S")


def vllm_log(
    *,
    blocks: int = BLOCKS,
    block_size: int = BLOCK_SIZE,
    groups: int = 1,
    used_gib: float = 8.97,
    avail_gib: float = 5.52,
    cap_gib: float = 14.49,
    kv_dtype: str = "bfloat16",
    boot_s: float = COLD_BOOT_S,
    compile_s: float = COMPILE_S,
    non_default_args: str = NON_DEFAULT_ARGS,
    weights_dtype: str = "bfloat16",
    quantization: str = "None",
    speculative_config: str = "None",
) -> str:
    """The boot's log as `docker logs` shows it; the defaults are the build log's boot."""
    memory_at = boot_s - compile_s
    layers = ", ".join([str(blocks)] * 15)
    lines = [
        (0, "api_server.py:1825", f"vLLM API server version {VERSION}"),
        (0, "utils.py:233", f"non-default args: {non_default_args}"),
        # vLLM's engine line (vllm/v1/engine/core.py logs VllmConfig.__str__), its first fields.
        (
            0,
            "core.py:93",
            f"Initializing a V1 LLM engine (v{VERSION}) with config: model='{facts.MODEL}', "
            f"speculative_config={speculative_config}, tokenizer='{facts.MODEL}', "
            "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
            f"trust_remote_code=False, dtype=torch.{weights_dtype}, max_seq_len=32768, "
            "download_dir=None, load_format=auto, tensor_parallel_size=1, "
            f"pipeline_parallel_size=1, data_parallel_size=1, quantization={quantization}, "
            "enforce_eager=False, kv_cache_dtype=auto, device_config=None",
        ),
        (
            memory_at,
            "tpu_worker.py:291",
            f"Memory statistics | total_hbm_limit_gb=15.75GiB | total_hbm_limit_cap_gb="
            f"{cap_gib}GiB | total_hbm_used_gb={used_gib}GiB | total_hbm_avail_gb={avail_gib}GiB",
        ),
        (
            memory_at,
            "kv_cache_manager.py:958",
            f"Hybrid KV cache layout: num_kv_cache_groups={groups}, num_kv_cache_tensors=15, "
            f"kv_cache_config.num_blocks={blocks}, duplicate_shared_layers=False",
        ),
        (
            memory_at,
            "kv_cache_manager.py:986",
            f"Init kv-cache | num_total_layers=15 | num_blocks=[{layers}] | "
            f"regular_attn_layers=15 | regular_attn_shape=(num_blocks, ({block_size}, 1, 2, "
            f"256)) | regular_attn_dtype={kv_dtype} | hbm=[({cap_gib}, 15.75)]Gb",
        ),
        (memory_at, "kv_cache_utils.py:1087", f"GPU KV cache size: {blocks * block_size:,} tokens"),
        (boot_s, "launcher.py:39", "Route: /health, Methods: GET"),
    ]
    text = "".join(f"INFO {_stamp(at)} [{where}] {text}\n" for at, where, text in lines)
    # uvicorn's own line, without vLLM's stamp: the boot check times it by the line before.
    return text + "INFO:     Application startup complete.\n"
