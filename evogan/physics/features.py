"""High-level features of every shower: the per-event table all validation metrics compare.

A shower set is condensed once into a :class:`FeatureTable` (one row per event), so the metrics,
the floor (disjoint halves of the reference) and the figures never touch the cells again.
Units (docs/validation.md):

- ``energy_ratio``: ECAL sum / primary energy (the sampling fraction), dimensionless;
- ``centre_x_mm``, ``centre_y_mm``: energy-weighted centre relative to the window centre, mm
  (5.1 mm cells); ``width_x_mm``, ``width_y_mm``: energy-weighted standard deviation, mm;
- ``centre_z_x0``, ``width_z_x0``: the same along depth in tungsten X0 (layer centres of
  :mod:`evogan.data.detector`), and ``centre_z_layer``, ``width_z_layer`` in layers;
- ``hits``: cells above 3e-4 GeV; ``sparsity``: fraction of cells holding no energy;
- ``angle_deg``: measured polar angle from the slope of the per-layer y centre, and
  ``angle_error_deg``: measured minus true angle (only when the caller passes the true angles,
  i.e. for angle-conditioned data). The error is scored, the angle drawn and reported: a
  generator that ignores its angle label can match the measured angles' distribution, never
  their error's;
- profiles: energy per x slice, y slice and layer (GeV), and the single-cell spectrum as counts
  of cells per log10(E/GeV) bin per event (so the spectrum of any subset is a row sum).

Cells below the table's ``cell_threshold`` count as zero (the rule files are read with,
:func:`evogan.data.cells.zero_below`), as do negative and non-finite cells. Empty or non-finite
showers are flagged in ``bad``; their centres and widths are 0, so every feature is finite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evogan.data import detector as det
from evogan.data.cells import zero_below

HIT_THRESHOLD = 3e-4  # GeV, the threshold of the group's hit-count plots
SPECTRUM_EDGES = np.linspace(np.log10(HIT_THRESHOLD), 1.0, 23)  # log10(cell E / GeV)
"""Cell-spectrum bins; cells above the top edge are counted in the last bin."""

UNITS = {
    "energy_ratio": "E_total / E_primary",
    "centre_x_mm": "mm",
    "centre_y_mm": "mm",
    "centre_z_x0": "X0",
    "centre_z_layer": "layer",
    "width_x_mm": "mm",
    "width_y_mm": "mm",
    "width_z_x0": "X0",
    "width_z_layer": "layer",
    "hits": "cells > 3e-4 GeV",
    "sparsity": "fraction of empty cells",
    "angle_deg": "deg",
    "angle_error_deg": "deg",
}
DERIVED = ("centre_z_layer", "width_z_layer", "angle_deg")
"""Scalars drawn and reported, not scored: the depth moments again in layers, and the measured
angle, which is scored as its error against the true angle."""
PROFILES = ("x", "y", "z")
PROFILE_UNITS = {"x": "x slice (mm)", "y": "y slice (mm)", "z": "layer"}
_CHUNK = 256


@dataclass(frozen=True)
class FeatureTable:
    """Per-event features of one shower set (all arrays have the events on axis 0)."""

    scalars: dict[str, np.ndarray]
    profiles: dict[str, np.ndarray]  # "x", "y", "z": energy per slice / layer, GeV
    spectrum: np.ndarray  # (n, len(SPECTRUM_EDGES) - 1) cells per bin
    energy: np.ndarray  # primary energy, GeV
    bad: np.ndarray  # empty or non-finite showers
    shape: tuple[int, int, int]
    cell_threshold: float  # GeV: cells below it counted as zero

    def __len__(self) -> int:
        return len(self.energy)

    def subset(self, index: np.ndarray) -> FeatureTable:
        """The rows ``index`` (indices or a boolean mask) as a new table."""
        return FeatureTable(
            {k: v[index] for k, v in self.scalars.items()},
            {k: v[index] for k, v in self.profiles.items()},
            self.spectrum[index],
            self.energy[index],
            self.bad[index],
            self.shape,
            self.cell_threshold,
        )

    def scored_names(self) -> list[str]:
        """Scalar features the metrics compare (derived duplicates left out)."""
        return [name for name in self.scalars if name not in DERIVED]

    def matrix(self, names: list[str]) -> np.ndarray:
        """Scalars ``names`` as an (n, len(names)) float64 matrix."""
        return np.stack([self.scalars[name] for name in names], axis=1)


def depth_centres(layers: int) -> tuple[np.ndarray, str]:
    """Layer depths in X0 for the CLIC ECAL; layer indices for any other depth."""
    if layers == det.LAYERS:
        return det.layer_centres_x0(), "x0"
    return np.arange(layers, dtype=np.float64), "layer"


def shower_features(
    ecal: np.ndarray,
    energy: np.ndarray,
    theta: np.ndarray | None = None,
    *,
    cell_threshold: float = 0.0,
) -> FeatureTable:
    """Features of showers ``ecal`` (n, X, Y, Z) in GeV with primaries ``energy`` in GeV, cells
    below ``cell_threshold`` GeV counted as zero; computed in chunks on a float32 copy, so the
    caller's cells are untouched and a large set never needs a float64 copy of them."""
    ecal = np.asarray(ecal)
    if ecal.ndim != 4:
        raise ValueError(f"showers must have shape (n, X, Y, Z), got {ecal.shape}")
    energy = np.asarray(energy, dtype=np.float64).reshape(-1)
    if len(energy) != len(ecal):
        raise ValueError(f"{len(ecal)} showers but {len(energy)} energies")
    buffer = np.empty((min(len(ecal), _CHUNK), *ecal.shape[1:]), dtype=np.float32)
    parts = [
        _chunk_features(ecal[lo : lo + _CHUNK], buffer, cell_threshold)
        for lo in range(0, len(ecal), _CHUNK)
    ]
    if not parts:
        parts = [_chunk_features(ecal, buffer, cell_threshold)]
    profiles = {a: np.concatenate([p[0][a] for p in parts]) for a in PROFILES}
    spectrum = np.concatenate([p[1] for p in parts])
    counts = {k: np.concatenate([p[2][k] for p in parts]) for k in ("hits", "sparsity", "bad")}
    bad = counts["bad"].astype(bool)
    total = profiles["z"].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(energy > 0, total / energy, 0.0)
    scalars = {"energy_ratio": np.nan_to_num(ratio, nan=0.0, posinf=0.0, neginf=0.0)}
    shape = tuple(int(s) for s in ecal.shape[1:])
    for axis in ("x", "y"):
        cells = np.arange(shape[PROFILES.index(axis)]) - 0.5 * (shape[PROFILES.index(axis)] - 1)
        mean, width = _moments(profiles[axis], cells * det.CELL_MM)
        scalars[f"centre_{axis}_mm"], scalars[f"width_{axis}_mm"] = mean, width
    depths, unit = depth_centres(shape[2])
    if unit == "x0":
        scalars["centre_z_x0"], scalars["width_z_x0"] = _moments(profiles["z"], depths)
    layer = np.arange(shape[2], dtype=np.float64)
    scalars["centre_z_layer"], scalars["width_z_layer"] = _moments(profiles["z"], layer)
    scalars["hits"] = counts["hits"].astype(np.float64)
    scalars["sparsity"] = counts["sparsity"]
    if theta is not None:
        measured = np.concatenate([p[3] for p in parts])
        true = np.degrees(np.asarray(theta, dtype=np.float64)).reshape(-1)
        scalars["angle_error_deg"] = measured - np.broadcast_to(true, measured.shape)
        scalars["angle_deg"] = measured
    return FeatureTable(scalars, profiles, spectrum, energy, bad, shape, float(cell_threshold))


