"""High-level features of every shower: the per-event table all validation metrics compare.

A shower set is condensed once into a :class:`FeatureTable` (one row per event), so the metrics,
the floor (disjoint halves of the reference) and the figures never touch the cells again.
Units (docs/explanation/validation.md):

- ``energy_ratio``: ECAL sum / primary energy (the sampling fraction), dimensionless;
- ``centre_x_mm``, ``centre_y_mm``: energy-weighted centre relative to the window centre, mm
  (5.1 mm cells); ``width_x_mm``, ``width_y_mm``: energy-weighted standard deviation, mm;
- ``centre_z_x0``, ``width_z_x0``: the same along depth in absorber X0 (the layer centres of
  the detector's materials), and ``centre_z_layer``, ``width_z_layer`` in layers;
- ``hits``: cells above the spectrum's lowest edge (3e-4 GeV for a Cartesian grid);
  ``sparsity``: fraction of cells holding no energy;
- ``angle_deg``: measured polar angle from the slope of the per-layer y centre, and
  ``angle_error_deg``: measured minus true angle (only when the caller passes the true angles,
  i.e. for angle-conditioned data). The error is scored, the angle drawn and reported: a
  generator that ignores its angle label can match the measured angles' distribution, never
  their error's;
- profiles: energy per x slice, y slice and layer (GeV), and the single-cell spectrum as counts
  of cells per log10(E/GeV) bin per event (so the spectrum of any subset is a row sum);
- ``layers``: the CaloChallenge high-level features per layer, for every detector
  (:mod:`evogan.physics.layered`: energy, centres and widths in x and y, sparsity).

The table follows the detector (:class:`~evogan.detectors.Detector`, the CLIC ECAL where none
is given): a Cartesian grid is read as a window of its pads (any window size, centred), with
the x, y and z profiles above; a cylindrical detector's table is built from its voxel map by
:func:`evogan.physics.layered.voxel_table`, with the per-layer features as its profiles.

Cells below the table's ``cell_threshold`` count as zero (the rule files are read with,
:func:`evogan.data.cells.zero_below`), as do negative and non-finite cells. Empty or non-finite
showers are flagged in ``bad``; their centres and widths are 0, so every feature is finite.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evogan.data.cells import zero_below
from evogan.detectors import Detector
from evogan.detectors.shipped import detector_for
from evogan.physics import layered

HIT_THRESHOLD = 3e-4  # GeV, the threshold of the group's hit-count plots
SPECTRUM_EDGES = np.linspace(np.log10(HIT_THRESHOLD), 1.0, 23)  # log10(cell E / GeV)
"""Cell-spectrum bins of a Cartesian grid; cells above the top edge are counted in the last bin."""
VOXEL_HIT_THRESHOLD = 1e-6  # GeV: the spectrum of a cylindrical detector starts at 1 keV
VOXEL_SPECTRUM_EDGES = np.linspace(np.log10(VOXEL_HIT_THRESHOLD), 1.0, 29)
"""Voxel-spectrum bins of a cylindrical detector (four per decade; the CaloChallenge datasets'
readout thresholds, 0.015 MeV for datasets 2 and 3, lie above the lowest edge)."""

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
    shape: tuple[int, ...]  # one shower's array: (X, Y, Z), (radial, angular, layer) or (voxels,)
    cell_threshold: float  # GeV: cells below it counted as zero
    layers: dict[str, np.ndarray] = field(default_factory=dict)  # (n, layers) each
    spectrum_edges: np.ndarray = field(default_factory=lambda: SPECTRUM_EDGES)
    detector: Detector | None = None  # None: the CLIC ECAL

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
            {k: v[index] for k, v in self.layers.items()},
            self.spectrum_edges,
            self.detector,
        )

    def scored_names(self) -> list[str]:
        """Scalar features the metrics compare (derived duplicates left out)."""
        return [name for name in self.scalars if name not in DERIVED]

    def matrix(self, names: list[str]) -> np.ndarray:
        """Scalars ``names`` as an (n, len(names)) float64 matrix."""
        return np.stack([self.scalars[name] for name in names], axis=1)


def depth_centres(layers: int, detector: Detector | None = None) -> tuple[np.ndarray, str]:
    """Layer depths in X0 of the detector's absorber (the CLIC ECAL where none is given) when
    the showers have its layers; layer indices for any other depth."""
    detector = detector or detector_for()
    if layers == detector.layers:
        return detector.materials.layer_centres_x0(), "x0"
    return np.arange(layers, dtype=np.float64), "layer"


def depth_mm(layers: int, detector: Detector | None = None) -> np.ndarray:
    """Geometric depth of each layer's middle in mm (absorber plus active layer) when the
    showers have the detector's layers; 10 mm per layer otherwise."""
    detector = detector or detector_for()
    if layers == detector.layers:
        edges = detector.materials.layer_edges_mm()
    else:
        edges = np.arange(layers + 1) * 10.0
    return 0.5 * (edges[:-1] + edges[1:])


