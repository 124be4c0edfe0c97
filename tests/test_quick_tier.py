"""The quick tier (``pytest -m "not slow"``, docs/getting-started.md) reaches every package: each
package of evogan is imported by a test module that has a test not marked ``slow``. Read with
:mod:`ast` from the test sources, so a package whose only tests are all marked slow is named
here rather than going untested in the tier a developer runs between edits."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "evogan"


def packages() -> list[str]:
    """Dotted names of evogan's packages (folders with an ``__init__.py``)."""
    return sorted(
        ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        for path in PACKAGE.rglob("__init__.py")
    )


def _is_slow_mark(node: ast.expr) -> bool:
    marks = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    return any(ast.unparse(mark).endswith("mark.slow") for mark in marks)


@cache
def quick_tests(path: Path) -> list[str]:
    """Names of the test functions of ``path`` that the quick tier runs."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(getattr(t, "id", "") == "pytestmark" for t in targets) and _is_slow_mark(node.value):
            return []
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and node.name.startswith("test_")
        and not any(_is_slow_mark(d) for d in node.decorator_list)
    ]


@cache
def imported_packages(path: Path) -> frozenset[str]:
    """Every package an import statement of ``path`` names, with its parent packages, also
    through the tests' own helper modules (``tests.gan_fixtures``) it imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.startswith("tests.") and (TESTS / f"{name[6:]}.py").is_file():
                found |= imported_packages(TESTS / f"{name[6:]}.py")
            parts = name.split(".")
            found.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return frozenset(found)


def test_every_package_has_a_quick_test() -> None:
    quick = [path for path in sorted(TESTS.glob("test_*.py")) if quick_tests(path)]
    reached = set().union(*(imported_packages(path) for path in quick))
    missing = [package for package in packages() if package not in reached]
    assert not missing, f"no test module outside the slow tier imports {missing}"


def test_a_module_marked_slow_as_a_whole_has_no_quick_test(tmp_path) -> None:
    marked = tmp_path / "test_marked.py"
    marked.write_text(
        "import pytest\npytestmark = [pytest.mark.mpi, pytest.mark.slow]\ndef test_a():\n    pass\n"
    )
    partly = tmp_path / "test_partly.py"
    partly.write_text(
        "import pytest\n@pytest.mark.slow\ndef test_a():\n    pass\ndef test_b():\n    pass\n"
    )
    assert quick_tests(marked) == []
    assert quick_tests(partly) == ["test_b"]
