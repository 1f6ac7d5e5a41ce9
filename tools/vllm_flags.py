"""Writes tpudeploy/config/vllm_cli_flags.json: every `vllm serve` flag of a vLLM source tree,
read from its source without importing it (vLLM needs torch and an accelerator stack).

    python -m tools.vllm_flags /path/to/vllm-source VERSION > tpudeploy/config/vllm_cli_flags.json

The source tree is a checkout, or the `vllm/` folder of the release's wheel unzipped
(`pip download --no-deps vllm==VERSION`, then unzip; the wheel's Python files are the source).
For each flag: whether it takes a value, its nargs, its choices (when vLLM enforces them) and
whether vLLM also registers `--no-<flag>`. The rules mirror vLLM's own: `get_kwargs` in
vllm/engine/arg_utils.py turns a config dataclass field into argparse keywords (bool ->
BooleanOptionalAction, Literal -> choices unless str is allowed too, list/tuple/set -> nargs
"+"), `EngineArgs.add_cli_args` registers them, and `FrontendArgs.add_cli_args`
(vllm/entrypoints/common/cli_args.py) registers one flag per field after its
`_customize_cli_kwargs` edits. tests/config/test_vllm_flags.py checks the generator on a small tree.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

from tools.vllm_source import generator_main

_SOURCES = ("vllm/config", "vllm/engine/arg_utils.py", "vllm/entrypoints/common/cli_args.py")
_COLLECTIONS = {"list", "tuple", "set", "List", "Tuple", "Set", "Sequence"}


class Tree:
    """Classes (field annotations, bases) and type aliases of the files that define flags."""

    def __init__(self, root: Path) -> None:
        self.classes: dict[str, ast.ClassDef] = {}
        self.aliases: dict[str, ast.expr] = {}
        self.modules: dict[str, ast.Module] = {}
        for source in _SOURCES:
            path = root / source
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
            for file in files:
                module = ast.parse(file.read_text(encoding="utf-8"))
                self.modules[file.relative_to(root).as_posix()] = module
                for node in module.body:
                    if isinstance(node, ast.ClassDef):
                        self.classes.setdefault(node.name, node)
                    elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                        target = node.targets[0]
                        if isinstance(target, ast.Name):
                            self.aliases.setdefault(target.id, node.value)
                    elif (
                        isinstance(node, ast.AnnAssign)
                        and isinstance(node.target, ast.Name)
                        and node.value is not None
                    ):
                        self.aliases.setdefault(node.target.id, node.value)

    def fields(self, name: str) -> dict[str, ast.expr]:
        """A dataclass's annotated fields, its bases' first."""
        cls = self.classes.get(name)
        if cls is None:
            return {}
        out: dict[str, ast.expr] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name):
                out.update(self.fields(base.id))
        for node in cls.body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and not node.target.id.startswith("_")
                and "ClassVar" not in ast.unparse(node.annotation)
            ):
                out[node.target.id] = node.annotation
        return out

    def hints(self, node: ast.expr, depth: int = 0) -> list[ast.expr]:
        """The alternatives of an annotation: unions, Optional and Annotated flattened, aliases
        resolved."""
        if depth > 10:
            return [node]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.hints(node.left, depth + 1) + self.hints(node.right, depth + 1)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.hints(ast.parse(node.value, mode="eval").body, depth + 1)
            except SyntaxError:
                return [node]
        if isinstance(node, ast.Subscript):
            head = _name(node.value)
            args = _elements(node.slice)
            if head in ("Union", "Optional"):
                out = [h for a in args for h in self.hints(a, depth + 1)]
                return out + ([ast.Constant(None)] if head == "Optional" else [])
            if head == "Annotated":
                return self.hints(args[0], depth + 1)
            return [node]
        if isinstance(node, ast.Name) and node.id in self.aliases:
            alias = self.aliases[node.id]
            if isinstance(alias, ast.Call) and _name(alias.func) == "TypeAlias":
                return [node]
            return self.hints(alias, depth + 1)
        return [node]

    def is_dataclass(self, node: ast.expr) -> bool:
        cls = self.classes.get(_name(node))
        return cls is not None and any(
            _name(d.func if isinstance(d, ast.Call) else d) in ("config", "dataclass")
            for d in cls.decorator_list
        )

    def kwargs(self, annotation: ast.expr) -> dict[str, Any]:
        """What vLLM's get_kwargs makes of a field with this annotation."""
        hints = self.hints(annotation)
        heads = {_name(h.value) if isinstance(h, ast.Subscript) else _name(h) for h in hints}
        optional = any(isinstance(h, ast.Constant) and h.value is None for h in hints)
        if any(self.is_dataclass(h) for h in hints):
            return {"value": True}
        if "bool" in heads:
            return {"value": False, "negatable": True}
        literal = next(
            (h for h in hints if isinstance(h, ast.Subscript) and _name(h.value) == "Literal"),
            None,
        )
        if literal is not None:
            if "str" in heads:
                return {"value": True}
            elements = _elements(literal.slice)
            choices = [str(e.value) for e in elements if isinstance(e, ast.Constant)]
            return {"value": True, "choices": sorted(choices) + (["None"] if optional else [])}
        for head in ("tuple", "Tuple", "list", "List", "set", "Set"):
            node = next(
                (h for h in hints if isinstance(h, ast.Subscript) and _name(h.value) == head),
                None,
            )
            if node is not None:
                elements = _elements(node.slice)
                fixed = head.lower() == "tuple" and not any(
                    isinstance(e, ast.Constant) and e.value is Ellipsis for e in elements
                )
                return {"value": True, "nargs": len(elements) if fixed else "+"}
        return {"value": True}


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _elements(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _apply(entry: dict[str, Any], keywords: list[ast.keyword]) -> dict[str, Any]:
    """Explicit add_argument keywords over the derived ones."""
    for kw in keywords:
        if kw.arg == "action":
            action = ast.unparse(kw.value).strip("'\"")
            if action in ("store_true", "store_false", "store_const", "count"):
                entry = {"value": False}
            elif action.endswith("BooleanOptionalAction"):
                entry = {"value": False, "negatable": True}
            elif action == "append":
                entry = {k: v for k, v in entry.items() if k != "nargs"} | {"value": True}
        elif kw.arg == "nargs":
            value = ast.literal_eval(kw.value) if isinstance(kw.value, ast.Constant) else "+"
            entry = {**entry, "value": value != 0, "nargs": value}
        elif kw.arg == "choices":
            try:
                choices = ast.literal_eval(kw.value)
                entry = {**entry, "choices": sorted(str(c) for c in choices)}
            except ValueError:
                entry = {k: v for k, v in entry.items() if k != "choices"}
    return entry


def _edits(tree: Tree, cls: str, var: str) -> list[ast.stmt]:
    """`_customize_cli_kwargs` statements of a class and its bases, bases first."""
    node = tree.classes.get(cls)
    if node is None:
        return []
    out: list[ast.stmt] = []
    for base in node.bases:
        out += _edits(tree, _name(base), var)
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "_customize_cli_kwargs":
            out += list(ast.walk(item))  # type: ignore[arg-type]
    return [s for s in out if isinstance(s, (ast.Assign, ast.Delete))]


def _edit(kwargs: dict[str, dict[str, Any]], stmt: ast.stmt) -> None:
    """`kw["field"]["key"] = value` and `del kw["field"]["key"]`, as vLLM's code does them."""
    targets = stmt.targets if isinstance(stmt, (ast.Assign, ast.Delete)) else []
    for target in targets:
        if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)):
            continue
        field, key = target.value.slice, target.slice
        if not (isinstance(field, ast.Constant) and isinstance(key, ast.Constant)):
            continue
        entry = kwargs.get(str(field.value))
        if entry is None:
            continue
        if isinstance(stmt, ast.Delete):
            entry.pop(str(key.value), None)
        elif isinstance(stmt, ast.Assign):
            kwargs[str(field.value)] = _apply(entry, [ast.keyword(str(key.value), stmt.value)])
            if key.value == "type":
                entry.pop("choices", None) if "Literal" not in ast.unparse(stmt.value) else None


