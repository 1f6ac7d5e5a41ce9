"""Reads vLLM's boot log on the node and judges it against the planner's prediction.

The build log's first lesson: verify from the boot allocation log, never from a flag being
accepted (fp8 KV gave 1.000x capacity while five signals said it worked). So the node reads the
lines the build log relies on -- `Memory statistics`, the KV block count and page size
(`Init kv-cache`, `Hybrid KV cache layout`), `num_kv_cache_groups`, `non-default args` -- and
the boot's phase timings, and publishes a short verdict (tpudeploy/boot-check guest attribute).

Embedded in the startup script (`python3 - EXPECTED TIMINGS < docker logs`) like
tpudeploy/cacheguard.py and imported by the tests, so it uses the standard library only and
keeps to Python 3.8. The expected values are rendered into the script by
tpudeploy/nodebuild.py from the planner and the build log's facts; this file holds only the
tolerances and the log formats.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timedelta

# ---- tolerances: a gap above these is a warning (docs/deploying.md, "Reproducible")
# The KV pool: the planner's block rounding was 0.06% off the build log's measurement
# (321,536 predicted, 321,344 measured); 1% is well above rounding and well below the 2x a
# working sliding window or int8 weight path would show.
KV_TOKENS_TOLERANCE = 0.01
# Memory statistics prints GiB to two decimals: two hundredths of slack for the rounding.
CAP_TOLERANCE_GIB = 0.02
# Weights: 0.05 GiB is more than rounding and far less than any change of weight format.
WEIGHTS_TOLERANCE_GIB = 0.05
# Resident weights under this share of the bf16 figure are what an int8 weight path looks like
# (half the bytes); the build log says to re-check for it on every image.
INT8_WEIGHTS_SHARE = 0.75
# Boot time: a quarter over the build log's cold or warm figure.
BOOT_TOLERANCE = 0.25

LEVELS = ("warning", "win", "note", "ok")

# ---- log formats (tpu-inference's runner/tpu_worker and kv_cache_manager, vLLM's serve CLI)
# vLLM's logger prefixes "INFO 08-16 20:24:55 [file.py:123] " (month-day, no year).
_STAMP = re.compile(r"^(?:\(\w+ pid=\d+\) )?[A-Z]+ (\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? ", re.M)
# Newer tpu-inference adds fields between them (kv_connector_hbm_reserve_gb=...): any `*_gb=`.
_MEMORY = re.compile(r"Memory statistics((?:\s*\|?\s*\w+_gb=[0-9.]+GiB)+)")
_MEMORY_FIELD = re.compile(r"total_hbm_(\w+?)_gb=([0-9.]+)GiB")
_LAYOUT = re.compile(
    r"Hybrid KV cache layout: num_kv_cache_groups=(\d+)(?:.*?kv_cache_config\.num_blocks=(\d+))?"
)
_INIT_KV = re.compile(r"Init kv-cache \|[^\n]*")
_NUM_BLOCKS = re.compile(r"num_blocks=\[(\d+)")
_SHAPE = re.compile(r"regular_attn_shape=\(num_blocks, \((\d+), (\d+), (\d+), (\d+)\)\)")
_KV_DTYPE = re.compile(r"regular_attn_dtype=(\w+)")
_KV_SIZE = re.compile(r"GPU KV cache size: ([0-9,]+) tokens")
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$", re.M)
_VERSION = re.compile(r"vLLM API server version (\S+)")
_READY = re.compile(r"Application startup complete")
# vLLM's "Initializing a V1 LLM engine (v%s) with config: %s" (v1/engine/core.py, VllmConfig)
_ENGINE = re.compile(r"with config: .*?\bdtype=(?:torch\.)?(\w+).*?\bquantization=(\w+)")


def top_level_keys(text: str) -> list[str]:
    """The keys of a Python dict repr, outer level only: vLLM logs `non-default args: {...}`
    with values that are not always literals (enums, objects), so no literal_eval."""
    keys: list[str] = []
    depth, i = 0, 0
    while i < len(text):
        c = text[i]
        if c in "'\"":
            end = i + 1
            while end < len(text) and text[end] != c:
                end += 2 if text[end] == "\\" else 1
            if depth == 1 and text[end + 1 : end + 2] == ":":
                keys.append(text[i + 1 : end])
            i = end + 1
            continue
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
        i += 1
    return keys


def _stamp_before(text: str, pos: int) -> datetime | None:
    """The timestamp of the last vLLM-stamped line starting at or before `pos` (uvicorn's
    "Application startup complete." has no stamp of its own)."""
    last = None
    for m in _STAMP.finditer(text, 0, pos + 1):
        last = m
    return datetime.strptime(last.group(1), "%m-%d %H:%M:%S") if last else None


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    if a is None or b is None:
        return None
    delta = b - a
    if delta < timedelta(0):  # the log has no year: a boot across New Year's Eve
        delta += timedelta(days=365)
    return delta.total_seconds()


def parse_log(text: str) -> dict[str, object]:
    """What the boot log says: memory budget, KV pool, cache groups, flags, version, timings."""
    out: dict[str, object] = {}
    memory = _MEMORY.search(text)
    if memory:
        fields = dict(_MEMORY_FIELD.findall(memory.group(1)))
        for name in ("limit", "limit_cap", "used", "avail"):
            if name in fields:
                out[f"hbm_{name}_gib"] = float(fields[name])
    layout = _LAYOUT.search(text)
    if layout:
        out["kv_cache_groups"] = int(layout.group(1))
        if layout.group(2):
            out["num_blocks"] = int(layout.group(2))
    init = _INIT_KV.search(text)
    if init:
        line = init.group(0)
        blocks, shape, dtype = _NUM_BLOCKS.search(line), _SHAPE.search(line), _KV_DTYPE.search(line)
        if blocks and "num_blocks" not in out:
            out["num_blocks"] = int(blocks.group(1))
        if shape:
            # (block_size, kv heads, 2 x K/V packing, head_dim): a first-wins sample of layer 0
            # (build log trap 4), so only the page size is read from it, never the geometry.
            out["block_size"] = int(shape.group(1))
            out["kv_shape"] = [int(g) for g in shape.groups()]
        if dtype:
            out["kv_dtype"] = dtype.group(1)
    if isinstance(out.get("num_blocks"), int) and isinstance(out.get("block_size"), int):
        out["kv_tokens"] = int(str(out["num_blocks"])) * int(str(out["block_size"]))
    size = _KV_SIZE.search(text)
    if size:
        out["kv_size_tokens"] = int(size.group(1).replace(",", ""))
    args = _NON_DEFAULT.search(text)
    if args:
        out["non_default_args"] = top_level_keys(args.group(1))
    version = _VERSION.search(text)
    if version:
        out["vllm_version"] = version.group(1)
    engine = _ENGINE.search(text)  # the weights' dtype and quantization, as the engine resolved
    if engine:
        out["weights_dtype"], quant = engine.groups()
        out.update({"quantization": quant} if quant != "None" else {})
    # Timings from the log's own stamps: weights load before the memory profile, compilation
    # after it (build log: 685 s of the 857 s cold boot is XLA compilation).
    first = _STAMP.search(text)
    t0 = datetime.strptime(first.group(1), "%m-%d %H:%M:%S") if first else None
    t_mem = _stamp_before(text, memory.start()) if memory else None
    ready = _READY.search(text)
    t_ready = _stamp_before(text, ready.start()) if ready else None
    load, compile_s = _seconds(t0, t_mem), _seconds(t_mem, t_ready)
    if load is not None:
        out["load_s"] = load
    if compile_s is not None:
        out["compile_s"] = compile_s
    return out


def _finding(level: str, check: str, text: str, meaning: str = "") -> dict[str, str]:
    return {"level": level, "check": check, "text": text, "meaning": meaning}


def _num(value: object) -> float:
    return float(str(value))


def _memory(m: dict[str, object], e: dict[str, object]) -> list[dict[str, str]]:
    if "hbm_limit_cap_gib" not in m or "hbm_used_gib" not in m:
        return [
            _finding(
                "warning",
                "memory",
                "no 'Memory statistics' line in vLLM's log",
                "this image reports its memory budget differently: the cap, the weights and "
                "the KV pool below are unverified (build log: only the allocation log tells "
                "the truth)",
            )
        ]
    out = []
    cap, want_cap = _num(m["hbm_limit_cap_gib"]), _num(e["cap_gib"])
    if abs(cap - want_cap) > CAP_TOLERANCE_GIB:
        out.append(
            _finding(
                "warning",
                "cap",
                f"memory cap {cap:.2f} GiB, planner {want_cap:.2f} GiB",
                "the runtime sees a different HBM size or applies gpu_memory_utilization "
                "differently: every KV and concurrency figure follows from the cap",
            )
        )
    else:
        out.append(_finding("ok", "cap", f"memory cap {cap:.2f} GiB (planner {want_cap:.2f})"))
    used, want = _num(m["hbm_used_gib"]), _num(e["weights_gib"])
    if used < want * INT8_WEIGHTS_SHARE:
        per_token = _num(e["bytes_per_token"])
        pool = int((cap - used) * 1024**3 // per_token)
        out.append(
            _finding(
                "win",
                "weights",
                f"weights {used:.2f} GiB against {want:.2f} GiB at bf16: a smaller weight "
                f"format is running (the build log's open win: int8 weights)",
                f"planner: the cap then holds {pool:,} KV tokens at {int(per_token):,} "
                f"B/token, {pool / _num(e['kv_tokens']):.2f}x today's "
                f"{int(_num(e['kv_tokens'])):,}; re-run the benchmark (make bench) and check "
                "output quality before relying on it",
            )
        )
    elif abs(used - want) > WEIGHTS_TOLERANCE_GIB:
        out.append(
            _finding(
                "warning",
                "weights",
                f"weights {used:.2f} GiB, build log {want:.2f} GiB",
                "this image loads the model differently: the KV pool the planner predicts "
                f"is off by {(want - used):+.2f} GiB",
            )
        )
    else:
        out.append(_finding("ok", "weights", f"weights {used:.2f} GiB (build log {want:.2f})"))
    return out


def _kv(m: dict[str, object], e: dict[str, object]) -> list[dict[str, str]]:
    out = []
    if "kv_tokens" not in m:
        return [
            _finding(
                "warning",
                "kv-pool",
                "no KV block count or page size in vLLM's log (Init kv-cache)",
                "the KV pool is unverified: make capacity's safe concurrency is a prediction",
            )
        ]
    tokens, want = int(_num(m["kv_tokens"])), int(_num(e["kv_tokens"]))
    text = (
        f"KV pool {m['num_blocks']:,} blocks x {m['block_size']} = {tokens:,} tokens, "
        f"planner {want:,} ({(tokens - want) / want:+.2%})"
    )
    if abs(tokens - want) > want * KV_TOKENS_TOLERANCE:
        out.append(
            _finding(
                "warning",
                "kv-pool",
                text,
                f"more than {KV_TOKENS_TOLERANCE:.0%} from the planner: make capacity's safe "
                "concurrency (clients x context) is off by that much; the image allocates KV "
                "differently (build log: a flag can be accepted and change nothing, fp8 gave "
                "1.000x)",
            )
        )
    else:
        out.append(_finding("ok", "kv-pool", text))
    if m.get("block_size") != e.get("block_size"):
        out.append(
            _finding(
                "warning",
                "block-size",
                f"KV page {m['block_size']} tokens, planner {e['block_size']}",
                "the backend no longer scales the page with max_model_len as the build log "
                "measured: blocks per request and the compiled bucket shapes change",
            )
        )
    if e.get("kv_dtype") and m.get("kv_dtype") and m["kv_dtype"] != e["kv_dtype"]:
        out.append(
            _finding(
                "warning",
                "kv-dtype",
                f"KV cache allocated as {m['kv_dtype']}, expected {e['kv_dtype']}",
                "the engine did not store KV in the type the config asks for",
            )
        )
    return out


def _groups(m: dict[str, object], e: dict[str, object]) -> list[dict[str, str]]:
    if "kv_cache_groups" not in m:
        return [_finding("note", "kv-groups", "no 'Hybrid KV cache layout' line in vLLM's log")]
    groups = int(_num(m["kv_cache_groups"]))
    if groups <= 1:
        return [
            _finding(
                "ok",
                "kv-groups",
                "num_kv_cache_groups=1: sliding windows still off, as in the build log",
            )
        ]
    w = e.get("windowed") or {}
    assert isinstance(w, dict)
    figures = (
        f"planner: windowing the sliding layers holds {w['ratio']:.2f}x the KV of full-length "
        f"caches at {w['context']:,}-token context ({w['clients_now']} -> "
        f"{w['clients_windowed']} concurrent requests of that length)"
        if w
        else "planner: the sliding layers then cache their window only"
    )
    return [
        _finding(
            "win",
            "kv-groups",
            f"num_kv_cache_groups={groups}: sliding windows reached (the build log's largest "
            "open win)",
            figures + "; re-run the benchmark (make bench) to measure it",
        )
    ]


def _flags(m: dict[str, object], e: dict[str, object]) -> list[dict[str, str]]:
    reported = m.get("non_default_args")
    if not isinstance(reported, list):
        return [_finding("note", "flags", "no 'non-default args' line in vLLM's log")]
    rendered = [str(a) for a in e.get("rendered_args") or []]  # type: ignore[attr-defined]
    no_ops = [str(a) for a in e.get("no_op_args") or []]  # type: ignore[attr-defined]
    out = []
    moved = [a for a in no_ops if a in reported]
    if moved:
        out.append(
            _finding(
                "warning",
                "flags",
                "vLLM reports " + ", ".join(f"--{a.replace('_', '-')}" for a in moved) + " as "
                "non-default",
                "the build log confirmed these restate vLLM's defaults; in this image the "
                "default moved, so the flag now changes what runs: compare the memory lines",
            )
        )
    else:
        out.append(
            _finding(
                "ok",
                "flags",
                "restated defaults confirmed no-ops: "
                + ", ".join(f"--{a.replace('_', '-')}" for a in no_ops),
            )
        )
    quiet = [a for a in rendered if a not in reported and a not in no_ops]
    if quiet:
        out.append(
            _finding(
                "note",
                "flags",
                "rendered but reported as defaults: "
                + ", ".join(f"--{a.replace('_', '-')}" for a in quiet),
            )
        )
    extra = [a for a in reported if a not in rendered]
    if extra:
        out.append(
            _finding("note", "flags", "non-default without a rendered flag: " + ", ".join(extra))
        )
    return out


def _boot(t: dict[str, object], m: dict[str, object], e: dict[str, object]) -> list[dict[str, str]]:
    if "vllm_s" not in t:
        return [_finding("note", "boot", "vLLM was already running: no boot timing this time")]
    warm = t.get("cache") in ("hit", "local")
    want = _num(e["warm_s"] if warm else e["cold_s"])
    took = _num(t["vllm_s"])
    kind = "warm" if warm else "cold"
    parts = [f"{kind} boot {took:.0f} s to ready, build log {want:.0f} s"]
    if "pull_s" in t:
        parts.append(f"pull {_num(t['pull_s']):.0f} s")
    if "load_s" in m:
        parts.append(f"download+load {_num(m['load_s']):.0f} s")
    if "compile_s" in m:
        parts.append(
            f"compile {_num(m['compile_s']):.0f} s (build log cold {_num(e['compile_s']):.0f} s)"
        )
    text = "; ".join(parts)
    if took > want * (1 + BOOT_TOLERANCE):
        meaning = (
            f"more than {BOOT_TOLERANCE:.0%} slower than the build log's {kind} boot: a "
            "preemption costs more than make cost assumes"
        )
        if not warm:
            meaning += (
                f" (compile cache: {t.get('cache', 'off')}; a warm boot takes "
                f"{_num(e['warm_s']):.0f} s)"
            )
        return [_finding("warning", "boot", text, meaning)]
    return [_finding("ok", "boot", text)]


def check(
    measured: dict[str, object], expected: dict[str, object], timings: dict[str, object]
) -> list[dict[str, str]]:
    """Findings, warnings and wins first; each says what was seen against what and why it
    matters."""
    found = _memory(measured, expected) + _kv(measured, expected) + _groups(measured, expected)
    found += _flags(measured, expected) + _boot(timings, measured, expected)
    return sorted(found, key=lambda f: LEVELS.index(f["level"]))


def report(log: str, expected: dict[str, object], timings: dict[str, object]) -> dict[str, object]:
    """What the node publishes: the measurements, the timings and the findings."""
    measured = parse_log(log)
    findings = check(measured, expected, timings)
    warnings = sum(1 for f in findings if f["level"] == "warning")
    wins = sum(1 for f in findings if f["level"] == "win")
    verdict = "matches the planner and the build log"
    if warnings or wins:
        verdict = f"{warnings} warning(s), {wins} open win(s) reached"
    return {"verdict": verdict, "measured": measured, "timings": timings, "findings": findings}


# Distributions to ask the image for, first name found wins (names changed across releases).
VERSION_SOURCES = (
    ("vllm", ("vllm", "vllm-tpu")),
    ("tpu-inference", ("tpu-inference", "tpu_inference")),
    ("jax", ("jax",)),
    ("jaxlib", ("jaxlib",)),
    ("libtpu", ("libtpu", "libtpu-nightly")),
)
REPO_DIGEST = re.compile(r"^[a-z0-9][^@\s]*@sha256:[0-9a-f]{64}$")
_NGINX = re.compile(r"nginx/(\S+)")


def versions() -> dict[str, str]:
    """Run inside the serving container (`docker exec -i C python3 - versions`): the versions
    of vLLM and its TPU stack that the image's own Python reports."""
    from importlib import metadata

    out = {}
    for key, names in VERSION_SOURCES:
        for name in names:
            try:
                out[key] = metadata.version(name)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def build(
    log: str,
    image: str,
    digest: str,
    versions_json: str,
    proxy_image: str,
    proxy_digest: str,
    nginx: str,
) -> dict[str, object]:
    """The tpudeploy/build attribute: each image's reference, its RepoDigest (never the image
    ID, a config-blob digest `docker pull` refuses) and the versions it reports. vLLM's own
    version falls back to its log's "vLLM API server version" line."""
    try:
        found = json.loads(versions_json) if versions_json else {}
    except ValueError:
        found = {}
    vllm = {str(k): str(v) for k, v in (found if isinstance(found, dict) else {}).items() if v}
    if "vllm" not in vllm:
        logged = _VERSION.search(log)
        if logged:
            vllm["vllm"] = logged.group(1)
    proxy = {}
    seen = _NGINX.search(nginx)
    if seen:
        proxy["nginx"] = seen.group(1)
    return {
        "vllm": {
            "image": image,
            "digest": digest if REPO_DIGEST.match(digest) else "",
            "versions": vllm,
        },
        "proxy": {
            "image": proxy_image,
            "digest": proxy_digest if REPO_DIGEST.match(proxy_digest) else "",
            "versions": proxy,
        },
    }


def _print_findings(result: dict[str, object]) -> None:
    for f in result["findings"]:  # type: ignore[attr-defined]
        meaning = f" -- {f['meaning']}" if f["meaning"] else ""
        print(f"boot check {f['level']}: {f['text']}{meaning}", file=sys.stderr)


def main(argv: list[str]) -> int:
    """versions | build IMAGE DIGEST VERSIONS PROXY_IMAGE PROXY_DIGEST NGINX | check EXPECTED
    TIMINGS; build and check read vLLM's log on stdin and print one JSON line."""
    command = argv[0] if argv else ""
    if command == "versions" and len(argv) == 1:
        result: dict[str, object] = dict(versions())
    elif command == "build" and len(argv) == 7:
        result = build(sys.stdin.read(), *argv[1:])
    elif command == "check" and len(argv) == 3:
        result = report(sys.stdin.read(), json.loads(argv[1]), json.loads(argv[2]))
        _print_findings(result)
    else:
        print("usage: python3 - versions | build ... | check EXPECTED TIMINGS", file=sys.stderr)
        return 2
    print(json.dumps(result, separators=(",", ":"), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
