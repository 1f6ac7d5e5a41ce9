"""Read a directory of `vllm bench serve --save-result` files into runs, each by its content."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from tpudeploy.bench.commands import (
    META_CLIENTS,
    META_CONFIG,
    META_CONTEXT,
    META_DIGEST,
    META_IMAGE,
    META_REP,
    META_REPLICAS,
    META_ROUTE,
    META_SHARED_PREFIX,
    META_VLLM,
)
from tpudeploy.bench.settings import PROFILES

# What `vllm bench serve --save-result` writes (vllm/benchmarks/serve.py): one JSON object per
# run, opening with date (%Y%m%d-%H%M%S, local time), backend, model_id and num_prompts, then each
# `--metadata KEY=VALUE` as a top-level string, request_rate ("inf" unless paced), burstiness,
# max_concurrency (null without --max-concurrency) and the metrics. `--append-result` adds further
# objects to the same file, one per line. The default file name,
# {label or backend}-{request_rate}qps[-concurrency{N}]-{model}-{date}.json, names no context,
# so the report reads every run's cell from its content and never from its name.
RESULT_KEYS = ("date", "backend", "model_id", "num_prompts", "completed")
METRIC_KEYS = ("output_throughput", "median_ttft_ms", "median_tpot_ms")
VLLM_DATE = "%Y%m%d-%H%M%S"
# Files vLLM writes beside a result: the PyTorch-benchmark twin, --plot-timeline and
# --plot-dataset-stats. Each repeats or draws a result; none is one.
VLLM_SIDE_FILES = (".pytorch.json", ".timeline.html", ".dataset_stats.png")
# The sweep's own files in a results directory (sweep.run_sweep) and the report's outputs.
SWEEP_METADATA = "metadata.json"
REPORT_FILE = "report.md"
PLOT_FILES: Mapping[str, str] = {
    "aggregate": "throughput.png",
    "ttft": "ttft.png",
    "per_stream": "per_stream.png",
}
# Without a `tpudeploy_context` pair the context is the mean input per request, which for
# vLLM's random dataset is --random-input-len (range ratio 0 by default). The existing warning
# threshold (10%) decides whether it is a grid point or an unknown context.
CONTEXT_TOLERANCE = 0.10
DEFAULT_CONTEXTS = tuple(sorted({c for s in PROFILES.values() for c in s.contexts}))


def spec_counts(data: dict[str, Any]) -> dict[str, int]:
    """The spec-decode counters the sweep merged into a result (SPEC_KEYS), when it did."""
    from tpudeploy.bench.specmetrics import SPEC_KEYS

    out = {}
    for field_name, key in SPEC_KEYS.items():
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[field_name] = value
    return out


class ReportError(ValueError):
    """The results cannot be reported; the message names the directory and the fix."""


class _NotACell(ValueError):
    """One saved record cannot join a cell; the message is the reason listed in the report."""


@dataclass(frozen=True)
class GroupKey:
    """What must be equal for runs to share a table: the model and, when saved, config and image."""

    model: str
    config: str | None
    image: str | None
    # The build the node served: its RepoDigest and vLLM version (one image ID has one of each;
    # they are what a user reads and pins, the ID is not pullable).
    digest: str | None = None
    vllm: str | None = None
    # What the runs measured besides the server (issue 26): "gateway:<scoring>" for the pool
    # through the Gateway (None: one replica's own vLLM, the build log's setup), and the percent
    # of each prompt every request shared (None: random prompts).
    route: str | None = None
    shared_prefix: str | None = None

    def describe(self) -> str:
        config = f"config `{self.config}`" if self.config else "config not recorded"
        if self.digest:
            image = f"image `{self.digest}`"
        else:
            image = f"image `{self.image}`" if self.image else "image not recorded"
        if self.vllm:
            image += f", vLLM `{self.vllm}`"
        text = f"`{self.model}`, {config}, {image}"
        if self.route:
            scoring = self.route.partition(":")[2] or "not recorded"
            text += f", through the Gateway (scoring `{scoring}`)"
        if self.shared_prefix:
            text += f", {self.shared_prefix}% of each prompt shared"
        return text

    @property
    def through_gateway(self) -> bool:
        return bool(self.route)


@dataclass(frozen=True)
class RunResult:
    """The fields of one saved `vllm bench serve` result that the report uses."""

    context: int
    clients: int
    rep: int  # 1-based position among its cell's runs in date order (0 until assigned)
    file: str
    date: str
    group: GroupKey
    context_from: str  # "metadata" (the sweep's tpudeploy_context) or "input tokens"
    num_prompts: int
    completed: int
    failed: int
    output_throughput: float
    median_ttft_ms: float
    median_tpot_ms: float
    total_input_tokens: int | None
    saved_rep: int | None  # the sweep's tpudeploy_rep, a tie-break for equal dates
    replicas: int | None = None  # through the Gateway: the replicas ready when the sweep began
    # Speculative decoding during this run: vLLM's spec-decode counters' growth (draft tokens
    # proposed, accepted), read from its /metrics before and after (tpudeploy/bench/specmetrics.py).
    spec_drafted: int | None = None
    spec_accepted: int | None = None

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted over proposed draft tokens in this run; None without speculative decoding."""
        if not self.spec_drafted or self.spec_accepted is None:
            return None
        return self.spec_accepted / self.spec_drafted

    @property
    def has_failures(self) -> bool:
        return self.failed > 0 or self.completed < self.num_prompts


