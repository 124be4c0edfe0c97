"""A path where a command expects an existing directory (a run, a campaign, a resume), or a
folder of a run that no symbolic link may lead out of (checkpoints evogan prunes).

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


def require_inside(run: Path, path: Path, what: str) -> Path:
    """``path`` (under ``run``) when no symbolic link leads it out of ``run``; else one line
    naming the link, because evogan writes, and deletes, ``what`` there."""
    top = run.resolve()
    real = path.resolve()
    if real == top or top in real.parents:
        return path
    parts = path.relative_to(run).parts
    steps = [run.joinpath(*parts[: i + 1]) for i in range(len(parts))]
    link = next((step for step in steps if step.is_symlink()), path)
    raise EvoganError(
        f"{link} is a symbolic link to {link.resolve()}, outside the run directory {run}; "
        f"evogan writes and deletes {what} there, so it must be a folder of the run: replace "
        "the link by a folder (--run-dir puts a whole run elsewhere)"
    )
