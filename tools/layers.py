"""The import-layer contract of tpudeploy/, stacks/ and main.py, checked by `make lint`.

Every import counts, wherever it stands: at module top, inside a function (a "late" import,
which a leaf check at import time cannot see: config/loading.py once called tpudeploy.policy
that way and closed a 35-file circle), or under `if TYPE_CHECKING:`. The rules, as data below:

- LAYERS, bottom to top: a module imports from its own layer or one below, never from above.
  A module belongs to the layer of the longest name that covers it (tpudeploy.gke.platform is
  the GKE package's, tpudeploy.platform the seam's).
- INDEPENDENT: the two platform packages never import each other.
- FORBIDDEN: the stacks never reach the commands' module; the plain Python never reaches the
  cdktf stacks (DESIGN: "tpudeploy/ plain Python, never imports cdktf").
- No circle of modules at all, late imports counted.

    python -m tools.layers            # the repository this file is in
    python -m tools.layers --root DIR # another checkout (the tests use a scratch copy)

Exit 0 with one line when every rule holds; 1 with one line per broken rule (file, line, the
import, why); 2 when a module has no layer (say where it belongs: a new module is a decision).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("tpudeploy", "stacks")
ENTRY_POINTS = ("main.py",)

# Bottom to top. The names are modules or packages (a package covers what is inside it).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base: facts, names, errors, time, the deadline's lifecycle, Terraform's files",
        (
            "tpudeploy",  # the package's own __init__ only (EXACT): not what is inside it
            "tpudeploy.errors",
            "tpudeploy.facts",
            "tpudeploy.names",
            "tpudeploy.durations",
            "tpudeploy.timefmt",
            "tpudeploy.terminal",
            "tpudeploy.deadline",
            "tpudeploy.synthcache",
            "tpudeploy.tfrun",
            "tpudeploy.cacheguard",
            "tpudeploy.bootcheck",
            "tpudeploy.iapssh",
            # Where the upstream watch's paid job may run (standard library only: the workflow's
            # gate imports it before `make install`; config's [watch] table checks the same rule).
            "tpudeploy.watchrunner",
            # The front door's access log fields: the nginx format and its reader, one list.
            "tpudeploy.frontdoor_log",
            # Shipped to the node and the pod as source: standard library only.
            "tpudeploy.node",
        ),
    ),
    ("config: the one validated model, a leaf", ("tpudeploy.config",)),
    (
        "policy: the planner's arithmetic and the guard rails",
        ("tpudeploy.planner", "tpudeploy.policy"),
    ),
    (
        "shared: what both platforms build on (rendering, pins, the endpoint client, Google's "
        "clients, Terraform state, the sweep)",
        (
            "tpudeploy.render",
            "tpudeploy.grants",
            "tpudeploy.pins",
            "tpudeploy.nodebuild",
            "tpudeploy.endpoint",
            "tpudeploy.replicasecrets",
            "tpudeploy.tlscert",
            "tpudeploy.usage",
            "tpudeploy.terraform",
            "tpudeploy.deadline_ops",
            "tpudeploy.gcp",
            "tpudeploy.bench",
            # make accept's probes and verdict rules (standard library only); the runner that
            # sends them is a command beside smoke, whose request path it reuses.
            "tpudeploy.acceptprobes",
            # The dashboard and the alert policies, as Monitoring API JSON (the stacks declare
            # them; the platform gives the label selector).
            "tpudeploy.dashboard",
            "tpudeploy.alertpolicies",
            # The log contract (log ids, the deployment label, the filters) both platforms build
            # their `make logs` query from.
            "tpudeploy.logsources",
            # The log-based metrics (LogMetric JSON), their tiles and PromQL names.
            "tpudeploy.logmetrics",
            # "Stops soon": the deadline's warning job and the log-based alerts, as API JSON.
            "tpudeploy.stopsoon",
            # What watching costs a month (make check's line), from config/prices.py's rates.
            "tpudeploy.watchcost",
            # The TPU VM node's Ops Agent configuration (logs and vLLM's metrics), as data.
            "tpudeploy.opsagent",
            # The upstream watch's budget and name (make check prints them); the watch itself
            # is a command (tpudeploy.upstream, below).
            "tpudeploy.watchbudget",
            # Hugging Face's access check and file sizes (standard library only): the tune's
            # drafts and `make secret`'s model, asked before any spend.
            "tpudeploy.hfhub",
        ),
    ),
    ("platforms: each one package", ("tpudeploy.tpuvm", "tpudeploy.gke")),
    ("seam: the Platform protocol and registry", ("tpudeploy.platform",)),
    (
        "commands: what the Makefile and the workflows run",
        (
            "tpudeploy.__main__",
            "tpudeploy.cli",
            "tpudeploy.benchcli",
            "tpudeploy.dashboardcli",
            "tpudeploy.deploywalk",
            "tpudeploy.logscli",
            "tpudeploy.tune",
            "tpudeploy.gitops",
            "tpudeploy.preflight",
            "tpudeploy.permissions",
            "tpudeploy.defaultaccount",
            "tpudeploy.failures",
            "tpudeploy.smoke",
            "tpudeploy.accept",
            "tpudeploy.bootstrap_config",
            "tpudeploy.bootstrap_preflight",
            "tpudeploy.identities",
            "tpudeploy.github_environments",
            "tpudeploy.stateinit",
            "tpudeploy.upstream",
        ),
    ),
    ("stacks: cdktf constructs", ("stacks",)),
    ("entry point: cdktf's app", ("main",)),
)
# Names that stand for their own module only, not for the modules inside the package.
EXACT = ("tpudeploy",)
INDEPENDENT: tuple[tuple[str, ...], ...] = (("tpudeploy.tpuvm", "tpudeploy.gke"),)
FORBIDDEN: tuple[tuple[str, str, str], ...] = (
    ("stacks", "tpudeploy.cli", "the stacks take what they print from tpudeploy.platform"),
    ("tpudeploy", "stacks", "tpudeploy is plain Python; only main.py loads the cdktf stacks"),
)


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module of this checkout
    line: int
    where: str  # "top", "late" (inside a function) or "type-checking"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the checkout by dotted name."""
    found: dict[str, Path] = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    for entry in ENTRY_POINTS:
        if (root / entry).is_file():
            found[Path(entry).stem] = root / entry
    return found


