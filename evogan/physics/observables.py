"""Shower observables on batches of calorimeter images, vectorised over events.

Every function takes ``ecal`` of shape (n, X, Y, Z) in GeV (z = depth) and returns one value
(or one row) per event, so the same code serves ``evogan data inspect``, GAN validation and
the tests. Sums are accumulated in float64 whatever the input dtype.

- ``total_energy(ecal)``: ECAL sum per event, (n,).
- ``sampling_fraction(ecal, energy)``: ECAL sum / primary energy, (n,).
- ``profile(ecal, axis)``, ``x_profile``, ``y_profile``, ``z_profile``: energy summed over the
  other two axes, (n, size of axis); ``longitudinal_profile`` is the z profile.
- ``shower_max_depth_x0(ecal, layer_centres)``: depth of the longitudinal maximum, (n,).
- ``moments(ecal, axis)``: energy-weighted mean and spread along an axis in cell units.
- ``hit_count(ecal, threshold)``: cells above a threshold (3e-4 GeV in the 3DGAN plots), (n,).
- ``empty_cell_fraction(ecal)``: fraction of cells with no energy, (n,).
- ``binned_mean(values, energy, edges)``: mean, std and count of a per-event value in energy
  bins, the form in which the sampling fraction and moments are compared with the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Axis = Literal["x", "y", "z"] | int
_AXES = {"x": 0, "y": 1, "z": 2}


def _batch(ecal: np.ndarray) -> np.ndarray:
    ecal = np.asarray(ecal)
    if ecal.ndim != 4:
        raise ValueError(f"ecal must have shape (n, X, Y, Z), got {ecal.shape}")
    return ecal


def _axis_index(axis: Axis) -> int:
    index = _AXES.get(axis, axis) if isinstance(axis, str) else axis
    if index not in (0, 1, 2):
        raise ValueError(f"axis must be 'x', 'y', 'z' or 0-2, got {axis!r}")
    return int(index)


def total_energy(ecal: np.ndarray) -> np.ndarray:
    """ECAL sum per event (GeV), float64."""
    ecal = _batch(ecal)
    return ecal.reshape(len(ecal), -1).sum(axis=1, dtype=np.float64)


def sampling_fraction(ecal: np.ndarray, energy: np.ndarray) -> np.ndarray:
    """ECAL sum / primary energy per event: the key number the GAN must reproduce vs energy."""
    return total_energy(ecal) / np.asarray(energy, dtype=np.float64).reshape(-1)


def profile(ecal: np.ndarray, axis: Axis) -> np.ndarray:
    """Energy per slice along ``axis`` (summed over the two other axes), shape (n, size)."""
    ecal = _batch(ecal)
    keep = _axis_index(axis)
    others = tuple(1 + a for a in range(3) if a != keep)
    return ecal.sum(axis=others, dtype=np.float64)


def x_profile(ecal: np.ndarray) -> np.ndarray:
    """Energy per x column, (n, X)."""
    return profile(ecal, "x")


def y_profile(ecal: np.ndarray) -> np.ndarray:
    """Energy per y row, (n, Y)."""
    return profile(ecal, "y")


def z_profile(ecal: np.ndarray) -> np.ndarray:
    """Energy per layer, (n, Z)."""
    return profile(ecal, "z")


longitudinal_profile = z_profile


def shower_max_depth_x0(ecal: np.ndarray, layer_centres: np.ndarray) -> np.ndarray:
    """Depth (in the units of ``layer_centres``, X0 for ours) of the longitudinal maximum.

    Method: the vertex of the parabola through the maximum layer and its two neighbours (exact
    for non-uniform layer spacing), clipped to those neighbours' centres; at the first or last
    layer, that layer's centre. The per-layer profile is used as is: in the CLIC ECAL a thick
    layer has twice the tungsten but half the sampling, so visible energy per layer is
    proportional to dE/dt in both sections. Empty events give NaN.
    """
    prof = z_profile(ecal)
    centres = np.asarray(layer_centres, dtype=np.float64)
    if centres.shape != (prof.shape[1],):
        raise ValueError(
            f"layer_centres must have one depth per layer ({prof.shape[1]}), got {centres.shape}"
        )
    depth = peak_depth(prof, centres)
    depth[prof.max(axis=1) <= 0] = np.nan
    return depth


def moments(ecal: np.ndarray, axis: Axis) -> tuple[np.ndarray, np.ndarray]:
    """Energy-weighted mean and standard deviation along ``axis``, in cell units (0 = first).

    These are the first and second moments of the 3DGAN validation; empty events give NaN.
    """
    prof = profile(ecal, axis)
    index = np.arange(prof.shape[1], dtype=np.float64)
    total = prof.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = prof @ index / total
        var = prof @ index**2 / total - mean**2
    return mean, np.sqrt(np.maximum(var, 0.0))


def hit_count(ecal: np.ndarray, threshold: float = 3e-4) -> np.ndarray:
    """Number of cells above ``threshold`` GeV per event."""
    ecal = _batch(ecal)
    return (ecal.reshape(len(ecal), -1) > threshold).sum(axis=1)


def peak_depth(profile: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Per row of ``profile`` (n, layers), the vertex of the parabola through its largest layer
    and that layer's two neighbours, at ``centres`` (exact for uneven spacing), clipped to the
    neighbours' centres; a first or last layer gives its own centre."""
    layers = profile.shape[1]
    peak = profile.argmax(axis=1)
    depth = centres[peak].astype(np.float64)
    rows = np.flatnonzero((peak > 0) & (peak < layers - 1))
    if rows.size:
        i = peak[rows]
        x0, x1, x2 = centres[i - 1], centres[i], centres[i + 1]
        y0, y1, y2 = profile[rows, i - 1], profile[rows, i], profile[rows, i + 1]
        # Vertex of the Lagrange parabola through three points.
        num = (x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)
        den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)
        with np.errstate(divide="ignore", invalid="ignore"):
            vertex = x1 - 0.5 * num / den
        depth[rows] = np.clip(np.where(np.isfinite(vertex), vertex, x1), x0, x2)
    return depth


