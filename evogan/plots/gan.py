"""Figures of ``evogan validate``: GAN showers against reference (data) showers.

One figure, eight panels: sampling fraction per energy bin, x/y/z unit-area profiles, first
and second moments along z per energy bin, hit counts per energy bin and the single-cell
energy spectrum. With an ensemble, the GAN curve is the ensemble mean and the band its
standard deviation across members (SAGIPS equations 7-8).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # object API: Agg rendering, no pyplot state

from evogan.physics.validation import SPECTRUM_EDGES, ShowerStats
from evogan.plots import save_figure

DATA_STYLE = {"color": "black", "marker": "o", "ms": 3, "lw": 1.2, "label": "data"}
GAN_STYLE = {"color": "tab:red", "marker": "s", "ms": 3, "lw": 1.2}


def plot_validation(
    reference: ShowerStats,
    gan: ShowerStats,
    png: str | Path,
    *,
    gan_std: dict[str, np.ndarray] | None = None,
    label: str = "GAN",
    title: str = "",
) -> Path:
    """Write the validation figure to ``png`` atomically; ``gan_std`` draws ensemble bands."""
    png = Path(png)
    fig = Figure(figsize=(16, 8), layout="constrained")
    axes = fig.subplots(2, 4)
    centres = 0.5 * (reference.energy_edges[:-1] + reference.energy_edges[1:])
    panels = [
        ("sampling_fraction", "sampling fraction (ECAL sum / E)", centres, "E (GeV)", None),
        ("profile_x", "x profile (unit area)", None, "x (cell)", "log"),
        ("profile_y", "y profile (unit area)", None, "y (cell)", "log"),
        ("profile_z", "z profile (unit area)", None, "z (layer)", "log"),
        (("moments", 2, 0), "first moment along z (layer)", centres, "E (GeV)", None),
        (("moments", 2, 1), "second moment along z (layers)", centres, "E (GeV)", None),
        ("hits", "hits above 3e-4 GeV", centres, "E (GeV)", None),
        ("spectrum", "cells per event", _spectrum_x(), "log10(cell energy / GeV)", "log"),
    ]
    for ax, (key, ylabel, x, xlabel, yscale) in zip(axes.flat, panels, strict=True):
        ref_y, gan_y = _pick(reference.values, key), _pick(gan.values, key)
        xs = np.arange(len(ref_y)) if x is None else x
        ax.plot(xs, ref_y, **DATA_STYLE)
        ax.plot(xs, gan_y, label=label, **GAN_STYLE)
        if gan_std is not None:
            band = _pick(gan_std, key)
            ax.fill_between(xs, gan_y - band, gan_y + band, color="tab:red", alpha=0.25, lw=0)
        _decorate(ax, xlabel, ylabel, yscale)
    axes.flat[0].legend(frameon=False)
    if title:
        fig.suptitle(title)
    return save_figure(fig, png, dpi=110)


def _pick(values: dict[str, np.ndarray], key) -> np.ndarray:
    if isinstance(key, tuple):
        name, axis, order = key
        return np.asarray(values[name])[:, axis, order]
    return np.asarray(values[key])


def _spectrum_x() -> np.ndarray:
    return 0.5 * (SPECTRUM_EDGES[:-1] + SPECTRUM_EDGES[1:])


def _decorate(ax: Axes, xlabel: str, ylabel: str, yscale: str | None) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if yscale == "log":
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
