"""docs/tutorials/python-api.md runs as written, and every name the package root exports imports."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import evogan
from tests.conftest import REPO

PAGE = "docs/tutorials/python-api.md"
API = REPO / PAGE
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a markdown text, in order."""
    return BLOCK.findall(text)


@pytest.mark.slow
def test_every_python_example_of_the_api_page_runs_in_order(tmp_path, monkeypatch) -> None:
    blocks = python_blocks(API.read_text())
    assert len(blocks) >= 6
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EVOGAN_PROGRESS", "0")
    namespace: dict = {"__name__": "api_docs"}
    for number, code in enumerate(blocks, start=1):
        folder = tmp_path / f"example-{number}"
        folder.mkdir()
        (folder / "configs").symlink_to(REPO / "configs")  # the page's paths are repo-relative
        monkeypatch.chdir(folder)
        try:
            exec(compile(code, f"{PAGE} python block {number}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{PAGE} python block {number} failed: {exc!r}") from exc


def test_every_exported_name_imports() -> None:
    missing = []
    for name in evogan.__all__:
        try:
            getattr(evogan, name)
        except Exception as exc:  # report them all, not the first
            missing.append(f"{name}: {exc!r}")
    assert not missing, "names in evogan.__all__ that do not import:\n" + "\n".join(missing)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        evogan.nothing  # noqa: B018


def _fresh_python(code: str) -> str:
    """What ``code`` prints in a new interpreter (so imports start from nothing)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_importing_the_package_root_loads_no_subpackage() -> None:
    code = (
        "import sys, evogan; "
        "print(sorted(m for m in sys.modules if m.startswith(('evogan.', 'torch'))))"
    )
    assert _fresh_python(code).strip() == "['evogan.startup']"  # a module, importing nothing


def test_the_page_lists_python_blocks_only_from_fenced_python() -> None:
    text = "a\n```python\nx = 1\n```\n```bash\nls\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = 2\n"]
    assert Path(API).is_file()
