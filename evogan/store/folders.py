"""A path where a command expects an existing directory (a run, a campaign, a resume).

Its own module, importing nothing of evogan but its errors, so that config checks can use it
without importing the run-directory machinery (which imports them back).
"""

from __future__ import annotations

from pathlib import Path

from evogan.errors import EvoganError


def require_directory(path: Path, what: str, error: type[EvoganError] = EvoganError) -> None:
    """``path`` is a directory; else one line naming ``what`` was expected and what is there."""
    if not path.is_dir():
        found = "a file" if path.exists() else "missing"
        raise error(f"{what} {path} is {found}; give an existing directory")
