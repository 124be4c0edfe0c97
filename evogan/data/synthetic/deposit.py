"""From spots to cells: each spot's layer and visible fraction (sampling), then its cell.

Sampling. The CLIC ECAL keeps its calibrated scheme: a thin layer turns
``VISIBLE_PER_ABSORBED`` of its absorbed energy into silicon signal, a thick layer (same silicon,
twice the tungsten) half of that, so deeper, higher-energy showers sample less, as in the Geant4
reference table (docs/explanation/physics.md section 1). Any other detector turns its nominal
``materials.sampling_fraction`` of every layer's absorbed energy into signal. A spot's layer is
where its depth in X0 falls among the layer boundaries of ``materials``; deeper is leakage.

Cells. Transverse spot positions come relative to the shower axis. A Cartesian grid takes them
in cell widths (window centred on the axis); a cylindrical binning in mm, binned by radius with
the layer's ``r_edges`` (beyond the last edge is leakage) and by angle alpha = atan2(y, x) in
equal bins over (-pi, pi]; a layer with no voxel drops what falls in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from evogan.detectors.geometry import CartesianGrid, CylindricalBinning, Geometry, LayerBins
from evogan.detectors.materials import Materials
from evogan.detectors.shipped import CLIC_MATERIALS

# Calibrated once against the reference sampling-fraction table (scripts/bench_synth.py
# --physics 1000) to the smallest worst-case deviation: +3.3% at 2 GeV, -3.5% at 50-100 GeV.
VISIBLE_PER_ABSORBED = 0.02408
THICK_TO_THIN = 0.5


def transverse_unit_mm(geometry: Geometry) -> float:
    """The length one unit of the spots' transverse coordinates stands for in ``geometry``."""
    return geometry.cell_mm if isinstance(geometry, CartesianGrid) else 1.0


def layer_and_visible(depth_x0: np.ndarray, materials: Materials) -> tuple[np.ndarray, np.ndarray]:
    """Layer index of each spot (``materials.layers`` = behind the calorimeter) and the visible
    fraction of its energy."""
    if materials == CLIC_MATERIALS:
        return _clic_layers(depth_x0)
    edges = materials.layer_edges_x0().astype(np.float32)
    layer = np.searchsorted(edges[1:], depth_x0, side="right")
    return layer, np.full(len(depth_x0), materials.sampling_fraction, dtype=np.float32)


def _clic_layers(depth_x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CLIC thin/thick scheme, in the float32 arithmetic the reference outputs were made in."""
    absorber, x0 = CLIC_MATERIALS.absorber_mm, CLIC_MATERIALS.x0_mm
    thin_layers = absorber.count(absorber[0])
    thin_x0, thick_x0 = absorber[0] / x0, absorber[-1] / x0
    thin_depth_x0 = thin_layers * absorber[0] / x0
    thin = depth_x0 < thin_depth_x0
    layer = np.where(
        thin,
        depth_x0 / np.float32(thin_x0),
        thin_layers + (depth_x0 - np.float32(thin_depth_x0)) / np.float32(thick_x0),
    )
    layer = np.minimum(layer, len(absorber)).astype(np.int64)
    visible = np.where(
        thin, np.float32(VISIBLE_PER_ABSORBED), np.float32(VISIBLE_PER_ABSORBED * THICK_TO_THIN)
    )
    return layer, visible


def deposit(
    geometry: Geometry,
    counts: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    layer: np.ndarray,
    energy: np.ndarray,
) -> np.ndarray:
    """Sum the spots (``counts`` per shower; position in :func:`transverse_unit_mm`, layer,
    visible energy) into ``geometry``'s cells: the grid form where it has one, else flat."""
    if isinstance(geometry, CartesianGrid):
        index = _cartesian_index(geometry, x, y, layer)
    else:
        index = _cylindrical_index(geometry, x, y, layer)
    n, voxels = counts.size, geometry.voxels
    outside = index < 0
    index += np.repeat(np.arange(n, dtype=np.int64) * voxels, counts)
    index[outside] = n * voxels  # one overflow cell collects all leakage
    cells = np.zeros(n * voxels + 1, dtype=np.float32)
    np.add.at(cells, index, energy)
    flat = cells[:-1].reshape(n, voxels)
    if isinstance(geometry, CartesianGrid):
        return flat.reshape(n, *geometry.grid_shape)
    if geometry.grid_shape is None:
        return flat
    return np.ascontiguousarray(geometry.to_grid(flat))


def _cell_index(offset_cells: np.ndarray, cells: int) -> np.ndarray:
    """Pad index along one transverse axis (window centred on the axis entry point).

    Far-out spots (the radial tail reaches huge r) are clipped to -1 so the int cast is safe.
    """
    index = offset_cells + np.float32(cells / 2)
    np.clip(index, -1.0, cells, out=index)
    return np.floor(index, out=index).astype(np.int64)


def _cartesian_index(
    grid: CartesianGrid, x: np.ndarray, y: np.ndarray, layer: np.ndarray
) -> np.ndarray:
    """Cell of each spot within its shower in (x, y, layer) order; -1 outside the window."""
    ix = _cell_index(x, grid.cells_x)
    iy = _cell_index(y, grid.cells_y)
    inside = (ix >= 0) & (ix < grid.cells_x) & (iy >= 0) & (iy < grid.cells_y)
    inside &= layer < grid.layers
    index = (ix * grid.cells_y + iy) * grid.layers + layer
    index[~inside] = -1
    return index


@dataclass(frozen=True)
class _Group:
    """Layers binned alike, and where each of them starts in the flat voxel order."""

    bins: LayerBins
    layers: np.ndarray
    starts: np.ndarray


@cache
def _groups(binning: CylindricalBinning) -> tuple[_Group, ...]:
    starts = np.concatenate(([0], np.cumsum([b.voxels for b in binning.layer_bins])[:-1]))
    by_bins: dict[LayerBins, list[int]] = {}
    for index, bins in enumerate(binning.layer_bins):
        if bins.voxels:
            by_bins.setdefault(bins, []).append(index)
    return tuple(_Group(bins, np.array(layers), starts[layers]) for bins, layers in by_bins.items())


def _cylindrical_index(
    binning: CylindricalBinning, x_mm: np.ndarray, y_mm: np.ndarray, layer: np.ndarray
) -> np.ndarray:
    """Voxel of each spot within its shower in file order (radial fastest, then angular, then
    layer); -1 beyond the last radial edge, behind the calorimeter or in a layer without voxels."""
    r = np.hypot(x_mm, y_mm)
    alpha = np.arctan2(y_mm, x_mm)
    index = np.full(len(r), -1, dtype=np.int64)
    start_of = np.full(binning.layers + 1, -1, dtype=np.int64)
    for group in _groups(binning):
        start_of[:] = -1
        start_of[group.layers] = group.starts
        start = start_of[np.minimum(layer, binning.layers)]
        chosen = np.flatnonzero(start >= 0)
        bins = group.bins
        radial = np.searchsorted(np.asarray(bins.r_edges_mm[1:]), r[chosen], side="right")
        angular = np.floor((alpha[chosen] + math.pi) * (bins.alpha_bins / (2.0 * math.pi)))
        angular = np.clip(angular, 0, bins.alpha_bins - 1).astype(np.int64)
        within = radial < bins.radial_bins
        index[chosen[within]] = (start[chosen] + angular * bins.radial_bins + radial)[within]
    return index