@dataclass(frozen=True)
class Skipped:
    """A file (or one record of an appended file) that is not a usable run, and why."""

    file: str
    reason: str


@dataclass(frozen=True)
class Loaded:
    """Everything found in a results directory."""

    runs: tuple[RunResult, ...]
    skipped: tuple[Skipped, ...]
    files_read: int  # candidate files, side files and the sweep's own excluded
    files_used: int  # files holding at least one run in the report
    side_files: int
    metadata: Mapping[str, Any]


def _records(path: Path) -> list[Any]:
    """Every JSON value in the file: one for --save-result, several for --append-result."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise _NotACell("not text, so not a `vllm bench serve` result") from None
    except OSError as exc:
        raise _NotACell(f"cannot be read ({exc.strerror or exc})") from None
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            break
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            where = f" after record {len(values)}" if values else ""
            raise _NotACell(
                f"not JSON{where} ({exc.msg}, line {exc.lineno}); "
                "not a `vllm bench serve --save-result` file"
            ) from None
        values.append(value)
    if not values:
        raise _NotACell("empty; a `vllm bench serve` run that died before saving? rerun it")
    return values


def _number(data: Mapping[str, Any], key: str) -> float:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _NotACell(f"{key} is {value!r}, not a number; rerun this run")
    return float(value)


def _whole(data: Mapping[str, Any], key: str) -> int:
    """A positive whole number, saved by vLLM as a number or by --metadata as a string."""
    value = data[key]
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _NotACell(f"{key} is {value!r}, not a positive whole number")
    return value


def snap_context(mean_input: float, grid: Sequence[int]) -> int | None:
    """The grid context within CONTEXT_TOLERANCE of the mean input per request, if any."""
    if mean_input <= 0 or not grid:
        return None
    nearest = min(grid, key=lambda ctx: abs(mean_input - ctx) / ctx)
    return nearest if abs(mean_input - nearest) <= CONTEXT_TOLERANCE * nearest else None


def _context(data: Mapping[str, Any], grid: Sequence[int]) -> tuple[int, str]:
    if META_CONTEXT in data:
        return _whole(data, META_CONTEXT), "metadata"
    total = data.get("total_input_tokens")
    completed = _number(data, "completed")
    if completed <= 0:
        raise _NotACell(
            f"no request completed and no {META_CONTEXT} pair, so its context cannot be told; "
            "rerun it"
        )
    if isinstance(total, bool) or not isinstance(total, int | float) or total <= 0:
        raise _NotACell(
            f"no total_input_tokens and no {META_CONTEXT} pair, so its context cannot be told; "
            f"rerun with --metadata {META_CONTEXT}=<input length>"
        )
    mean = total / completed
    context = snap_context(mean, grid)
    if context is None:
        known = ", ".join(f"{c:,}" for c in grid)
        raise _NotACell(
            f"{mean:,.0f} input tokens per request (total_input_tokens / completed) is not "
            f"within {CONTEXT_TOLERANCE:.0%} of a sweep context ({known}); add it to [bench] "
            "contexts in the config given with --config, or rerun with "
            f"--metadata {META_CONTEXT}=<input length>"
        )
    return context, "input tokens"


def parse_run(data: Any, label: str, grid: Sequence[int]) -> RunResult:
    """One saved record as a run of a cell; _NotACell says why it cannot be one."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise _NotACell(f"a JSON {kind}, not an object: not a `vllm bench serve` result")
    missing = [key for key in RESULT_KEYS if key not in data]
    if missing:
        raise _NotACell(f"not a `vllm bench serve` result: no {', '.join(missing)}")
    if data.get("ramp_up_strategy") is not None:
        raise _NotACell(
            f"a request-rate ramp-up ({data['ramp_up_strategy']}), not a fixed-concurrency run"
        )
    if data.get("request_rate", "inf") != "inf":
        raise _NotACell(
            f"request_rate {data['request_rate']!r}: paced arrivals, not the build log's "
            "closed-loop sweep (request_rate inf, clients = max_concurrency); rerun without "
            "--request-rate"
        )
    if data.get("max_concurrency") is None:
        raise _NotACell(
            "max_concurrency is null (run without --max-concurrency), so its clients cannot be "
            "told; rerun with --max-concurrency N"
        )
    clients = _whole(data, "max_concurrency")
    if META_CLIENTS in data and _whole(data, META_CLIENTS) != clients:
        raise _NotACell(
            f"{META_CLIENTS} {data[META_CLIENTS]!r} disagrees with max_concurrency {clients}; "
            "the file was edited: rerun this run"
        )
    lacking = [key for key in METRIC_KEYS if key not in data]
    if lacking:
        raise _NotACell(
            f"no {', '.join(lacking)}: saved with --percentile-metrics leaving out ttft/tpot, or "
            "by an older vLLM; rerun with the defaults"
        )
    date = data["date"]
    try:
        datetime.strptime(str(date), VLLM_DATE)
    except ValueError:
        raise _NotACell(
            f"date {date!r} is not vLLM's {VLLM_DATE}; repetitions are ordered by it"
        ) from None
    model = data["model_id"]
    if not isinstance(model, str) or not model:
        raise _NotACell(f"model_id is {model!r}, not a model name")
    context, context_from = _context(data, grid)
    num_prompts = int(_number(data, "num_prompts"))
    completed = int(_number(data, "completed"))
    failed = int(_number(data, "failed")) if "failed" in data else num_prompts - completed
    total_input = data.get("total_input_tokens")
    saved_rep = data.get(META_REP)
    config, image = data.get(META_CONFIG), data.get(META_IMAGE)
    digest, vllm = data.get(META_DIGEST), data.get(META_VLLM)
    route, prefix = data.get(META_ROUTE), data.get(META_SHARED_PREFIX)
    replicas = data.get(META_REPLICAS)
    return RunResult(
        context=context,
        clients=clients,
        rep=0,
        file=label,
        date=str(date),
        group=GroupKey(
            model,
            str(config) if config else None,
            str(image) if image else None,
            str(digest) if digest else None,
            str(vllm) if vllm else None,
            str(route) if route else None,
            str(prefix) if prefix else None,
        ),
        context_from=context_from,
        num_prompts=num_prompts,
        completed=completed,
        failed=failed,
        output_throughput=_number(data, "output_throughput"),
        median_ttft_ms=_number(data, "median_ttft_ms"),
        median_tpot_ms=_number(data, "median_tpot_ms"),
        total_input_tokens=int(total_input) if isinstance(total_input, int | float) else None,
        saved_rep=int(saved_rep) if isinstance(saved_rep, str) and saved_rep.isdigit() else None,
        replicas=int(replicas) if isinstance(replicas, str) and replicas.isdigit() else None,
        **spec_counts(data),
    )


