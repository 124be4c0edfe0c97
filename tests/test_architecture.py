"""The package's shape, checked from source: no import circles, no import up the layer table of
docs/explanation/architecture.md, short modules and functions, and a docstring on every package.

Imports are read with :mod:`ast`, so imports inside functions and under ``TYPE_CHECKING`` count
as much as module-level ones: any of them runs the imported module when reached. Importing
``evogan.a.b`` also runs ``evogan/a/__init__.py``, so for circles every ancestor package of an
imported module is an edge too, except the importing module's own ancestors (already running
when it is); the layer table judges only what a module's own import statements name. Names a
package resolves lazily (PEP 562 ``__getattr__`` with a string module name) are not edges:
nothing is imported until the name is used.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "evogan"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
REASON = "Long because"
"""A function over MAX_FUNCTION_LINES lines passes when its docstring contains this phrase."""
ARCHITECTURE = PACKAGE.parent / "docs" / "explanation" / "architecture.md"
LAYER_TABLE = "## What each package may import"
"""The heading of the layer table in ARCHITECTURE."""
EVERYTHING = "everything"
"""A row that may import every other row says this word."""
ROOT = "__init__"
"""The layer table's name for the package root, ``evogan/__init__.py``."""


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
def explicit_imports() -> dict[str, frozenset[str]]:
    """Module -> the package modules its own import statements name (the layer table's edges)."""
    graph = {}
    for module, path in modules().items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges.update(filter(None, (_owner(t) for t in _targets(module, node))))
        edges.discard(module)
        graph[module] = frozenset(edges)
    return graph


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the package modules that importing it may run (see the module docstring)."""
    graph = {}
    for module, edges in explicit_imports().items():
        implied = {ancestor for edge in edges for ancestor in _ancestors(edge)}
        graph[module] = frozenset(edges | implied) - set(_ancestors(module)) - {module}
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


@dataclass(frozen=True)
class Row:
    """One row of the layer table: the modules it holds and the rows they may import."""

    names: tuple[str, ...]
    """Dotted names relative to ``evogan`` (a package holds its modules; ROOT: the root)."""
    may_import: frozenset[str]
    """Labels of other rows, or EVERYTHING."""


def _cells(line: str) -> list[str]:
    """A table line's cells, parenthesised commentary removed."""
    return [re.sub(r"\([^)]*\)", "", cell).strip() for cell in line.strip().strip("|").split("|")]


def parse_layer_table(text: str) -> dict[str, Row]:
    """Row label -> row, from the first table under LAYER_TABLE in ``text``.

    A first cell ``label: `a`, `b``` holds the modules named in backticks under ``label``; a
    first cell of one name in backticks is also its label. The second cell lists the labels
    of the rows it may import, separated by commas. Text in parentheses is commentary."""
    section = text.split(LAYER_TABLE, 1)[1].split("\n## ", 1)[0]
    blocks = section.strip().split("\n\n")
    table = next(block for block in blocks if block.startswith("|")).splitlines()
    rows: dict[str, Row] = {}
    for line in table[2:]:  # below the header and its rule
        first, second = _cells(line)
        names = tuple(re.findall(r"`([^`]+)`", first))
        label = first.partition(":")[0].strip() if ":" in first else names[0]
        allowed = {item.strip().strip("`") for item in second.split(",")} - {""}
        assert label not in rows, f"the layer table has two rows {label!r}"
        rows[label] = Row(names, frozenset(allowed))
    return rows


def _relative(module: str) -> str:
    return ROOT if module == PACKAGE.name else module.removeprefix(PACKAGE.name + ".")


def row_of(module: str, rows: dict[str, Row]) -> str | None:
    """The label of the row with the longest name that is ``module`` or a package above it."""
    name, best, length = _relative(module), None, -1
    for label, row in rows.items():
        for held in row.names:
            if (name == held or name.startswith(held + ".")) and len(held) > length:
                best, length = label, len(held)
    return best


def table_problems(rows: dict[str, Row], graph: dict[str, frozenset[str]]) -> list[str]:
    """Names no module has, names in two rows, rows listed that are no row or come after the
    listing row (the table runs from the bottom layer up, so it draws no circle), modules in
    no row."""
    known = {_relative(module) for module in graph}
    problems, seen, order = [], {}, list(rows)
    for label, row in rows.items():
        for name in row.names:
            if name not in known:
                problems.append(f"row {label} names {name}, which is no module of evogan")
            if name in seen:
                problems.append(f"{name} is in rows {seen[name]} and {label}")
            seen[name] = label
        for other in sorted(row.may_import - {EVERYTHING}):
            if other not in rows:
                problems.append(f"row {label} may import {other}, which is no row")
            elif order.index(other) > order.index(label):
                problems.append(f"row {label} may import {other}, which comes after it")
    problems += [f"{module} is in no row" for module in sorted(graph) if not row_of(module, rows)]
    return problems