def empty_cell_fraction(ecal: np.ndarray) -> np.ndarray:
    """Fraction of cells holding no energy (<= 0) per event: the sparsity of the images."""
    ecal = _batch(ecal)
    flat = ecal.reshape(len(ecal), -1)
    return (flat <= 0).sum(axis=1) / flat.shape[1]


@dataclass(frozen=True)
class BinnedMean:
    """Per-bin statistics of a per-event value; empty bins hold NaN mean and std."""

    edges: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    count: np.ndarray

    @property
    def centres(self) -> np.ndarray:
        return 0.5 * (self.edges[:-1] + self.edges[1:])


def binned_mean(values: np.ndarray, energy: np.ndarray, edges: np.ndarray) -> BinnedMean:
    """Mean, population std and count of ``values`` in bins of ``energy`` (right edge included
    in the last bin, events outside the edges ignored)."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    energy = np.asarray(energy, dtype=np.float64).reshape(-1)
    edges = np.asarray(edges, dtype=np.float64)
    if values.shape != energy.shape:
        raise ValueError(f"values and energy must match, got {values.shape} and {energy.shape}")
    if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"edges must be at least two increasing values, got {edges}")
    bins = np.searchsorted(edges, energy, side="right") - 1
    bins[energy == edges[-1]] = edges.size - 2
    ok = (bins >= 0) & (bins < edges.size - 1)
    nbins = edges.size - 1
    count = np.bincount(bins[ok], minlength=nbins)
    total = np.bincount(bins[ok], weights=values[ok], minlength=nbins)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(count > 0, total / count, np.nan)
        residual = values[ok] - mean[bins[ok]]  # two passes: no cancellation in the variance
        var = np.bincount(bins[ok], weights=residual**2, minlength=nbins) / count
    return BinnedMean(edges=edges, mean=mean, std=np.sqrt(var), count=count)
