"""The layer order of docs/layout.md, checked on the code's own imports (`make lint` runs it).

    python .ci/check_layers.py [SRC]     # SRC: the folder holding hwbridge/ (default: src)

hwbridge's packages import only from the layers below them (and their own): every import
statement counts, inside a function too (an import moved into a function to dodge a circle is
still a circle); an import under `if TYPE_CHECKING:` does not (it never runs). No two modules
may import each other, however indirectly. Prints each violation and exits 1, else prints a
one-line summary and exits 0. Reads the sources with `ast`: nothing is imported or run.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LAYERS: tuple[tuple[str, ...], ...] = (
    ("_lazy", "_deferred", "__about__", "resources"),  # the package's own helpers
    ("core",),
    ("policy", "plot"),
    ("can", "serial"),
    ("j1939", "obd"),
    ("discovery", "captures"),
    ("mcp", "llm", "interop"),
    ("cli",),
    ("__init__", "__main__"),  # the package itself: the public API and `python -m hwbridge`
)
"""Packages (and top-level modules) of hwbridge, lowest layer first."""
SIDEWAYS = frozenset({("obd", "serial")})
"""Imports within one layer that are allowed: OBD-II reads ELM327s over the serial bridge."""
LAYER = {name: index for index, names in enumerate(LAYERS) for name in names}


@dataclass(frozen=True)
class Edge:
    """`module` imports `target` at `line`."""

    module: str
    target: str
    line: int


def modules(src: Path) -> dict[str, Path]:
    """Every module of hwbridge under `src`, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((src / "hwbridge").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
        if name == "TYPE_CHECKING":
            for inner in node.body:
                lines.update(n.lineno for n in ast.walk(inner) if hasattr(n, "lineno"))
    return lines


def edges(name: str, path: Path, known: set[str]) -> Iterator[Edge]:
    """The imports of module `name` (at `path`) of other hwbridge modules in `known`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = _type_checking_lines(tree)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or node.lineno in skip:
            continue
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        else:
            stem = node.module or ""
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                stem = ".".join([*base, stem] if stem else base)
            wanted = [stem, *(f"{stem}.{alias.name}" for alias in node.names)]
        for dotted in wanted:
            target = dotted
            while target and target not in known:  # `from pkg import name`: the module pkg
                target = target.rpartition(".")[0]
            if target and target not in (name, "hwbridge"):
                yield Edge(name, target, node.lineno)


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward(edge: Edge) -> str | None:
    """Why `edge` breaks the layer order (None: it keeps it)."""
    a, b = top(edge.module), top(edge.target)
    if a == b:
        return None
    la, lb = LAYER.get(a), LAYER.get(b)
    if la is None or lb is None:
        missing = a if la is None else b
        return f"{missing} is in no layer (add it to LAYERS and docs/layout.md)"
    if lb > la:
        return f"{a} imports {b}, a layer above it"
    if lb == la and (a, b) not in SIDEWAYS:
        return f"{a} imports {b}, a package of its own layer"
    return None


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def check(src: Path) -> list[str]:
    """Every violation of the layer order under `src`, one line each."""
    found = modules(src)
    known = set(found) | {"hwbridge"}
    graph: dict[str, set[str]] = {}
    problems: list[str] = []
    for name, path in found.items():
        for edge in edges(name, path, known):
            graph.setdefault(name, set()).add(edge.target)
            why = upward(edge)
            if why is not None:
                where = path.relative_to(src.parent) if src.parent in path.parents else path
                problems.append(f"{where}:{edge.line}: {edge.module} -> {edge.target}: {why}")
    package_graph: dict[str, set[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            if top(module) != top(target):
                package_graph.setdefault(top(module), set()).add(top(target))
    for component in circles(package_graph):
        problems.append("packages import each other: " + " -> ".join(component))
    for component in circles(graph):
        problems.append("modules import each other: " + " -> ".join(component))
    return sorted(set(problems))


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else Path("src")
    problems = check(src)
    for line in problems:
        print(line)
    if problems:
        print(f"layers: {len(problems)} violation(s) of the layer order (docs/layout.md)")
        return 1
    print(f"layers: {len(modules(src))} modules, every import downwards, no circles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
