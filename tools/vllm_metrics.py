"""Writes tpudeploy/gke/vllm_metrics.json: every Prometheus metric a vLLM source tree registers,
with its type, read from the source without importing it (vLLM needs torch and an accelerator).

    python -m tools.vllm_metrics /path/to/vllm-source VERSION > tpudeploy/gke/vllm_metrics.json

The source tree is a checkout, or the `vllm/` folder of the release's wheel unzipped
(`pip download --no-deps vllm==VERSION`, then unzip; the wheel's Python files are the source).
vLLM registers its metrics through prometheus_client: `Gauge(name="vllm:...")`, `Counter(...)`,
`Histogram(...)`, or a class attribute bound to one (`_gauge_cls = Gauge`, then
`self._gauge_cls(name=...)`, as `PrometheusStatLogger` in vllm/v1/metrics/loggers.py does). A
name given as a variable (the info gauges: `name = "vllm:cache_config_info"`) is resolved from
the string constants assigned to it in the same function, or from the `("vllm:...", doc)`
lists a loop registers (the spec-decode counters). tests/gke/test_vllm_metrics.py checks the
generator on a small tree, and the committed list against what the picker and HPA read.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tools.vllm_source import generator_main

# Where vLLM 0.33.0 registers Prometheus metrics (grep -rl prometheus_client vllm/v1).
_SOURCES = ("vllm/v1/metrics", "vllm/v1/spec_decode/metrics.py")
_KINDS = {"Gauge": "gauge", "Counter": "counter", "Histogram": "histogram"}


def _callee(node: ast.expr) -> str | None:
    """`Gauge`, `prometheus_client.Gauge` -> Gauge; `self._gauge_cls` -> _gauge_cls."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _class_kinds(module: ast.Module) -> dict[str, str]:
    """Class attributes bound to a metric type anywhere in the module (`_gauge_cls = Gauge`)."""
    kinds: dict[str, str] = {}
    for cls in (n for n in ast.walk(module) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], _callee(stmt.value)
                if isinstance(target, ast.Name) and value in _KINDS:
                    kinds[target.id] = _KINDS[value]
    return kinds


def _strings_assigned(func: ast.AST, name: str) -> list[str]:
    out = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    value = node.value
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        out.append(value.value)
    return out


def _first_of_specs(func: ast.AST) -> list[str]:
    """Names registered in a loop over `[("vllm:...", "doc"), ...]` lists (the spec-decode
    counters): the first string of each tuple of such a list assigned in the function."""
    out = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            for item in node.value.elts:
                if isinstance(item, ast.Tuple) and item.elts:
                    first = item.elts[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        out.append(first.value)
    return out


def _names(call: ast.Call, scope: ast.AST) -> list[str]:
    for keyword in call.keywords:
        if keyword.arg == "name":
            value = keyword.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return [value.value]
            if isinstance(value, ast.Name):
                return _strings_assigned(scope, value.id) or _first_of_specs(scope)
    return []


def metrics(root: Path) -> dict[str, dict[str, str]]:
    """{metric name: {"type": gauge|counter|histogram, "file": where it is registered}}."""
    found: dict[str, dict[str, str]] = {}
    for source in _SOURCES:
        path = root / source
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            module = ast.parse(file.read_text(encoding="utf-8"))
            kinds = {**_KINDS, **_class_kinds(module)}
            funcs = [
                n for n in ast.walk(module) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            for func in funcs:
                for call in (n for n in ast.walk(func) if isinstance(n, ast.Call)):
                    kind = kinds.get(_callee(call.func) or "")
                    if kind is None:
                        continue
                    for name in _names(call, func):
                        if name.startswith("vllm:"):
                            rel = file.relative_to(root).as_posix()
                            found.setdefault(name, {"type": kind, "file": rel})
    return dict(sorted(found.items()))


def main(argv: list[str]) -> int:
    usage = __doc__.strip().splitlines()[2].strip()
    return generator_main(argv, usage, "tools.vllm_metrics", "metrics", metrics)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