def flags(root: Path) -> dict[str, dict[str, Any]]:
    tree = Tree(root)
    out: dict[str, dict[str, Any]] = {}

    def register(names: list[str], entry: dict[str, Any]) -> None:
        for name in names:
            out[name] = {"value": entry.get("value", True)}
            for key in ("nargs", "choices", "negatable"):
                if key in entry:
                    out[name][key] = entry[key]

    # The frontend: one flag per field of FrontendArgs (and its bases).
    frontend = {f: tree.kwargs(a) for f, a in tree.fields("FrontendArgs").items()}
    for stmt in _edits(tree, "FrontendArgs", "frontend_kwargs"):
        _edit(frontend, stmt)
    for name, kwargs in frontend.items():
        register([f"--{name.replace('_', '-')}"], kwargs)

    # make_arg_parser's own flags, then the engine's.
    for module in tree.modules.values():
        for fn in ast.walk(module):
            if not isinstance(fn, ast.FunctionDef) or fn.name not in (
                "make_arg_parser",
                "add_cli_args",
            ):
                continue
            variables: dict[str, dict[str, dict[str, Any]]] = {}
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    call = node.value
                    if _name(call.func) == "get_kwargs" and call.args:
                        target = node.targets[0]
                        cls = _name(call.args[0])
                        if isinstance(target, ast.Name) and cls in tree.classes:
                            variables[target.id] = {
                                f: tree.kwargs(a) for f, a in tree.fields(cls).items()
                            }
            for node in ast.walk(fn):
                if isinstance(node, (ast.Assign, ast.Delete)):
                    for var, table in variables.items():
                        if var in ast.unparse(node):
                            _edit(table, node)
            for node in ast.walk(fn):
                if not (isinstance(node, ast.Call) and _name(node.func) == "add_argument"):
                    continue
                names = [
                    str(a.value)
                    for a in node.args
                    if isinstance(a, ast.Constant) and str(a.value).startswith("--")
                ]
                if not names:
                    continue
                entry: dict[str, Any] = {"value": True}
                explicit = [k for k in node.keywords if k.arg]
                for kw in node.keywords:
                    spread = [kw.value] if kw.arg is None else []
                    if spread and isinstance(kw.value, ast.Dict):
                        # **{**kw["field"], "default": None}: the spread, then the keys.
                        pairs = list(zip(kw.value.keys, kw.value.values, strict=True))
                        spread = [v for k, v in pairs if k is None]
                        explicit += [
                            ast.keyword(str(k.value), v)
                            for k, v in pairs
                            if isinstance(k, ast.Constant)
                        ]
                    for value in spread:
                        if isinstance(value, ast.Subscript):
                            var, key = _name(value.value), value.slice
                            if var in variables and isinstance(key, ast.Constant):
                                entry = dict(variables[var].get(str(key.value), entry))
                register(names, _apply(entry, explicit))
    return dict(sorted(out.items()))


def main(argv: list[str]) -> int:
    usage = __doc__.strip().splitlines()[2].strip()
    return generator_main(argv, usage, "tools.vllm_flags", "flags", flags)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
