"""The CaloChallenge high-level features per layer, for any detector.

Per shower and layer l, with E_i the (cleaned) voxel energies of the layer and x_i, y_i the
transverse centres of their cells (:class:`~evogan.detectors.geometry.VoxelMap`; for a
cylinder x = r cos(alpha), y = r sin(alpha) at the bin centres):

- ``energy``: E_l = sum E_i (GeV; the challenge's files and figures are in MeV);
- ``centre_x_mm``, ``centre_y_mm``: sum E_i x_i / E_l (mm in both);
- ``width_x_mm``, ``width_y_mm``: sqrt(max(sum E_i x_i^2 / E_l - centre^2, 0)) (mm);
- ``sparsity``: 1 - (voxels with E_i > 0) / (voxels of the layer), the challenge's
  ``1 - mean(E > threshold)`` with evogan's cell threshold applied before (cells below it are 0).

As in the challenge's ``HighLevelFeatures``: an empty layer has centre and width 0 (it divides
by E_l + 1e-16), and centres and widths exist only for layers binned in angle (a layer with
one angular bin reports 0 here); a layer without voxels (dataset 1's unused layers) has energy
0 and sparsity 1. Units matter for the energy only: E_l in GeV is the challenge's value / 1000;
ratios, centres, widths and sparsities are the same numbers. Everything comes from five
moment sums per layer (E, E x, E x^2, E y, E y^2) and the count of lit voxels, computed in one
matrix product per layer from the flat, layer-contiguous voxel order (or from a Cartesian
grid's marginals), so no (n, voxels) temporary is made beyond the caller's chunk.
"""

from __future__ import annotations

import numpy as np

from evogan.detectors.geometry import CylindricalBinning, Geometry

LAYER_FEATURES = {
    "energy": "GeV",
    "centre_x_mm": "mm",
    "centre_y_mm": "mm",
    "width_x_mm": "mm",
    "width_y_mm": "mm",
    "sparsity": "share of voxels without energy",
}
LAYER_PROFILES = ("centre_x_mm", "centre_y_mm", "width_x_mm", "width_y_mm", "sparsity")
"""The per-layer features a cylindrical detector's score compares besides the layer energies."""
SUMS = 6  # E, E x, E x^2, E y, E y^2, lit voxels


def centre_width(
    first: np.ndarray, second: np.ndarray, total: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Centre sum(E x) / sum(E) and width sqrt(max(sum(E x^2) / sum(E) - centre^2, 0)) from
    the moment sums; both 0 where ``total`` is not positive."""
    filled = total > 0
    safe = np.where(filled, total, 1.0)
    centre = np.where(filled, first / safe, 0.0)
    variance = np.where(filled, second / safe - centre**2, 0.0)
    return centre, np.sqrt(np.maximum(variance, 0.0))


def layer_features(
    sums: np.ndarray, voxels: np.ndarray, angular: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """The per-layer features (module docstring) from ``sums`` (n, layers, 6) and the voxels
    of each layer; ``angular`` marks the layers binned in angle (all when None)."""
    energy = sums[..., 0]
    out = {"energy": energy}
    for axis, k in (("x", 1), ("y", 3)):
        centre, width = centre_width(sums[..., k], sums[..., k + 1], energy)
        if angular is not None:
            centre, width = centre * angular, width * angular
        out[f"centre_{axis}_mm"], out[f"width_{axis}_mm"] = centre, width
    voxels = np.asarray(voxels, dtype=np.float64)
    share = sums[..., 5] / np.where(voxels > 0, voxels, 1.0)
    out["sparsity"] = np.where(voxels > 0, 1.0 - share, 1.0)
    return out


def grid_sums(
    cells: np.ndarray,
    per_layer: np.ndarray,
    x_mm: np.ndarray,
    y_mm: np.ndarray,
    energy: np.ndarray,
    y_sum: np.ndarray,
) -> np.ndarray:
    """Moment sums (n, layers, 6) of a Cartesian window (n, X, Y, Z) from its marginals:
    ``per_layer`` (n, Y, Z) summed over x, with ``energy`` and ``y_sum`` already taken from it."""
    over_y = cells.sum(axis=2, dtype=np.float64)  # (n, X, Z)
    return np.stack(
        [
            energy,
            np.einsum("nxz,x->nz", over_y, x_mm),
            np.einsum("nxz,x->nz", over_y, x_mm**2),
            y_sum,
            np.einsum("nyz,y->nz", per_layer, y_mm**2),
            np.count_nonzero(cells, axis=(1, 2)),
        ],
        axis=2,
    )


def cylinder_sums(
    cells: np.ndarray, binning: CylindricalBinning, work: np.ndarray | None = None
) -> np.ndarray:
    """Moment sums (n, layers, 6) of showers of a cylindrical binning, held flat (n, voxels;
    file order, layer slowest: one matrix product per layer's block of voxels) or, for a
    regular binning, as its grid (n, radial, angular, layer: one batched product against the
    cell positions every layer shares, with no transpose to the file order). ``work``: a
    float64 buffer of the cells' shape, reused across chunks (a fresh one per chunk costs its
    page faults every time); float64 sums give a one-voxel layer a width of exactly 0."""
    vmap = binning.voxel_map
    weights = np.stack([np.ones_like(vmap.x_mm), vmap.x_mm, vmap.x_mm**2, vmap.y_mm, vmap.y_mm**2])
    values = np.empty(cells.shape) if work is None else work
    np.copyto(values, cells)
    if cells.ndim == 4:
        radial, angular, layers = binning.grid_shape
        # layer 0's block in file order is (angular, radial); the grid's cell axis is (r, a)
        shared = weights[:, : radial * angular].reshape(5, angular, radial).transpose(0, 2, 1)
        blocks = values.reshape(len(cells), radial * angular, layers)
        out = np.empty((len(cells), layers, SUMS))
        out[..., :5] = np.swapaxes(shared.reshape(5, -1) @ blocks, 1, 2)
        out[..., 5] = np.count_nonzero(blocks, axis=1)
        return out
    out = np.zeros((len(cells), binning.layers, SUMS))
    start = 0
    for layer, bins in enumerate(binning.layer_bins):
        stop = start + bins.voxels
        if stop > start:
            out[:, layer, :5] = values[:, start:stop] @ weights[:, start:stop].T
            out[:, layer, 5] = np.count_nonzero(values[:, start:stop], axis=1)
        start = stop
    return out


def voxels_per_layer(geometry: Geometry) -> np.ndarray:
    """Voxels in each layer."""
    return np.bincount(geometry.voxel_map.layer, minlength=geometry.layers)


def relevant_layers(geometry: Geometry) -> tuple[list[int], list[int]]:
    """The layers the challenge reports: those holding voxels (energy, sparsity) and those
    binned in angle (centres and widths); every layer of a Cartesian grid is both."""
    if not isinstance(geometry, CylindricalBinning):
        return list(range(geometry.layers)), list(range(geometry.layers))
    filled = [i for i, b in enumerate(geometry.layer_bins) if b.voxels > 0]
    return filled, [i for i in filled if geometry.layer_bins[i].alpha_bins > 1]


def angular_mask(geometry: Geometry) -> np.ndarray:
    """1.0 for the layers binned in angle, 0.0 for the others."""
    mask = np.zeros(geometry.layers)
    mask[relevant_layers(geometry)[1]] = 1.0
    return mask
