"""Build and run the `vllm bench serve` sweep on the node over IAP SSH, one cell at a time."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TextIO

from tpudeploy import facts, seed_sweep
from tpudeploy.timefmt import format_seconds

MODEL = facts.MODEL
CONTAINER = "vllm-gemma4"
# The seed's max-model-len; a cell whose prompt + output exceeds it would be refused per request.
MAX_MODEL_LEN = facts.MAX_MODEL_LEN
# Inside the container: the serving image ships vLLM's own client, and the container's HF_HOME
# already holds the tokenizer the server loaded, so nothing is downloaded to benchmark.
RESULT_DIR_IN_CONTAINER = "/tmp/tpudeploy-bench"  # noqa: S108 - container-private scratch
RESULT_KEYS = ("completed", "num_prompts", "output_throughput", "median_ttft_ms", "median_tpot_ms")
# `--metadata KEY=VALUE` pairs land at the top level of the saved result, before vLLM's own keys,
# which overwrite a pair of the same name (vllm/benchmarks/serve.py): hence the prefix. The
# report reads each run's cell and origin from these, never from the file's name.
META_CONTEXT = "tpudeploy_context"
META_CLIENTS = "tpudeploy_clients"
META_REP = "tpudeploy_rep"
META_CONFIG = "tpudeploy_config"
META_IMAGE = "tpudeploy_image"
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")

# The script `sh -c` runs inside the container. The API key arrives as the first line of stdin
# (ssh -> docker exec -i) so it is never an argument anywhere; `vllm bench serve` reads
# OPENAI_API_KEY from its environment for the openai backends (endpoint_request_func._get_headers).
# The benchmark's chatter goes to stderr so that stdout carries only the result JSON back.
_IN_CONTAINER_SCRIPT = (
    'result="$1"; shift; IFS= read -r OPENAI_API_KEY; export OPENAI_API_KEY; '
    '"$@" >&2 && cat "$result"'
)


class BenchConfigError(ValueError):
    """A `[bench]` setting is invalid; the message names the key, the value and the fix."""


class SweepError(RuntimeError):
    """The sweep cannot continue; the message says what failed and what to do."""


@dataclass(frozen=True)
class SweepSettings:
    """What to measure: the grid, repetitions and request shape (defaults: the seed's sweep)."""

    contexts: tuple[int, ...] = seed_sweep.CONTEXTS
    clients: tuple[int, ...] = seed_sweep.CLIENTS
    repetitions: int = seed_sweep.REPETITIONS
    output_len: int = 256
    # num_prompts = max(clients * prompts_per_client, min_prompts): every client sends several
    # requests, so the cell is measured in steady state rather than during ramp-up and drain.
    prompts_per_client: int = 8
    min_prompts: int = 32
    model: str = MODEL
    container: str = CONTAINER
    host: str = "127.0.0.1"
    port: int = 8000
    save_detailed: bool = False
    # Which server the sweep measures: the compile-cache key of the deployment's serving config
    # (image, accelerator, runtime, every `vllm serve` flag and container variable), so results
    # of two configs in one directory are never averaged together. None without a config file.
    config_hash: str | None = None

    def num_prompts(self, clients: int) -> int:
        return max(clients * self.prompts_per_client, self.min_prompts)


PROFILES: Mapping[str, SweepSettings] = {
    "full": SweepSettings(),
    "quick": SweepSettings(contexts=(128, 1024), clients=(1, 16), repetitions=1),
}


@dataclass(frozen=True)
class Cell:
    """One `vllm bench serve` run: a grid point and its repetition (1-based)."""

    context: int
    clients: int
    rep: int
    seed: int

    @property
    def filename(self) -> str:
        # For people and for resuming a sweep; the report reads the cell from the --metadata
        # pairs inside the file (bench_argv), so renamed files still report correctly.
        return f"ctx{self.context}-c{self.clients}-r{self.rep}.json"

    @property
    def stem(self) -> str:
        return self.filename.removesuffix(".json")


@dataclass(frozen=True)
class NodeTarget:
    """Where the serving container runs, reached with `gcloud compute tpus tpu-vm ssh`."""

    name: str
    zone: str
    project: str | None = None


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: bytes
    stderr: bytes


class Executor(Protocol):
    def __call__(self, argv: Sequence[str], *, stdin: bytes) -> ExecResult: ...


def subprocess_executor(argv: Sequence[str], *, stdin: bytes) -> ExecResult:
    """Run argv locally, feeding `stdin` and capturing both output streams."""
    done = subprocess.run(list(argv), input=stdin, capture_output=True, check=False)
    return ExecResult(done.returncode, done.stdout, done.stderr)


# --- settings -------------------------------------------------------------------------------

_INT_KEYS = ("repetitions", "output_len", "prompts_per_client", "min_prompts", "port")
_LIST_KEYS = ("contexts", "clients")
_STR_KEYS = ("model", "container", "host")
_KNOWN_KEYS = frozenset(_INT_KEYS + _LIST_KEYS + _STR_KEYS + ("save_detailed", "profile", "quick"))


def _positive_int(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BenchConfigError(f"bench.{key}: {value!r} is not a positive whole number; set e.g. 1")
    return value


def _apply(base: SweepSettings, table: Mapping[str, Any], prefix: str) -> SweepSettings:
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise BenchConfigError(
            f"{prefix}.{unknown[0]}: unknown key; known keys are {', '.join(sorted(_KNOWN_KEYS))}"
        )
    changes: dict[str, Any] = {}
    for key in _INT_KEYS:
        if key in table:
            changes[key] = _positive_int(key, table[key])
    for key in _LIST_KEYS:
        if key in table:
            values = table[key]
            if not isinstance(values, list) or not values:
                raise BenchConfigError(
                    f"{prefix}.{key}: {values!r} must be a non-empty list, e.g. [1, 4, 16, 64]"
                )
            ints = tuple(_positive_int(key, v) for v in values)
            if len(set(ints)) != len(ints):
                raise BenchConfigError(
                    f"{prefix}.{key}: {values!r} repeats a value; list each once"
                )
            changes[key] = tuple(sorted(ints))
    for key in _STR_KEYS:
        if key in table:
            if not isinstance(table[key], str) or not table[key].strip():
                raise BenchConfigError(f"{prefix}.{key}: {table[key]!r} must be a non-empty string")
            changes[key] = table[key]
    if "save_detailed" in table:
        if not isinstance(table["save_detailed"], bool):
            raise BenchConfigError(
                f"{prefix}.save_detailed: {table['save_detailed']!r} must be true or false"
            )
        changes["save_detailed"] = table["save_detailed"]
    return replace(base, **changes)


def settings_from_table(
    table: Mapping[str, Any] | None,
    *,
    profile: str | None = None,
    max_model_len: int = MAX_MODEL_LEN,
) -> tuple[str, SweepSettings]:
    """Return (profile, settings) from a `[bench]` config table; `profile` overrides the table's.

    `full` takes `[bench]` over the seed's sweep; `quick` takes `[bench.quick]` over the quick
    defaults, sharing the request shape (output_len, prompts, model, container) with `[bench]`.
    """
    table = dict(table or {})
    chosen = profile or table.get("profile", "full")
    if chosen not in PROFILES:
        raise BenchConfigError(
            f"bench.profile: {chosen!r} is not a profile; use one of {', '.join(PROFILES)}"
        )
    quick = table.pop("quick", {})
    table.pop("profile", None)
    if not isinstance(quick, Mapping):
        raise BenchConfigError(f"bench.quick: {quick!r} must be a table ([bench.quick])")
    settings = _apply(PROFILES["full"], table, "bench")
    if chosen == "quick":
        shared = {k: v for k, v in table.items() if k not in (*_LIST_KEYS, "repetitions")}
        settings = _apply(_apply(PROFILES["quick"], shared, "bench"), quick, "bench.quick")
    longest = max(settings.contexts) + settings.output_len
    if longest > max_model_len:
        raise BenchConfigError(
            f"bench.contexts: {max(settings.contexts)} + output_len {settings.output_len} = "
            f"{longest} tokens exceeds max-model-len {max_model_len}; the server would refuse "
            "every request of that cell. Lower the context or output_len."
        )
    return chosen, settings


# --- pure command construction ----------------------------------------------------------------


def plan_cells(settings: SweepSettings, *, base_seed: int) -> list[Cell]:
    """Every run of the sweep in order, each with its own `--seed`.

    A repeated seed replays identical prompts and prefix caching would serve them from cache;
    random prompts of the same seed also share prefixes across contexts. So every run gets
    base_seed + its index; with base_seed = the start time in seconds, consecutive sweeps on
    the same server never reuse a seed, since every run lasts longer than one second.
    """
    cells: list[Cell] = []
    for rep in range(1, settings.repetitions + 1):
        for context in settings.contexts:
            for clients in settings.clients:
                cells.append(Cell(context, clients, rep, base_seed + len(cells)))
    return cells


def bench_argv(
    settings: SweepSettings, cell: Cell, *, result_dir: str, image_id: str | None = None
) -> list[str]:
    """The `vllm bench serve` argv for one cell (runs inside the serving container).

    Every value on it is public: a process list or a log line may show it (no key, no token).
    """
    # max_concurrency alone cannot tell contexts apart, and total_input_tokens / completed is
    # only an estimate: the cell, its repetition and the server measured travel in the result.
    metadata = [f"{META_CONTEXT}={cell.context}", f"{META_CLIENTS}={cell.clients}"]
    metadata.append(f"{META_REP}={cell.rep}")
    if settings.config_hash:
        metadata.append(f"{META_CONFIG}={settings.config_hash}")
    if image_id:
        metadata.append(f"{META_IMAGE}={image_id}")
    argv = [
        "vllm", "bench", "serve",
        "--backend", "openai-chat",
        # The upstream default /v1/completions returns "" on -it models (seed).
        "--endpoint", "/v1/chat/completions",
        "--host", settings.host,
        "--port", str(settings.port),
        "--model", settings.model,
        "--dataset-name", "random",
        "--random-input-len", str(cell.context),
        "--random-output-len", str(settings.output_len),
        # Fixed output length per request: tokens/s compare across cells and runs.
        "--ignore-eos",
        "--max-concurrency", str(cell.clients),
        "--num-prompts", str(settings.num_prompts(cell.clients)),
        "--seed", str(cell.seed),
        "--save-result",
        "--result-dir", result_dir,
        "--result-filename", cell.filename,
        "--metadata", *metadata,
        "--disable-tqdm",
    ]  # fmt: skip
    if settings.save_detailed:
        argv.append("--save-detailed")
    return argv


def cell_command(
    settings: SweepSettings,
    cell: Cell,
    *,
    run_id: str,
    target: NodeTarget | None,
    image_id: str | None = None,
) -> list[str]:
    """The local argv that runs one cell on the node and prints its result JSON on stdout."""
    result_dir = f"{RESULT_DIR_IN_CONTAINER}/{run_id}"
    inner = bench_argv(settings, cell, result_dir=result_dir, image_id=image_id)
    on_node = [
        "sudo", "docker", "exec", "-i", settings.container,
        "sh", "-c", _IN_CONTAINER_SCRIPT, "sh", f"{result_dir}/{cell.filename}", *inner,
    ]  # fmt: skip
    return over_ssh(on_node, target)


def image_info_command(settings: SweepSettings, target: NodeTarget | None) -> list[str]:
    """The argv printing image ref, image id, repo digests and vLLM version of the container."""
    c = shlex.quote(settings.container)
    # The seed: `docker images`' sha256 is a config-blob id, not a pullable manifest digest,
    # and the vLLM version string embeds the git SHA the build shipped; record all three.
    script = (
        f"sudo docker inspect --format '{{{{.Config.Image}}}}' {c} && "
        f"id=$(sudo docker inspect --format '{{{{.Image}}}}' {c}) && echo \"$id\" && "
        "sudo docker image inspect --format '{{json .RepoDigests}}' \"$id\" && "
        f"sudo docker exec {c} vllm --version"
    )
    return over_ssh(["sh", "-c", script], target)


def over_ssh(command: Sequence[str], target: NodeTarget | None) -> list[str]:
    """Wrap a node-side argv in `gcloud compute tpus tpu-vm ssh` (None: already on the node)."""
    if target is None:
        return list(command)
    argv = ["gcloud", "compute", "tpus", "tpu-vm", "ssh", target.name, "--zone", target.zone]
    if target.project:
        argv += ["--project", target.project]
    return [
        *argv,
        "--tunnel-through-iap",
        "--quiet",
        # No pseudo-terminal: a remote tty would echo the key read from stdin into the output.
        "--ssh-flag=-T",
        "--command",
        shlex.join(command),
    ]


# --- time estimates -------------------------------------------------------------------------


def expected_seconds(settings: SweepSettings, cell: Cell) -> float:
    """A prior for one cell's duration: its output tokens over the seed's throughput there."""
    tok_s = seed_sweep.AGGREGATE_TOK_S.get((cell.context, cell.clients))
    if tok_s is None:
        # Off the seed's grid: ~120 tok/s per stream up to the ~1,500 tok/s the chip peaked at.
        tok_s = min(120.0 * cell.clients, 1500.0)
    return settings.num_prompts(cell.clients) * settings.output_len / tok_s


# --- the runner -----------------------------------------------------------------------------


@dataclass
class _Progress:
    total_expected: float
    out: TextIO
    clock: Callable[[], float]
    started: float = 0.0
    done_expected: float = 0.0
    done_count: int = 0
    skipped: list[str] = field(default_factory=list)

    def remaining(self) -> float:
        left = self.total_expected - self.done_expected
        elapsed = self.clock() - self.started
        if self.done_expected <= 0 or elapsed <= 0:
            return left
        # Calibrate the seed-based prior by how fast this node has gone so far.
        return left * elapsed / self.done_expected


def _redact(data: bytes, secret: str) -> bytes:
    return data.replace(secret.encode(), b"<redacted>") if secret else data


def _check_result(raw: bytes, cell: Cell) -> dict[str, Any]:
    try:
        result = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are
        raise SweepError(
            f"{cell.filename}: the node returned no valid result JSON ({str(exc)[:80]}); see "
            f"logs/{cell.stem}.log and check `vllm bench serve` runs in the container"
        ) from None
    missing = [key for key in RESULT_KEYS if key not in result] if isinstance(result, dict) else []
    if not isinstance(result, dict) or missing:
        raise SweepError(
            f"{cell.filename}: result JSON lacks {', '.join(missing) or 'an object'}; "
            "the image's `vllm bench serve` may predate these keys: update the image"
        )
    return result


def read_image_info(
    settings: SweepSettings, target: NodeTarget | None, executor: Executor
) -> dict[str, Any]:
    done = executor(image_info_command(settings, target), stdin=b"")
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or len(lines) < 4:
        where = f"node {target.name} ({target.zone})" if target else "this machine"
        raise SweepError(
            f"container {settings.container!r} is not running on {where}: "
            f"{done.stderr.decode(errors='replace').strip()[-300:] or 'no output'}; "
            "deploy and wait for ready first (or pass --container NAME)"
        )
    if not IMAGE_ID.fullmatch(lines[1]):
        raise SweepError(
            f"container {settings.container!r}: docker reported image id {lines[1][:80]!r}, not "
            "sha256:<64 hex>; check `sudo docker inspect` on the node"
        )
    try:
        digests = json.loads(lines[2])
    except json.JSONDecodeError:
        digests = [lines[2]]
    return {
        "image": lines[0],
        "image_id": lines[1],
        "repo_digests": digests,
        "vllm_version": lines[-1],
    }


def run_sweep(
    settings: SweepSettings,
    *,
    out_dir: Path,
    target: NodeTarget | None,
    executor: Executor = subprocess_executor,
    api_key: str = "",
    profile: str = "full",
    config_path: Path | None = None,
    base_seed: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    progress: TextIO = sys.stderr,
) -> Path:
    """Run every cell, saving vLLM's raw result JSON plus metadata.json into `out_dir`.

    Re-running into the same directory resumes: cells whose file exists are skipped and the
    recorded base seed is reused, so the finished runs keep their seeds.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(exist_ok=True)
    meta_path = out_dir / "metadata.json"
    previous: dict[str, Any] = {}
    if meta_path.exists():
        previous = json.loads(meta_path.read_text())
    if base_seed is None:
        base_seed = int(previous.get("base_seed", int(time.time())))
    run_id = str(previous.get("run_id", out_dir.resolve().name))

    image = read_image_info(settings, target, executor)
    cells = plan_cells(settings, base_seed=base_seed)
    if config_path is not None:
        shutil.copyfile(config_path, out_dir / f"config{config_path.suffix}")
    metadata: dict[str, Any] = {
        "tool": "tpudeploy.bench",
        "run_id": run_id,
        "profile": profile,
        "started": previous.get("started", datetime.now(UTC).isoformat(timespec="seconds")),
        "finished": None,
        "node": asdict(target) if target else "local",
        "base_seed": base_seed,
        "settings": asdict(settings),
        "num_prompts": {str(c): settings.num_prompts(c) for c in settings.clients},
        "config_file": f"config{config_path.suffix}"
        if config_path
        else previous.get("config_file"),
        "image": image,
        "cells": [asdict(cell) | {"file": cell.filename} for cell in cells],
    }
    meta_path.write_text(json.dumps(metadata, indent=2) + "\n")

    todo = [cell for cell in cells if not (out_dir / cell.filename).exists()]
    state = _Progress(sum(expected_seconds(settings, c) for c in todo), progress, clock)
    state.started = clock()
    print(
        f"bench: {len(todo)} of {len(cells)} runs to go ({profile} profile, "
        f"{settings.repetitions} repetition(s)), first estimate "
        f"{format_seconds(state.total_expected)}, on {image['image']} ({image['vllm_version']})",
        file=progress,
    )
    stdin = (api_key + "\n").encode()
    for number, cell in enumerate(todo, start=1):
        label = (
            f"[{number}/{len(todo)}] ctx {cell.context} x {cell.clients} clients, "
            f"rep {cell.rep}/{settings.repetitions}"
        )
        print(f"{label}: running ({settings.num_prompts(cell.clients)} prompts)...", file=progress)
        cell_started = clock()
        argv = cell_command(
            settings, cell, run_id=run_id, target=target, image_id=image["image_id"]
        )
        done = executor(argv, stdin=stdin)
        log_path = out_dir / "logs" / f"{cell.stem}.log"
        log_path.write_bytes(_redact(done.stderr, api_key))
        if done.returncode != 0:
            tail = _redact(done.stderr, api_key).decode(errors="replace").strip()[-400:]
            raise SweepError(
                f"{cell.filename}: `vllm bench serve` exited {done.returncode}: {tail}; full log "
                f"in {log_path}. Fix and rerun the same command with --out {out_dir} to resume"
            )
        result = _check_result(_redact(done.stdout, api_key), cell)
        if result["completed"] == 0:
            raise SweepError(
                f"{cell.filename}: every request failed (a 401 means the API key did not "
                f"reach the client: pass --api-key-secret or --api-key-env); see {log_path}"
            )
        (out_dir / cell.filename).write_text(json.dumps(result) + "\n")
        state.done_expected += expected_seconds(settings, cell)
        state.done_count += 1
        print(
            f"{label}: {result['output_throughput']:,.1f} tok/s, median TTFT "
            f"{result['median_ttft_ms']:,.1f} ms, {result['completed']}/{result['num_prompts']} "
            f"ok in {format_seconds(clock() - cell_started)} | elapsed "
            f"{format_seconds(clock() - state.started)}, ~{format_seconds(state.remaining())} left",
            file=progress,
        )
    metadata["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    meta_path.write_text(json.dumps(metadata, indent=2) + "\n")
    print(f"bench: results in {out_dir}; next: make report RESULTS={out_dir}", file=progress)
    return out_dir