def _chunk_features(
    ecal: np.ndarray, buffer: np.ndarray, threshold: float
) -> tuple[dict, np.ndarray, dict, np.ndarray]:
    """Profiles, cell spectrum, counts and measured angles of at most ``len(buffer)`` showers.
    The cleaned cells go to ``buffer`` (reused by every chunk: no fresh pages per chunk); the y
    and z profiles and the angle fit all come from one (n, Y, Z) sum over x, so the cells are
    passed over a few times in float32 and never copied to float64."""
    cells = np.asarray(ecal, dtype=np.float32)
    finite = np.isfinite(cells).reshape(len(cells), -1).all(axis=1)
    if not finite.all():
        cells = np.where(np.isfinite(cells), cells, np.float32(0.0))
    np.copyto(buffer[: len(cells)], cells)
    cells = buffer[: len(cells)]
    zero_below(cells, threshold)
    per_layer = cells.sum(axis=1, dtype=np.float64)  # (n, Y, Z)
    profiles = {
        "x": cells.sum(axis=(2, 3), dtype=np.float64),
        "y": per_layer.sum(axis=2),
        "z": per_layer.sum(axis=1),
    }
    flat = cells.reshape(len(cells), -1)
    hit = np.flatnonzero(flat > HIT_THRESHOLD)  # 10x faster than a 2-D np.nonzero
    rows = hit // flat.shape[1]
    logs = np.log10(flat.reshape(-1)[hit].astype(np.float64))
    index = np.clip(np.searchsorted(SPECTRUM_EDGES, logs, side="right") - 1, 0, None)
    index = np.minimum(index, SPECTRUM_EDGES.size - 2)
    nbins = SPECTRUM_EDGES.size - 1
    spectrum = np.bincount(rows * nbins + index, minlength=len(cells) * nbins)
    counts = {
        "hits": np.bincount(rows, minlength=len(cells)),
        "sparsity": (flat.shape[1] - np.count_nonzero(flat, axis=1)) / max(flat.shape[1], 1),
        "bad": ~finite | (profiles["z"].sum(axis=1) <= 0),
    }
    spectrum = spectrum.reshape(len(cells), nbins).astype(np.float64)
    return profiles, spectrum, counts, fitted_angle_deg(per_layer)


