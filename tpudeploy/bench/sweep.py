"""Build and run the `vllm bench serve` sweep on the node over IAP SSH, one cell at a time."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TextIO

from tpudeploy import facts
from tpudeploy.bench.commands import (
    BenchTarget,
    Cell,
    PodTarget,
    cell_command,
    image_info_command,
    plan_cells,
    version_command,
)
from tpudeploy.bench.settings import SweepSettings
from tpudeploy.iapssh import gcloud_failure
from tpudeploy.timefmt import format_seconds

RESULT_KEYS = ("completed", "num_prompts", "output_throughput", "median_ttft_ms", "median_tpot_ms")
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")
# A RepoDigest (repo@sha256:...), the reference `make pin` writes; a version `vllm --version`
# prints (0.26.1rc1.dev125+ga7a204cc6 embeds vLLM's git SHA).
REPO_DIGEST = re.compile(r"[a-z0-9][^@\s\"]*@sha256:[0-9a-f]{64}")
VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,80}")


class SweepError(RuntimeError):
    """The sweep cannot continue; the message says what failed and what to do."""


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


# --- time estimates -------------------------------------------------------------------------


def expected_seconds(settings: SweepSettings, cell: Cell) -> float:
    """A prior for one cell's duration: its output tokens over the build log's throughput there."""
    tok_s = facts.AGGREGATE_TOK_S.get((cell.context, cell.clients))
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


def _pod_image_info(target: PodTarget, executor: Executor) -> dict[str, Any]:
    """The pod's status names the image and its manifest digest (containerd's imageID is
    repo@sha256:<digest>, a reference `make pin` can write); vLLM's version comes from the
    container. There is no docker config-blob id on GKE: the digest stands for it."""
    done = executor(version_command(), stdin=b"")
    version = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not version:
        stderr = done.stderr.decode(errors="replace").strip()
        raise SweepError(
            f"`vllm --version` failed in pod {target.pod} ({target.container}): "
            f"{' / '.join(stderr.splitlines()[-3:]) or 'no output'}; is the replica ready? "
            "(`make status`)"
        )
    digest = target.image_digest if REPO_DIGEST.fullmatch(target.image_digest) else ""
    return {
        "image": target.image,
        "image_id": digest.rpartition("@")[2],
        "repo_digests": [target.image_digest] if target.image_digest else [],
        "digest": digest,
        "vllm_version": version[-1],
    }


def read_image_info(
    settings: SweepSettings, target: BenchTarget | None, executor: Executor
) -> dict[str, Any]:
    if isinstance(target, PodTarget):
        return _pod_image_info(target, executor)
    done = executor(image_info_command(settings, target), stdin=b"")
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or len(lines) < 4:
        where = f"node {target.name} ({target.zone})" if target else "this machine"
        stderr = done.stderr.decode(errors="replace")
        # gcloud failing to reach the node is not a stopped container: say what gcloud said.
        reached = gcloud_failure(stderr) if target else None
        if reached:
            raise SweepError(f"could not reach {where}: {reached}")
        raise SweepError(
            f"container {settings.container!r} is not running on {where}: "
            f"{' / '.join(stderr.strip().splitlines()[-3:]) or 'no output'}; "
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
    served = [d for d in digests if isinstance(d, str) and REPO_DIGEST.fullmatch(d)]
    return {
        "image": lines[0],
        "image_id": lines[1],
        "repo_digests": digests,
        "digest": served[0] if served else "",
        "vllm_version": lines[-1],
    }


def run_sweep(
    settings: SweepSettings,
    *,
    out_dir: Path,
    target: BenchTarget | None,
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
            settings,
            cell,
            run_id=run_id,
            target=target,
            image_id=image["image_id"],
            digest=image["digest"],
            vllm_version=image["vllm_version"] if VERSION.fullmatch(image["vllm_version"]) else "",
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
