"""The figure of ``evogan data inspect --plot``: shower shapes and sampling fraction vs energy.

Four panels: mean x, y and z (depth) profiles in a few energy bins, and the sampling fraction
per energy bin (mean and spread) beside the group's Geant4 reference points, so a user can see
at a glance whether a file (real or synthetic) looks like ECAL electron showers.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # the object API renders with Agg, no pyplot state

from evogan.errors import EvoganError
from evogan.physics.inspect import REFERENCE_SAMPLING_FRACTION, Scan
from evogan.plots import save_figure

MAX_PROFILE_BINS = 4


def plot_inspection(scan: Scan, png: str | Path) -> Path:
    """Write the inspection figure of a scanned shower file to ``png`` (atomically)."""
    png = Path(png)
    if not png.parent.is_dir():
        raise EvoganError(f"figure directory must exist: {png.parent} does not (create it first)")
    fig = _figure(scan, scan.source.path.name)
    return save_figure(fig, png)


def _figure(scan: Scan, title: str) -> Figure:
    fig = Figure(figsize=(11, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    chosen = _profile_bins(scan.counts)
    colours = matplotlib.colormaps["viridis"](np.linspace(0.0, 0.85, max(1, len(chosen))))
    for ax, axis, label in zip(
        axes.flat[:3], "xyz", ("x (cell)", "y (cell)", "z (layer, depth)"), strict=True
    ):
        for colour, b in zip(colours, chosen, strict=False):
            prof = scan.profiles[axis][b]
            if axis == "z":  # shapes, not sizes: a 2 GeV shower would be flat at 0 otherwise
                prof = prof / prof.sum()
            ax.step(
                np.arange(len(prof)),
                prof,
                where="mid",
                color=colour,
                label=f"{scan.edges[b]:.0f}-{scan.edges[b + 1]:.0f} GeV",
            )
        ax.set_xlabel(label)
        if axis == "z":
            ax.set_ylabel("fraction of the shower's energy")
            ax.set_title("longitudinal (z) profile, normalised")
        else:
            ax.set_ylabel("mean energy per event (GeV)")
            ax.set_title(f"{axis} profile")
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    _sampling_panel(axes[1, 1], scan)
    fig.suptitle(f"{title}: {len(scan.dataset)} events, layout {scan.dataset.layout}")
    return fig


def _sampling_panel(ax: Axes, scan: Scan) -> None:
    centres = 0.5 * (scan.edges[:-1] + scan.edges[1:])
    half = 0.5 * np.diff(scan.edges)
    bins = np.clip(np.searchsorted(scan.edges, scan.energy, side="right") - 1, 0, len(centres) - 1)
    mean = np.full(len(centres), np.nan)
    std = np.full(len(centres), np.nan)
    for b in range(len(centres)):
        values = scan.sampling_fraction[bins == b]
        if values.size:
            mean[b], std[b] = values.mean(), values.std()
    ax.errorbar(centres, mean, xerr=half, yerr=std, fmt="o", capsize=3, label="this file")
    ref_e, ref_sf = zip(*sorted(REFERENCE_SAMPLING_FRACTION.items()), strict=True)
    ax.plot(ref_e, ref_sf, "s--", color="tab:red", mfc="none", label="Geant4 reference")
    ax.set_xlabel("primary energy (GeV)")
    ax.set_ylabel("sampling fraction (ECAL sum / E)")
    ax.set_title("sampling fraction vs energy (mean ± std per bin)")
    ax.legend(fontsize=8)


def _profile_bins(counts: np.ndarray) -> list[int]:
    """Up to MAX_PROFILE_BINS non-empty energy bins, spread from lowest to highest."""
    filled = [b for b, c in enumerate(counts) if c > 0]
    if len(filled) <= MAX_PROFILE_BINS:
        return filled
    picks = np.linspace(0, len(filled) - 1, MAX_PROFILE_BINS).round().astype(int)
    return [filled[i] for i in picks]
