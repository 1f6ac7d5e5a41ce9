"""Benchmark sweep with `vllm bench serve` on the node, and the report built from its results."""

from tpudeploy.bench.report import Report, build_report, write_report
from tpudeploy.bench.results import ReportError
from tpudeploy.bench.sweep import (
    BenchConfigError,
    Cell,
    ExecResult,
    NodeTarget,
    SweepError,
    SweepSettings,
    bench_argv,
    cell_command,
    plan_cells,
    run_sweep,
    settings_from_table,
)

__all__ = [
    "BenchConfigError",
    "Cell",
    "ExecResult",
    "NodeTarget",
    "Report",
    "ReportError",
    "SweepError",
    "SweepSettings",
    "bench_argv",
    "build_report",
    "cell_command",
    "plan_cells",
    "run_sweep",
    "settings_from_table",
    "write_report",
]
