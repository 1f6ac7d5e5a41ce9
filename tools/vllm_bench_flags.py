"""Writes tpudeploy/bench/vllm_bench_flags.json: every flag `vllm bench serve` takes in a vLLM
source tree, read from its source without importing it (vLLM needs torch and an accelerator
stack).

    python -m tools.vllm_bench_flags /path/to/vllm-source VERSION \
        > tpudeploy/bench/vllm_bench_flags.json

The source tree is a checkout, or the `vllm/` folder of the release's wheel unzipped (as for
tools/vllm_flags.py). The flags are the `add_argument` calls reachable from
`add_cli_args` in vllm/benchmarks/serve.py through the functions it calls by name in that file
and in vllm/benchmarks/datasets/ (add_dataset_parser and its helpers): a flag another benchmark
registers is not one `bench serve` takes. For each: whether it takes a value (not a
store_true/store_false/BooleanOptionalAction switch). tests/config/test_vllm_flags.py checks the
generator on a small tree.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

from tools.vllm_source import generator_main

_ENTRY = ("vllm/benchmarks/serve.py", "add_cli_args")
_SOURCES = ("vllm/benchmarks/serve.py", "vllm/benchmarks/datasets")
_SWITCHES = {"store_true", "store_false", "BooleanOptionalAction", "count"}


def _functions(root: Path) -> dict[str, ast.FunctionDef]:
    out: dict[str, ast.FunctionDef] = {}
    for source in _SOURCES:
        path = root / source
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef):
                    out.setdefault(node.name, node)
    return out


def _takes_value(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg == "action":
            action = ast.unparse(keyword.value).strip("'\"").rsplit(".", 1)[-1]
            return action not in _SWITCHES
    return True


def read(root: Path) -> dict[str, Any]:
    functions = _functions(root)
    if _ENTRY[1] not in functions:
        raise SystemExit(f"{root}: no {_ENTRY[1]} in {_ENTRY[0]}; is this a vLLM source tree?")
    flags: dict[str, Any] = {}
    seen: set[str] = set()
    todo = [_ENTRY[1]]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in ast.walk(functions[name]):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name):
                todo.append(func.id)
            elif isinstance(func, ast.Attribute) and func.attr == "add_argument":
                names = [
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
                for flag in names:
                    if flag.startswith("--"):
                        flags[flag] = {"value": _takes_value(node)}
    return dict(sorted(flags.items()))


def main(argv: list[str]) -> int:
    usage = __doc__.split("\n\n")[1] if __doc__ else ""
    return generator_main(argv, usage, "tools.vllm_bench_flags", "flags", read)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
