"""The figure of ``evogan data inspect --plot``: shower shapes and sampling fraction vs energy.

Four panels: mean x and y profiles (mm from the grid's centre, as in ``evogan validate``) and
the longitudinal profile (layers, X0 on top) in a few energy bins, and the sampling fraction
per energy bin (mean and its standard error) beside what the report's ``ref`` column compares
it with (the CLIC ECAL's Geant4 fit, or another detector's nominal value), with their ratio
below, so a user can see at a glance whether a file (real or synthetic) looks like ECAL
electron showers and by how much its energy scale differs.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # the object API renders with Agg, no pyplot state

from evogan.detectors import detector_for
from evogan.errors import EvoganError
from evogan.physics.inspect import REFERENCE_SAMPLING_FRACTION, Scan, compared_sampling_fraction
from evogan.plots import save_figure
from evogan.plots.scales import LOG_ENERGY_SPAN, x0_axis

MAX_PROFILE_BINS = 4


def plot_inspection(scan: Scan, png: str | Path) -> Path:
    """Write the inspection figure of a scanned shower file to ``png`` (atomically)."""
    png = Path(png)
    if not png.parent.is_dir():
        raise EvoganError(f"figure directory must exist: {png.parent} does not (create it first)")
    fig = inspection_figure(scan, scan.source.path.name)
    return save_figure(fig, png)


def inspection_figure(scan: Scan, title: str) -> Figure:
    """The four panels of :func:`plot_inspection` (the last over its ratio panel)."""
    fig = Figure(figsize=(11, 8.5), layout="constrained")
    grid = fig.add_gridspec(2, 2)
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, 0])]
    chosen = _profile_bins(scan.counts)
    colours = matplotlib.colormaps["viridis"](np.linspace(0.0, 0.85, max(1, len(chosen))))
    detector = scan.dataset.detector
    pitch = detector_for("clic-ecal").geometry.cell_mm
    if detector is not None and detector.geometry.kind == "cartesian":
        pitch = detector.geometry.cell_mm
    for ax, axis in zip(axes, "xyz", strict=True):
        for colour, b in zip(colours, chosen, strict=False):
            prof = scan.profiles[axis][b]
            if axis == "z":  # shapes, not sizes: a 2 GeV shower would be flat at 0 otherwise
                prof = prof / prof.sum()
                x = np.arange(len(prof))
            else:
                x = (np.arange(len(prof)) - 0.5 * (len(prof) - 1)) * pitch
            label = f"{scan.edges[b]:.0f}-{scan.edges[b + 1]:.0f} GeV"
            ax.step(x, prof, where="mid", color=colour, label=label)
        if axis == "z":
            ax.set_xlabel("layer")
            ax.set_ylabel("fraction of the shower's energy")
            ax.set_title("longitudinal profile, normalised")
            x0_axis(ax, scan.profiles["z"].shape[1], detector)
        else:
            ax.set_xlabel(f"{axis} slice (mm)")
            ax.set_ylabel("mean energy per event (GeV)")
            ax.set_title(f"{axis} profile")
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    sampling = grid[1, 1].subgridspec(2, 1, height_ratios=(3, 1), hspace=0.0)
    top = fig.add_subplot(sampling[0])
    _sampling_panel(top, fig.add_subplot(sampling[1], sharex=top), scan)
    fig.suptitle(f"{title}: {len(scan.dataset)} events, layout {scan.dataset.layout}")
    return fig


def _sampling_panel(top: Axes, ratio: Axes, scan: Scan) -> None:
    """Mean sampling fraction per energy bin with its standard error, the curve the report
    compares it with over the file's energies, and their ratio below."""
    centres = 0.5 * (scan.edges[:-1] + scan.edges[1:])
    half = 0.5 * np.diff(scan.edges)
    bins = np.clip(np.searchsorted(scan.edges, scan.energy, side="right") - 1, 0, len(centres) - 1)
    mean = np.full(len(centres), np.nan)
    error = np.full(len(centres), np.nan)
    for b in range(len(centres)):
        values = scan.sampling_fraction[bins == b]
        if values.size:
            mean[b] = values.mean()
            error[b] = values.std(ddof=1) / np.sqrt(values.size) if values.size > 1 else np.nan
    detector = scan.dataset.detector
    compared, name = compared_sampling_fraction(centres, detector)
    low, high = float(scan.edges[0]), float(scan.edges[-1])
    log = low > 0 and high / low > LOG_ENERGY_SPAN
    line = np.geomspace(low, high, 60) if log else np.linspace(low, high, 60)
    top.plot(line, compared_sampling_fraction(line, detector)[0], "--", color="tab:red",
             label=f"{name} reference")  # fmt: skip
    if name == "Geant4":
        fit = [(e, v) for e, v in sorted(REFERENCE_SAMPLING_FRACTION.items()) if low <= e <= high]
        if fit:
            energies, values = zip(*fit, strict=True)
            top.plot(energies, values, "s", color="tab:red", mfc="none", label="Geant4 fit points")
    top.errorbar(centres, mean, xerr=half, yerr=error, fmt="o", capsize=3,
                 label="this file (mean ± standard error)")  # fmt: skip
    top.set_ylabel("sampling fraction (ECAL sum / E)")
    top.set_title("sampling fraction vs energy")
    top.tick_params(labelbottom=False)
    top.legend(fontsize=8)
    ratio.errorbar(centres, mean / compared, xerr=half, yerr=error / compared, fmt="o", capsize=3)
    ratio.axhline(1.0, color="tab:red", ls="--", lw=0.8)
    ratio.set_ylabel(f"file / {name}")
    ratio.set_xlabel("primary energy (GeV)")
    margin = 0.02 * (high - low)
    ratio.set_xlim(low - margin, high + margin)
    if log:
        ratio.set_xscale("log")
        ratio.set_xlim(low / 1.05, high * 1.05)
    for ax in (top, ratio):
        ax.grid(alpha=0.3)


def _profile_bins(counts: np.ndarray) -> list[int]:
    """Up to MAX_PROFILE_BINS non-empty energy bins, spread from lowest to highest."""
    filled = [b for b, c in enumerate(counts) if c > 0]
    if len(filled) <= MAX_PROFILE_BINS:
        return filled
    picks = np.linspace(0, len(filled) - 1, MAX_PROFILE_BINS).round().astype(int)
    return [filled[i] for i in picks]
