"""The figure of ``evogan data inspect --plot``, read from its matplotlib axes: the energy axis
spans the file's energies, the sampling fraction's error bars are standard errors of the mean
(so a steady offset from the reference shows) with their ratio to the report's reference
below, and the profiles are in mm and layers (X0 on top) as in ``evogan validate``."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from evogan.data.synthetic import write_synthetic
from evogan.detectors import detector_for
from evogan.physics.inspect import (
    compared_sampling_fraction,
    reference_sampling_fraction,
    scan_file,
)
from evogan.plots.data import inspection_figure

LOW, HIGH = 10.0, 200.0


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    path = write_synthetic(tmp_path_factory.mktemp("figure") / "ref.h5", 300, (LOW, HIGH), 8)
    scan = scan_file(path)
    return scan, inspection_figure(scan, "ref.h5")


def _axis(fig: Figure, ylabel: str) -> Axes:
    return next(ax for ax in fig.axes if ax.get_ylabel() == ylabel)


def _sem(scan) -> tuple[np.ndarray, np.ndarray]:
    """Mean sampling fraction per energy bin and its standard error, computed here."""
    bins = np.clip(
        np.searchsorted(scan.edges, scan.energy, side="right") - 1, 0, len(scan.edges) - 2
    )
    groups = [scan.sampling_fraction[bins == b] for b in range(len(scan.edges) - 1)]
    mean = np.array([g.mean() for g in groups])
    return mean, np.array([g.std(ddof=1) / np.sqrt(g.size) for g in groups])


def test_energy_axis_spans_the_files_energies(scanned) -> None:
    scan, fig = scanned
    sampling = _axis(fig, "sampling fraction (ECAL sum / E)")
    low, high = sampling.get_xlim()
    assert scan.edges[0] - 10 < low <= scan.edges[0] and scan.edges[-1] <= high < HIGH + 10
    assert sampling.get_xscale() == "linear"


def test_sampling_fraction_error_bars_are_standard_errors(scanned) -> None:
    scan, fig = scanned
    mean, sem = _sem(scan)
    sampling = _axis(fig, "sampling fraction (ECAL sum / E)")
    (bars,) = [c for c in sampling.containers if "standard error" in c.get_label()]
    assert np.allclose(bars.lines[0].get_ydata(), mean)
    vertical = bars.lines[2][-1].get_segments()  # the y error bars (the last collection)
    assert np.allclose([s[1][1] - s[0][1] for s in vertical], 2 * sem)
    centres = 0.5 * (scan.edges[:-1] + scan.edges[1:])
    compared, name = compared_sampling_fraction(centres, scan.dataset.detector)
    assert name == "Geant4"
    assert compared == pytest.approx([reference_sampling_fraction(e) for e in centres])
    ratio = _axis(fig, "file / Geant4")
    (points,) = ratio.containers
    assert np.allclose(points.lines[0].get_ydata(), mean / compared)
    # the synthetic set sits 3-4% under the Geant4 fit: more than 3 standard errors per bin
    assert ((compared - mean) / sem > 3).all()


def test_profiles_in_mm_and_layers_with_depth_on_top(scanned) -> None:
    scan, fig = scanned
    pitch = detector_for("clic-ecal").geometry.cell_mm
    half = 0.5 * (scan.dataset.shape[0] - 1) * pitch
    for axis in "xy":
        ax = next(a for a in fig.axes if a.get_xlabel() == f"{axis} slice (mm)")
        xs = np.concatenate([line.get_xdata() for line in ax.lines])
        assert xs.min() == pytest.approx(-half) and xs.max() == pytest.approx(half)
    depth = next(a for a in fig.axes if a.get_xlabel() == "layer")
    (top,) = depth.child_axes
    assert top.get_xlabel() == "depth (X0)"
