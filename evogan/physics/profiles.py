"""Mean energy per layer and the radial profile of a sample of showers in any detector (and,
for a cylinder binned alike in every layer, the angular profile), summed chunk by chunk so a
file is streamed once (``data inspect``) or taken whole (``validate``)."""

from __future__ import annotations

import numpy as np

from evogan.detectors import Detector

MAX_RINGS = 60
RADIAL_BINS = 20


class ProfileSums:
    """Running sums (and sums of squares, for the standard error of the mean) of the energy
    per layer and per radial ring of flat showers. The rings are the detector's own where it has
    at most ``MAX_RINGS`` distinct voxel radii (a cylinder), else ``RADIAL_BINS`` equal bins. A
    binning that differs from layer to layer (CaloChallenge dataset 1) has no common rings: its
    radial profile is that of the layer with the most voxels (``radial_layer``). A regular
    cylinder with more than one angular bin also gets the energy per angular bin over all
    layers: a shower along the axis spreads evenly in angle, so a generator whose convolutions
    see a seam at alpha = +-pi shows it there."""

    def __init__(self, detector: Detector) -> None:
        vmap = detector.geometry.voxel_map
        self.layer = (vmap.layer[:, None] == np.arange(vmap.layers)[None, :]).astype(np.float64)
        self.radial_layer = -1  # all layers
        if detector.grid_shape is None:
            self.radial_layer = int(np.bincount(vmap.layer).argmax())
        chosen = vmap.layer == self.radial_layer if self.radial_layer >= 0 else slice(None)
        radii = np.unique(vmap.r_mm[chosen])
        if 1 < radii.size <= MAX_RINGS:
            middle = 0.5 * (radii[:-1] + radii[1:])
            edges = np.concatenate([[0.0], middle, [2 * radii[-1] - middle[-1]]])
        else:
            edges = np.linspace(0.0, float(radii.max()) * 1.05 + 1e-9, RADIAL_BINS + 1)
        ring = np.clip(np.searchsorted(edges, vmap.r_mm, side="right") - 1, 0, len(edges) - 2)
        onehot = (ring[:, None] == np.arange(len(edges) - 1)[None, :]).astype(np.float64)
        if self.radial_layer >= 0:
            onehot[vmap.layer != self.radial_layer] = 0.0
        self.ring = onehot / np.diff(edges)  # energy per mm of radius
        self.r_edges_mm = edges
        self.sector, self.alpha_edges = _sectors(detector)
        self.count = 0
        self.sums = {key: np.zeros(m.shape[1]) for key, m in self._maps()}
        self.squares = {key: np.zeros(m.shape[1]) for key, m in self._maps()}

    def _maps(self) -> tuple[tuple[str, np.ndarray], ...]:
        maps = (("layer", self.layer), ("radial", self.ring))
        return maps if self.sector is None else (*maps, ("angular", self.sector))

    def add(self, showers_flat: np.ndarray) -> None:
        """Add showers (n, voxels) in the detector's flat order."""
        showers = np.asarray(showers_flat, dtype=np.float64)
        for key, matrix in self._maps():
            values = showers @ matrix
            self.sums[key] += values.sum(axis=0)
            self.squares[key] += np.square(values).sum(axis=0)
        self.count += len(showers)

    def result(self) -> dict[str, np.ndarray]:
        """``layer_mean``/``layer_error`` (GeV per shower), ``radial_mean``/``radial_error``
        (GeV per mm), ``r_edges_mm`` and ``radial_layer`` (-1: all layers); for a regular
        cylinder ``angular_mean``/``angular_error`` (GeV per angular bin) and
        ``alpha_edges_deg``; errors are standard errors of the mean."""
        n = max(self.count, 1)
        out = {"r_edges_mm": self.r_edges_mm, "radial_layer": np.asarray(self.radial_layer)}
        if self.alpha_edges is not None:
            out["alpha_edges_deg"] = np.degrees(self.alpha_edges)
        for key in self.sums:
            mean = self.sums[key] / n
            spread = np.sqrt(np.maximum(self.squares[key] / n - mean**2, 0.0))
            out[f"{key}_mean"], out[f"{key}_error"] = mean, spread / np.sqrt(n)
        return out


def _sectors(detector: Detector) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(voxels, angular bins) one-hot map and the bin edges in radians over (-pi, pi], for a
    cylinder binned alike in every layer with more than one angular bin; (None, None) else."""
    shape = detector.grid_shape
    if detector.geometry.kind != "cylindrical" or shape is None or shape[1] < 2:
        return None, None
    edges = np.linspace(-np.pi, np.pi, shape[1] + 1)
    alpha = detector.geometry.voxel_map.alpha  # bin centres
    sector = np.clip(np.searchsorted(edges, alpha) - 1, 0, shape[1] - 1)
    return (sector[:, None] == np.arange(shape[1])[None, :]).astype(np.float64), edges


def layer_profiles(showers_flat: np.ndarray, detector: Detector) -> dict[str, np.ndarray]:
    """:class:`ProfileSums` of one sample held whole."""
    sums = ProfileSums(detector)
    sums.add(showers_flat)
    return sums.result()
