"""The package's shape, checked from source: no import circles, short modules and functions,
and a docstring on every package.

Imports are read with :mod:`ast`, so imports inside functions and under ``TYPE_CHECKING`` count
as much as module-level ones: any of them runs the imported module when reached. Importing
``evogan.a.b`` also runs ``evogan/a/__init__.py``, so every ancestor package of an imported
module is an edge too, except the importing module's own ancestors (already running when it is).
Names a package resolves lazily (PEP 562 ``__getattr__`` with a string module name) are not
edges: nothing is imported until the name is used.
"""

from __future__ import annotations

import ast
from collections import deque
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "evogan"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
REASON = "Long because"
"""A function over MAX_FUNCTION_LINES lines passes when its docstring contains this phrase."""


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (packages by their name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def _owner(name: str) -> str | None:
    """The module that ``name`` (a module, or a module plus an attribute) runs when imported."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """Dotted names an import statement in ``module`` asks for (relative ones resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module if _is_package(module) else module.rpartition(".")[0]
        parts = package.split(".")
        anchor = ".".join(parts[: len(parts) - node.level + 1])
        base = f"{anchor}.{base}" if base else anchor
    return [f"{base}.{alias.name}" for alias in node.names]


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the package modules that importing it may run (see the module docstring)."""
    graph = {}
    for module, path in modules().items():
        own = set(_ancestors(module))
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(module, node):
                owner = _owner(target)
                if owner is None:
                    continue  # outside the package
                edges.update(a for a in _ancestors(owner) if a not in own)
                edges.add(owner)
        edges.discard(module)
        graph[module] = frozenset(edges - own)
    return graph


def strongly_connected(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """Tarjan's components with more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def shortest_circle(graph: dict[str, frozenset[str]], component: list[str]) -> list[str]:
    """One shortest circle through the first module of a component, for the failure message."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & members):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if child not in previous:
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"no circle through {start} in {component}")


def test_the_checker_sees_function_level_type_checking_relative_and_ancestor_imports() -> None:
    graph = import_graph()
    # data/default.py imports evogan.config.data: config/__init__ runs too
    assert {"evogan.config.data", "evogan.config"} <= graph["evogan.data.default"]
    # a module's own ancestors are not edges
    assert "evogan.data" not in graph["evogan.data.default"]
    circle = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    assert strongly_connected(circle) == [["a", "b", "c"]]
    assert shortest_circle(circle, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_there_are_no_import_circles() -> None:
    graph = import_graph()
    circles = [shortest_circle(graph, c) for c in strongly_connected(graph)]
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_no_module_is_over_the_line_limit() -> None:
    long = {
        name: count
        for name, path in modules().items()
        if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_long_functions_say_why_in_their_docstring() -> None:
    long = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and REASON not in (ast.get_docstring(node) or ""):
                long.append(f"{name}.{node.name} ({lines} lines)")
    assert not long, (
        f"functions over {MAX_FUNCTION_LINES} lines without {REASON!r} in their docstring: "
        + ", ".join(long)
    )


def test_every_package_init_has_a_docstring() -> None:
    bare = [
        name
        for name, path in modules().items()
        if path.name == "__init__.py" and not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert not bare, f"packages without a docstring: {bare}"
