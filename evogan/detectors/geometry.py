"""Cell geometries: a Cartesian grid of square pads, or concentric cylinders binned per layer in
radius and angle (the CaloChallenge datasets).

Showers are held either flat, one row of ``voxels`` per shower in the detector's file order, or
(regular geometries only) as a grid with the layer axis last, the form the networks take:
Cartesian ``(x, y, layer)``; cylindrical ``(radial, angular, layer)``. A cylindrical file's flat
order is radial bin fastest, then angular bin, then layer (CaloChallenge), so its grid is the
flat row reshaped to ``(layer, angular, radial)`` with the axes reversed. The :class:`VoxelMap`
gives every flat voxel its layer and transverse position, which is all the per-layer features
need, in either geometry and for irregular binning too.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from evogan.errors import ConfigError


@dataclass(frozen=True)
class VoxelMap:
    """Per flat voxel: its layer, and the transverse centre of its cell in mm (x, y; for a
    cylinder also radius and angle, with x = r cos(alpha), y = r sin(alpha))."""

    layer: np.ndarray
    x_mm: np.ndarray
    y_mm: np.ndarray
    r_mm: np.ndarray
    alpha: np.ndarray
    layers: int

    def layer_sum(self, values: np.ndarray) -> np.ndarray:
        """``values`` (N, voxels) summed per layer: (N, layers)."""
        out = np.zeros((values.shape[0], self.layers), dtype=np.float64)
        np.add.at(out.T, self.layer, values.T)
        return out


@dataclass(frozen=True)
class CartesianGrid:
    """``cells_x`` x ``cells_y`` square pads of ``cell_mm`` in each of ``layers`` layers."""

    cells_x: int
    cells_y: int
    layers: int
    cell_mm: float

    kind = "cartesian"

    def __post_init__(self) -> None:
        if min(self.cells_x, self.cells_y, self.layers) < 1 or not self.cell_mm > 0:
            raise ConfigError(
                f"a Cartesian grid needs at least one cell per axis and a positive pad size, "
                f"got {self.cells_x} x {self.cells_y} x {self.layers} cells of {self.cell_mm} mm"
            )

    @property
    def voxels(self) -> int:
        return self.cells_x * self.cells_y * self.layers

    @property
    def grid_shape(self) -> tuple[int, int, int]:
        return (self.cells_x, self.cells_y, self.layers)

    def to_grid(self, flat: np.ndarray) -> np.ndarray:
        """(N, voxels) -> (N, x, y, layer); a view where the input is contiguous."""
        return flat.reshape((flat.shape[0], *self.grid_shape))

    def to_flat(self, grid: np.ndarray) -> np.ndarray:
        """(N, x, y, layer) -> (N, voxels)."""
        return grid.reshape(grid.shape[0], self.voxels)

    @cached_property
    def voxel_map(self) -> VoxelMap:
        ix, iy, layer = np.unravel_index(np.arange(self.voxels), self.grid_shape)
        x = (ix - (self.cells_x - 1) / 2.0) * self.cell_mm
        y = (iy - (self.cells_y - 1) / 2.0) * self.cell_mm
        return VoxelMap(layer, x, y, np.hypot(x, y), np.arctan2(y, x), self.layers)


@dataclass(frozen=True)
class LayerBins:
    """One cylindrical layer: radial bin edges in mm (``r_edges_mm[0]`` is the axis, 0) and the
    number of equal angular bins over (-pi, pi]; a layer with a single edge holds no voxel."""

    r_edges_mm: tuple[float, ...]
    alpha_bins: int

    @property
    def radial_bins(self) -> int:
        return len(self.r_edges_mm) - 1

    @property
    def voxels(self) -> int:
        return self.radial_bins * self.alpha_bins


@dataclass(frozen=True)
class CylindricalBinning:
    """Concentric cylinders around the particle's axis, binned layer by layer."""

    layer_bins: tuple[LayerBins, ...]

    kind = "cylindrical"

    def __post_init__(self) -> None:
        if not self.layer_bins:
            raise ConfigError("a cylindrical binning needs at least one layer")
        for index, bins in enumerate(self.layer_bins):
            edges = bins.r_edges_mm
            if not edges or edges[0] != 0 or any(b <= a for a, b in itertools.pairwise(edges)):
                raise ConfigError(
                    f"layer {index}: r_edges must start at 0 and increase strictly, got "
                    f"{list(edges)}"
                )
            if bins.alpha_bins < 1:
                raise ConfigError(f"layer {index}: n_bin_alpha must be >= 1, got {bins.alpha_bins}")
        if self.voxels == 0:
            raise ConfigError(
                "a cylindrical binning with no radial bin in any layer holds no voxel"
            )

    @property
    def layers(self) -> int:
        return len(self.layer_bins)

    @property
    def voxels(self) -> int:
        return sum(bins.voxels for bins in self.layer_bins)

    @property
    def regular(self) -> bool:
        """Every layer binned alike (datasets 2 and 3): showers form a 3D grid."""
        first = self.layer_bins[0]
        return first.radial_bins > 0 and all(bins == first for bins in self.layer_bins)

    @property
    def grid_shape(self) -> tuple[int, int, int] | None:
        """(radial, angular, layer) for a regular binning; None for an irregular one."""
        if not self.regular:
            return None
        first = self.layer_bins[0]
        return (first.radial_bins, first.alpha_bins, self.layers)

    def to_grid(self, flat: np.ndarray) -> np.ndarray:
        """(N, voxels) in file order -> (N, radial, angular, layer); refuses irregular binning."""
        shape = self.grid_shape
        if shape is None:
            raise ConfigError(
                "this cylindrical binning differs from layer to layer, so its showers form no "
                "3D grid; keep them flat (one row of voxels per shower)"
            )
        radial, angular, layers = shape
        return flat.reshape(flat.shape[0], layers, angular, radial).transpose(0, 3, 2, 1)

    def to_flat(self, grid: np.ndarray) -> np.ndarray:
        """(N, radial, angular, layer) -> (N, voxels) in file order."""
        return np.ascontiguousarray(grid.transpose(0, 3, 2, 1)).reshape(grid.shape[0], -1)

    @cached_property
    def voxel_map(self) -> VoxelMap:
        layer, r, alpha = [], [], []
        for index, bins in enumerate(self.layer_bins):
            if bins.voxels == 0:
                continue
            edges = np.asarray(bins.r_edges_mm)
            r_mid = 0.5 * (edges[:-1] + edges[1:])
            a_edges = np.linspace(-math.pi, math.pi, bins.alpha_bins + 1)
            a_mid = 0.5 * (a_edges[:-1] + a_edges[1:])
            layer.append(np.full(bins.voxels, index))
            r.append(np.tile(r_mid, bins.alpha_bins))  # radial fastest
            alpha.append(np.repeat(a_mid, bins.radial_bins))
        r_all, a_all = np.concatenate(r), np.concatenate(alpha)
        return VoxelMap(
            np.concatenate(layer),
            r_all * np.cos(a_all),
            r_all * np.sin(a_all),
            r_all,
            a_all,
            self.layers,
        )


Geometry = CartesianGrid | CylindricalBinning