def _covering(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path) -> list[Import]:
    """Every import of one module of the checkout by another, wherever it stands."""
    known = modules(root)
    found: list[Import] = []
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, where in _walk(tree, "top"):
            for target in _targets(node, package, known):
                if target != module:
                    found.append(Import(module, target, node.lineno, where))
    return found


def _walk(node: ast.AST, where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    for child in ast.iter_child_nodes(node):
        inner = where
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inner = "late" if where == "top" else where
        elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            inner = "type-checking"
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, where
        yield from _walk(child, inner)


def _targets(
    node: ast.Import | ast.ImportFrom, package: str, known: dict[str, Path]
) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _covering(alias.name, known)
            if target:
                yield target
        return
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    for alias in node.names:
        # `from pkg import sub` depends on the submodule when there is one, else on pkg.
        target = _covering(f"{base}.{alias.name}", known)
        if target:
            yield target


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the covering name, layer)
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            covered = module == name if name in EXACT else _covers(name, module)
            if covered and (best is None or len(name) > best[0]):
                best = (len(name), index)
    return best[1] if best else None


def _covers(name: str, module: str) -> bool:
    return module == name or module.startswith(name + ".")


def circles(found: list[Import]) -> list[list[str]]:
    """Each set of modules that import each other round (Tarjan's strongly connected parts)."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        graph.setdefault(imp.source, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                result.append(sorted(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def check(root: Path) -> tuple[list[str], list[str]]:
    """(modules without a layer, broken rules), each one line."""
    known = modules(root)
    unplaced = [
        f"{known[m].relative_to(root)}: module {m} is in no layer of tools/layers.py: add it "
        "where it belongs"
        for m in known
        if layer_of(m) is None
    ]
    broken: list[str] = []
    found = list(dict.fromkeys(imports(root)))  # `from m import a, b` is one import of m
    for imp in found:
        here = (
            f"{known[imp.source].relative_to(root)}:{imp.line}: {imp.source} imports {imp.target}"
        )
        if imp.where != "top":
            here += f" ({'inside a function' if imp.where == 'late' else 'under TYPE_CHECKING'})"
        low, high = layer_of(imp.source), layer_of(imp.target)
        if low is not None and high is not None and high > low:
            broken.append(
                f"{here}: upward, from {LAYERS[low][0].split(':')[0]} to "
                f"{LAYERS[high][0].split(':')[0]}; move what it needs down, or the caller up"
            )
        for group in INDEPENDENT:
            a = next((g for g in group if _covers(g, imp.source)), None)
            b = next((g for g in group if _covers(g, imp.target)), None)
            if a and b and a != b:
                broken.append(f"{here}: {a} and {b} never import each other")
        for source, target, why in FORBIDDEN:
            if _covers(source, imp.source) and _covers(target, imp.target):
                broken.append(f"{here}: forbidden ({why})")
    for part in circles(found):
        broken.append(f"circle of {len(part)} modules, late imports counted: {', '.join(part)}")
    return unplaced, broken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.layers", description=__doc__)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    args = parser.parse_args(argv)
    unplaced, broken = check(args.root)
    for line in [*unplaced, *broken]:
        print(line, file=sys.stderr)
    if unplaced:
        return 2
    if broken:
        return 1
    count = len(modules(args.root))
    print(f"import layers: {count} modules, {len(LAYERS)} layers, no upward import, no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
