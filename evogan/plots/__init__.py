"""Figures (matplotlib, Agg backend): data inspection, GA-vs-RMSprop comparison, GAN validation,
search campaigns."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from evogan.store.atomic import atomic_path


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """PNG via the Agg canvas of a pyplot-free Figure (no global backend state), atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format="png")
    return path