def shower_features(
    ecal: np.ndarray,
    energy: np.ndarray,
    theta: np.ndarray | None = None,
    *,
    cell_threshold: float = 0.0,
    detector: Detector | None = None,
) -> FeatureTable:
    """Features of showers ``ecal`` in GeV with primaries ``energy`` in GeV, cells below
    ``cell_threshold`` GeV counted as zero. ``ecal`` is in the detector's held form: (n, X, Y, Z)
    for a Cartesian grid, (n, radial, angular, layer) or flat (n, voxels) for a cylinder.
    Computed in chunks on a float32 copy, so the caller's cells are untouched and a large set
    never needs a float64 copy of them."""
    detector = detector or detector_for()
    ecal = np.asarray(ecal)
    energy = np.asarray(energy, dtype=np.float64).reshape(-1)
    if len(energy) != len(ecal):
        raise ValueError(f"{len(ecal)} showers but {len(energy)} energies")
    if detector.geometry.kind != "cartesian":
        return _voxel_table(ecal, energy, theta, float(cell_threshold), detector)
    if ecal.ndim != 4:
        raise ValueError(f"showers must have shape (n, X, Y, Z), got {ecal.shape}")
    buffer = np.empty((min(len(ecal), _CHUNK), *ecal.shape[1:]), dtype=np.float32)
    cell_mm = detector.geometry.cell_mm
    parts = [
        _chunk_features(ecal[lo : lo + _CHUNK], buffer, cell_threshold, detector)
        for lo in range(0, len(ecal), _CHUNK)
    ] or [_chunk_features(ecal, buffer, cell_threshold, detector)]
    profiles = {a: np.concatenate([p[0][a] for p in parts]) for a in PROFILES}
    spectrum = np.concatenate([p[1] for p in parts])
    counts = {k: np.concatenate([p[2][k] for p in parts]) for k in ("hits", "sparsity", "bad")}
    sums = np.concatenate([p[4] for p in parts])
    scalars = {"energy_ratio": _energy_ratio(profiles["z"].sum(axis=1), energy)}
    shape = tuple(int(s) for s in ecal.shape[1:])
    for axis in ("x", "y"):
        cells = np.arange(shape[PROFILES.index(axis)]) - 0.5 * (shape[PROFILES.index(axis)] - 1)
        mean, width = _moments(profiles[axis], cells * cell_mm)
        scalars[f"centre_{axis}_mm"], scalars[f"width_{axis}_mm"] = mean, width
    _depth_scalars(scalars, profiles["z"], detector)
    scalars["hits"] = counts["hits"].astype(np.float64)
    scalars["sparsity"] = counts["sparsity"]
    if theta is not None:
        _angle_scalars(scalars, np.concatenate([p[3] for p in parts]), theta)
    layers = layered.layer_features(sums, np.full(shape[2], shape[0] * shape[1]))
    bad = counts["bad"].astype(bool)
    return FeatureTable(
        scalars,
        profiles,
        spectrum,
        energy,
        bad,
        shape,
        float(cell_threshold),
        layers,
        SPECTRUM_EDGES,
        detector,
    )