def load_metadata(results_dir: Path) -> dict[str, Any]:
    """The sweep's metadata.json (image, settings), or {} when the directory has none."""
    path = results_dir / SWEEP_METADATA
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # not the sweep's: listed among the candidate files instead
    return data if isinstance(data, dict) and data.get("tool") == "tpudeploy.bench" else {}


def _own_files(metadata: Mapping[str, Any]) -> set[str]:
    """Names the sweep and the report write into a results directory; none is a result."""
    names = {REPORT_FILE, *PLOT_FILES.values()}
    if metadata:
        names.add(SWEEP_METADATA)
        if isinstance(metadata.get("config_file"), str):
            names.add(metadata["config_file"])
    return names


def _is_own_plot(name: str) -> bool:
    # Several groups get numbered plots: group2-throughput.png.
    prefix, _, rest = name.partition("-")
    return prefix.startswith("group") and prefix[5:].isdigit() and rest in PLOT_FILES.values()


def _candidates(results_dir: Path, metadata: Mapping[str, Any]) -> Iterator[Path]:
    own = _own_files(metadata)
    for path in sorted(results_dir.iterdir()):
        if path.is_file() and path.name not in own and not _is_own_plot(path.name):
            yield path


def load_results(results_dir: Path, *, contexts: Sequence[int] = DEFAULT_CONTEXTS) -> Loaded:
    """Every run in `results_dir` (not its subdirectories), whatever the files are called."""
    if not results_dir.is_dir():
        raise ReportError(
            f"{results_dir}: no such directory; pass a directory of `vllm bench serve "
            "--save-result` files (make bench writes bench-results/<profile>-<time>/)"
        )
    metadata = load_metadata(results_dir)
    settings = metadata.get("settings") if isinstance(metadata.get("settings"), dict) else {}
    planned = [c for c in (settings or {}).get("contexts", []) if isinstance(c, int) and c > 0]
    grid = tuple(sorted({*contexts, *planned}))
    runs: list[RunResult] = []
    skipped: list[Skipped] = []
    seen: dict[str, str] = {}
    files_read = side_files = 0
    used: set[str] = set()
    for path in _candidates(results_dir, metadata):
        if path.name.endswith(VLLM_SIDE_FILES):
            side_files += 1
            continue
        files_read += 1
        try:
            records = _records(path)
        except _NotACell as exc:
            skipped.append(Skipped(path.name, str(exc)))
            continue
        for index, record in enumerate(records, start=1):
            label = path.name if len(records) == 1 else f"{path.name} (record {index})"
            # A copied file would otherwise count as one more repetition of its cell.
            canonical = json.dumps(record, sort_keys=True)
            if canonical in seen:
                skipped.append(Skipped(label, f"identical to {seen[canonical]}; counted once"))
                continue
            seen[canonical] = label
            try:
                runs.append(parse_run(record, label, grid))
            except _NotACell as exc:
                skipped.append(Skipped(label, str(exc)))
                continue
            used.add(path.name)
    if not runs:
        reasons = "; ".join(f"{s.file}: {s.reason}" for s in skipped[:2])
        more = f" (and {len(skipped) - 2} more)" if len(skipped) > 2 else ""
        found = f"{files_read} file(s), none usable: {reasons}{more}" if skipped else "no files"
        raise ReportError(
            f"{results_dir}: no `vllm bench serve` results ({found}); run make bench, or "
            "`vllm bench serve --save-result --max-concurrency N --result-dir` this directory"
        )
    return Loaded(
        runs=tuple(_number_repetitions(runs)),
        skipped=tuple(skipped),
        files_read=files_read,
        files_used=len(used),
        side_files=side_files,
        metadata=metadata,
    )


def _number_repetitions(runs: Sequence[RunResult]) -> list[RunResult]:
    """Repetitions are a cell's runs in date order (the sweep's rep breaks ties), from 1."""
    cells: dict[tuple[GroupKey, int, int], list[RunResult]] = {}
    for run in runs:
        cells.setdefault((run.group, run.context, run.clients), []).append(run)
    numbered = []
    for group in cells.values():
        group.sort(key=lambda r: (r.date, r.saved_rep or 0, r.file))
        numbered += [replace(run, rep=index) for index, run in enumerate(group, start=1)]
    return numbered
