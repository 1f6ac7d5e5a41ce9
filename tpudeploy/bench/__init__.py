"""Benchmark sweep with `vllm bench serve` on the node, and the report built from its results."""

from tpudeploy.bench.commands import Cell, NodeTarget, bench_argv, cell_command, plan_cells
from tpudeploy.bench.report import Report, build_report, write_report
from tpudeploy.bench.results import ReportError
from tpudeploy.bench.settings import BenchConfigError, SweepSettings, settings_from_table
from tpudeploy.bench.sweep import ExecResult, SweepError, run_sweep

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