def _voxel_table(
    ecal: np.ndarray,
    energy: np.ndarray,
    theta: np.ndarray | None,
    threshold: float,
    detector: Detector,
) -> FeatureTable:
    """The table of a cylindrical detector, from its flat voxels and voxel map: the whole
    shower's scalars from the per-layer sums, the per-layer features as its profiles."""
    geometry = detector.geometry
    _check_held_form(ecal, detector)
    size = min(len(ecal), _CHUNK)
    buffer = np.empty((size, *ecal.shape[1:]), np.float32)
    work = np.empty(buffer.shape)  # float64, reused by every chunk
    parts = []
    for lo in range(0, max(len(ecal), 1), _CHUNK):
        cells, finite = _clean(ecal[lo : lo + _CHUNK], buffer, threshold)
        spectrum, hits = _spectrum(cells, VOXEL_SPECTRUM_EDGES, VOXEL_HIT_THRESHOLD, uniform=True)
        lit = np.count_nonzero(cells.reshape(len(cells), -1), axis=1)
        sums = layered.cylinder_sums(cells, geometry, work[: len(cells)])
        parts.append((sums, spectrum, hits, lit, finite))
    sums, spectrum, hits, lit, finite = (np.concatenate(p) for p in zip(*parts, strict=True))
    total = sums[..., 0].sum(axis=1)
    scalars = {"energy_ratio": _energy_ratio(total, energy)}
    angular = layered.angular_mask(geometry)
    whole = (sums * angular[:, None]).sum(axis=1)  # x and y: only the layers binned in angle
    for axis, k in (("x", 1), ("y", 3)):
        centre, width = layered.centre_width(whole[:, k], whole[:, k + 1], whole[:, 0])
        scalars[f"centre_{axis}_mm"], scalars[f"width_{axis}_mm"] = centre, width
    _depth_scalars(scalars, sums[..., 0], detector)
    scalars["hits"] = hits.astype(np.float64)
    scalars["sparsity"] = (detector.voxels - lit) / detector.voxels
    if theta is not None:
        depth = depth_mm(detector.layers, detector)
        _angle_scalars(scalars, fitted_angle_deg(sums[..., 0], sums[..., 3], depth), theta)
    layers = layered.layer_features(sums, layered.voxels_per_layer(geometry), angular)
    profiles = {"z": layers["energy"], **{k: layers[k] for k in layered.LAYER_PROFILES}}
    bad = ~finite.astype(bool) | (total <= 0)
    shape = tuple(int(s) for s in ecal.shape[1:])
    return FeatureTable(
        scalars,
        profiles,
        spectrum,
        energy,
        bad,
        shape,
        threshold,
        layers,
        VOXEL_SPECTRUM_EDGES,
        detector,
    )


def _check_held_form(ecal: np.ndarray, detector: Detector) -> None:
    """Showers of a cylindrical detector come flat or as its grid; a ValueError otherwise."""
    shape, grid = tuple(ecal.shape[1:]), detector.grid_shape
    if shape == (detector.voxels,) or (grid is not None and shape == grid):
        return
    forms = f"(n, {detector.voxels})" + (f" or (n, {', '.join(map(str, grid))})" if grid else "")
    raise ValueError(f"showers of {detector.describe()} must be {forms}, got {ecal.shape}")


