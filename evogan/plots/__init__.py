"""Figures (matplotlib, Agg backend): data inspection, GA-vs-RMSprop comparison, GAN validation,
search campaigns. Figures take plain records (rows, arrays, dataclasses) from their callers, so
plots sit below the tasks and import none of them."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backend_bases import FigureCanvasBase
from matplotlib.figure import Figure

from evogan.errors import EvoganError
from evogan.store.atomic import atomic_path


def figure_format(path: str | Path) -> str:
    """The format ``path``'s suffix names (``.pdf``: pdf), so a figure holds what its name
    says; a suffix matplotlib cannot write is refused in one line, before any drawing."""
    suffix = Path(path).suffix.removeprefix(".").lower()
    if suffix not in FigureCanvasBase.get_supported_filetypes():
        raise EvoganError(
            f"figure {path}: the suffix {suffix or '(none)'!r} names no figure format; use .png, "
            ".pdf, .svg or another format matplotlib writes"
        )
    return suffix


def save_figure(fig: Figure, path: str | Path, dpi: int = 120, tight: bool | None = None) -> Path:
    """Write ``fig`` in the format its suffix names (:func:`figure_format`) through the canvas of
    a pyplot-free Figure (no global backend state), atomically.

    ``tight`` crops to the drawn content, which costs a second full draw (a second or more for
    a figure of many panels); by default only a figure without a layout engine pays it, as a
    constrained layout already keeps every label on the canvas. A figure with explicit margins
    passes ``tight=False``."""
    path = Path(path)
    file_format = figure_format(path)
    if tight is None:
        tight = fig.get_layout_engine() is None
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight" if tight else None, format=file_format)
    return path