def upward_imports(rows: dict[str, Row], graph: dict[str, frozenset[str]]) -> list[str]:
    """Every edge from a row to another row that it does not list."""
    found = []
    for module in sorted(graph):
        source = row_of(module, rows)
        for target in sorted(graph[module]):
            goal = row_of(target, rows)
            if source is None or goal is None or goal == source:
                continue
            if not {goal, EVERYTHING} & rows[source].may_import:
                found.append(f"{module} -> {target} (row {source} may not import row {goal})")
    return found


def test_the_checker_sees_function_level_type_checking_relative_and_ancestor_imports() -> None:
    graph = import_graph()
    # data/default.py imports evogan.config.data: config/__init__ runs too
    assert {"evogan.config.data", "evogan.config"} <= graph["evogan.data.default"]
    # a module's own ancestors are not edges
    assert "evogan.data" not in graph["evogan.data.default"]
    # the layer table judges what the import statements name, not the packages they run
    assert "evogan.config.data" in explicit_imports()["evogan.data.default"]
    assert "evogan.config" not in explicit_imports()["evogan.data.default"]
    circle = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    assert strongly_connected(circle) == [["a", "b", "c"]]
    assert shortest_circle(circle, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_there_are_no_import_circles() -> None:
    graph = import_graph()
    circles = [shortest_circle(graph, c) for c in strongly_connected(graph)]
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


LITTLE_TABLE = """# title

## What each package may import

Some words.

| row | may import |
|---|---|
| base: `__init__`, `a` | (within base only) |
| `b` | base |
| `b.c` | base, `b` (a note that names `d`, which is no permission) |
| top: `d` | everything |

## Next
"""


def test_the_layer_checker_reads_rows_longest_names_and_upward_imports() -> None:
    rows = parse_layer_table(LITTLE_TABLE)
    assert rows == {
        "base": Row(("__init__", "a"), frozenset()),
        "b": Row(("b",), frozenset({"base"})),
        "b.c": Row(("b.c",), frozenset({"base", "b"})),
        "top": Row(("d",), frozenset({EVERYTHING})),
    }
    graph = {
        "evogan": frozenset(),
        "evogan.a": frozenset({"evogan", "evogan.b.x"}),
        "evogan.b": frozenset({"evogan.a"}),
        "evogan.b.x": frozenset({"evogan.b.c.y", "evogan.b"}),
        "evogan.b.c": frozenset(),
        "evogan.b.c.y": frozenset({"evogan.b", "evogan.b.c", "evogan.a"}),
        "evogan.d": frozenset({"evogan.a", "evogan.b.c.y"}),
    }
    assert [row_of(m, rows) for m in graph] == ["base", "base", "b", "b", "b.c", "b.c", "top"]
    assert upward_imports(rows, graph) == [
        "evogan.a -> evogan.b.x (row base may not import row b)",
        "evogan.b.x -> evogan.b.c.y (row b may not import row b.c)",
    ]
    assert table_problems(rows, graph) == []
    rows["base"] = Row(("__init__", "a"), frozenset({"b"}))
    rows["e"] = Row(("e", "a"), frozenset({"f"}))
    assert table_problems(rows, {**graph, "evogan.g": frozenset()}) == [
        "row base may import b, which comes after it",
        "row e names e, which is no module of evogan",
        "a is in rows base and e",
        "row e may import f, which is no row",
        "evogan.g is in no row",
    ]


def test_the_layer_table_holds_every_module_in_one_row() -> None:
    problems = table_problems(parse_layer_table(ARCHITECTURE.read_text()), explicit_imports())
    assert not problems, f"the layer table of {ARCHITECTURE.name}:\n" + "\n".join(problems)


def test_no_import_runs_up_the_layer_table() -> None:
    upward = upward_imports(parse_layer_table(ARCHITECTURE.read_text()), explicit_imports())
    assert not upward, f"imports up the layer table of {ARCHITECTURE.name}:\n" + "\n".join(upward)


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