def _energy_ratio(total: np.ndarray, energy: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(energy > 0, total / energy, 0.0)
    return np.nan_to_num(ratio, nan=0.0, posinf=0.0, neginf=0.0)


def _depth_scalars(scalars: dict, per_layer: np.ndarray, detector: Detector) -> None:
    """Depth moments in X0 (when the showers have the detector's layers) and in layers."""
    depths, unit = depth_centres(per_layer.shape[1], detector)
    if unit == "x0":
        scalars["centre_z_x0"], scalars["width_z_x0"] = _moments(per_layer, depths)
    layer = np.arange(per_layer.shape[1], dtype=np.float64)
    scalars["centre_z_layer"], scalars["width_z_layer"] = _moments(per_layer, layer)


def _angle_scalars(scalars: dict, measured: np.ndarray, theta: np.ndarray) -> None:
    true = np.degrees(np.asarray(theta, dtype=np.float64)).reshape(-1)
    scalars["angle_error_deg"] = measured - np.broadcast_to(true, measured.shape)
    scalars["angle_deg"] = measured


def _clean(chunk: np.ndarray, buffer: np.ndarray, threshold: float) -> tuple[np.ndarray, ...]:
    """``chunk`` as float32 in ``buffer`` (reused by every chunk: no fresh pages per chunk),
    non-finite cells and cells below ``threshold`` set to 0; and which rows were finite."""
    cells = np.asarray(chunk, dtype=np.float32)
    finite = np.isfinite(cells).reshape(len(cells), -1).all(axis=1)
    if not finite.all():
        cells = np.where(np.isfinite(cells), cells, np.float32(0.0))
    np.copyto(buffer[: len(cells)], cells)
    cells = buffer[: len(cells)]
    zero_below(cells, threshold)
    return cells, finite


def _spectrum(
    cells: np.ndarray, edges: np.ndarray, hit_threshold: float, uniform: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Counts of cells per log10(E/GeV) bin of ``edges`` per shower (cells above the top edge
    in the last bin), and the cells above ``hit_threshold`` per shower. ``uniform``: the edges
    are equally spaced, so a cell's bin is arithmetic on its float32 log (4x faster than a
    search; a cell within rounding of an edge may fall on either side)."""
    flat = cells.reshape(len(cells), -1)
    hit = np.flatnonzero(flat > hit_threshold)  # 10x faster than a 2-D np.nonzero
    rows = hit // flat.shape[1]
    if uniform:
        logs = np.log10(flat.reshape(-1)[hit])
        scale = np.float32((edges.size - 1) / (edges[-1] - edges[0]))
        index = ((logs - np.float32(edges[0])) * scale).astype(np.int64)
    else:
        logs = np.log10(flat.reshape(-1)[hit].astype(np.float64))
        index = np.searchsorted(edges, logs, side="right") - 1
    index = np.minimum(np.clip(index, 0, None), edges.size - 2)
    nbins = edges.size - 1
    spectrum = np.bincount(rows * nbins + index, minlength=len(cells) * nbins)
    spectrum = spectrum.reshape(len(cells), nbins).astype(np.float64)
    return spectrum, np.bincount(rows, minlength=len(cells))


def _chunk_features(
    ecal: np.ndarray, buffer: np.ndarray, threshold: float, detector: Detector
) -> tuple[dict, np.ndarray, dict, np.ndarray, np.ndarray]:
    """Profiles, cell spectrum, counts, measured angles and per-layer sums of at most
    ``len(buffer)`` showers of a Cartesian grid. The y and z profiles, the angle fit and the
    per-layer y moments all come from one (n, Y, Z) sum over x, so the cells are passed over a
    few times in float32 and never copied to float64."""
    cells, finite = _clean(ecal, buffer, threshold)
    per_layer = cells.sum(axis=1, dtype=np.float64)  # (n, Y, Z)
    profiles = {
        "x": cells.sum(axis=(2, 3), dtype=np.float64),
        "y": per_layer.sum(axis=2),
        "z": per_layer.sum(axis=1),
    }
    spectrum, hits = _spectrum(cells, SPECTRUM_EDGES, HIT_THRESHOLD)
    flat = cells.reshape(len(cells), -1)
    counts = {
        "hits": hits,
        "sparsity": (flat.shape[1] - np.count_nonzero(flat, axis=1)) / max(flat.shape[1], 1),
        "bad": ~finite | (profiles["z"].sum(axis=1) <= 0),
    }
    cell_mm = detector.geometry.cell_mm
    y_mm = _window_mm(per_layer.shape[1], cell_mm)
    y_sum = np.einsum("nyz,y->nz", per_layer, y_mm)
    angle = fitted_angle_deg(profiles["z"], y_sum, depth_mm(cells.shape[3], detector))
    x_mm = _window_mm(cells.shape[1], cell_mm)
    sums = layered.grid_sums(cells, per_layer, x_mm, y_mm, profiles["z"], y_sum)
    return profiles, spectrum, counts, angle, sums


def _window_mm(cells: int, cell_mm: float) -> np.ndarray:
    """Pad centres of a window of ``cells`` pads, relative to its centre."""
    return (np.arange(cells) - 0.5 * (cells - 1)) * cell_mm


def _moments(profile: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Energy-weighted mean and standard deviation of ``position``; 0 for empty events."""
    total = profile.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    mean = profile @ position / safe
    var = profile @ position**2 / safe - mean**2
    filled = total > 0
    return np.where(filled, mean, 0.0), np.where(filled, np.sqrt(np.maximum(var, 0.0)), 0.0)


def fitted_angle_deg(weight: np.ndarray, y_sum: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Polar angle (deg) from an energy-weighted straight-line fit of the per-layer y centre
    against the layer depth in mm: y drifts by depth x cot(theta). 90 deg for empty events.
    ``weight``: each shower's energy per layer (n, Z); ``y_sum``: its sum of E y per layer in
    mm (n, Z), cells cleaned and >= 0; ``depth``: the layers' depths in mm (:func:`depth_mm`)."""
    safe = np.where(weight > 0, weight, 1.0)
    y_centre = y_sum / safe
    total = weight.sum(axis=1)
    safe_total = np.where(total > 0, total, 1.0)
    mean_z = weight @ depth / safe_total
    mean_y = (weight * y_centre).sum(axis=1) / safe_total
    dz = depth[None, :] - mean_z[:, None]
    cov = (weight * dz * (y_centre - mean_y[:, None])).sum(axis=1)
    var = (weight * dz**2).sum(axis=1)
    slope = np.where(var > 0, cov / np.where(var > 0, var, 1.0), 0.0)
    return np.degrees(np.arctan2(1.0, slope))