def _moments(profile: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Energy-weighted mean and standard deviation of ``position``; 0 for empty events."""
    total = profile.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    mean = profile @ position / safe
    var = profile @ position**2 / safe - mean**2
    filled = total > 0
    return np.where(filled, mean, 0.0), np.where(filled, np.sqrt(np.maximum(var, 0.0)), 0.0)


def fitted_angle_deg(per_layer: np.ndarray) -> np.ndarray:
    """Polar angle (deg) from an energy-weighted straight-line fit of the per-layer y centre
    against the layer depth in mm: y drifts by depth x cot(theta). 90 deg for empty events.
    ``per_layer``: each shower's energy summed over x, (n, Y, Z), cells cleaned and >= 0."""
    layers = per_layer.shape[2]
    edges = det.layer_edges_mm() if layers == det.LAYERS else np.arange(layers + 1) * 10.0
    depth = 0.5 * (edges[:-1] + edges[1:])
    weight = per_layer.sum(axis=1)  # (n, Z)
    y_mm = (np.arange(per_layer.shape[1]) - 0.5 * (per_layer.shape[1] - 1)) * det.CELL_MM
    safe = np.where(weight > 0, weight, 1.0)
    y_centre = np.einsum("nyz,y->nz", per_layer, y_mm) / safe
    total = weight.sum(axis=1)
    safe_total = np.where(total > 0, total, 1.0)
    mean_z = weight @ depth / safe_total
    mean_y = (weight * y_centre).sum(axis=1) / safe_total
    dz = depth[None, :] - mean_z[:, None]
    cov = (weight * dz * (y_centre - mean_y[:, None])).sum(axis=1)
    var = (weight * dz**2).sum(axis=1)
    slope = np.where(var > 0, cov / np.where(var > 0, var, 1.0), 0.0)
    return np.degrees(np.arctan2(1.0, slope))
