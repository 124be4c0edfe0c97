"""Known damage to a shower set: the evidence that a validation metric ranks generators right.

Each distortion takes showers ``ecal`` GeV in their detector's held form ((n, X, Y, Z) for a
Cartesian grid; (n, radial, angular, layer) or flat (n, voxels) for a cylinder), their primary
``energy`` and a random generator, and returns damaged showers for the same primaries: the
failure modes a GAN shows (wrong energy scale, shifted, deeper or broader showers, missing
cells, noise, no fluctuations, wrong resolution, mode collapse). :func:`suite` lists them at a
small and a large strength for a detector (:data:`SUITE` for a Cartesian grid, the CLIC ECAL);
the tests and ``scripts/validation_distortions.py`` score every entry against the
independent-sample floor, and a larger strength must score worse than a smaller one.

For a cylindrical detector the geometric damage moves energy between voxels through the voxel
map (:func:`moved`): every voxel is sampled on a grid of points in radius and angle, each point
is moved (a layer deeper, its radius scaled, shifted sideways in x) and its share of the
voxel's energy lands in the voxel that contains the moved point, or is lost where no voxel does
(beyond the outer radius or the last layer, in a layer without voxels), as in a detector.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import ndimage, sparse

from evogan.detectors import Detector
from evogan.detectors.geometry import CylindricalBinning

Distortion = Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray]
Move = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, ...]]
"""(layer, r_mm, alpha) of sample points -> where they move to."""


def _per_event(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """One value per shower, shaped to broadcast over a shower of ``like``."""
    return values.reshape(-1, *([1] * (like.ndim - 1)))


def scaled(factor: float) -> Distortion:
    """Every cell times ``factor``: too little (< 1) or too much (> 1) energy."""
    return lambda ecal, _energy, _rng: ecal * np.float32(factor)


def shifted(axis: int, cells: int) -> Distortion:
    """Showers moved by ``cells`` along ``axis`` (1: x, 3: depth); what leaves the window
    is lost, as it would be in a detector."""

    def apply(ecal: np.ndarray, _energy: np.ndarray, _rng: np.random.Generator) -> np.ndarray:
        out = np.zeros_like(ecal)
        src = [slice(None)] * 4
        dst = [slice(None)] * 4
        src[axis], dst[axis] = slice(0, ecal.shape[axis] - cells), slice(cells, None)
        out[tuple(dst)] = ecal[tuple(src)]
        return out

    return apply


def blurred(sigma_cells: float) -> Distortion:
    """Transverse Gaussian blur of ``sigma_cells`` (energy kept, showers wider and smoother)."""
    return lambda ecal, _energy, _rng: ndimage.gaussian_filter(
        ecal, sigma=(0, sigma_cells, sigma_cells, 0), mode="constant"
    )


def dropped(fraction: float) -> Distortion:
    """A random ``fraction`` of the cells set to zero (dead or missed cells)."""
    return lambda ecal, _energy, rng: ecal * (rng.random(ecal.shape, dtype=np.float32) >= fraction)


def empty() -> Distortion:
    """Every shower empty."""
    return lambda ecal, _energy, _rng: np.zeros_like(ecal)


def noise(weight: float) -> Distortion:
    """A ``weight`` share of each shower's energy moved into noise spread over random cells:
    the total energy is right, the shape is not (1.0: pure noise)."""

    def apply(ecal: np.ndarray, _energy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        totals = ecal.reshape(len(ecal), -1).sum(axis=1)
        hits = rng.random(ecal.shape, dtype=np.float32)
        hits = np.where(hits < 0.02, rng.standard_exponential(ecal.shape, dtype=np.float32), 0)
        norm = hits.reshape(len(ecal), -1).sum(axis=1)
        scale = _per_event(weight * totals / np.where(norm > 0, norm, 1.0), ecal)
        return ((1.0 - weight) * ecal + scale * hits).astype(ecal.dtype)

    return apply


def mean_shower(bins: int = 10) -> Distortion:
    """Every event replaced by the mean shower of its energy bin, scaled to its energy: the
    right average response with no shower-to-shower fluctuations."""

    def apply(ecal: np.ndarray, energy: np.ndarray, _rng: np.random.Generator) -> np.ndarray:
        edges = np.quantile(energy, np.linspace(0, 1, bins + 1))
        index = np.clip(np.searchsorted(edges, energy, side="right") - 1, 0, bins - 1)
        out = np.empty_like(ecal)
        for b in range(bins):
            rows = index == b
            if rows.any():
                scale = _per_event(energy[rows], ecal)
                unit = (ecal[rows] / scale).mean(axis=0)
                out[rows] = unit[None] * scale
        return out

    return apply


def smeared(resolution: float) -> Distortion:
    """Each shower's energy scaled by 1 + ``resolution`` x N(0, 1): a worse energy resolution."""

    def apply(ecal: np.ndarray, _energy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        factor = np.clip(1.0 + resolution * rng.standard_normal(len(ecal)), 0.05, None)
        return ecal * _per_event(factor, ecal).astype(ecal.dtype)

    return apply


def repeated(distinct: int) -> Distortion:
    """Mode collapse: only ``distinct`` showers exist; each event gets the one nearest to its
    energy, scaled to it (the energy response survives, the variety does not)."""

    def apply(ecal: np.ndarray, energy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        keep = rng.choice(len(ecal), distinct, replace=False)
        nearest = keep[np.abs(energy[:, None] - energy[keep][None, :]).argmin(axis=1)]
        ratio = (energy / energy[nearest]).astype(ecal.dtype)
        return ecal[nearest] * _per_event(ratio, ecal)

    return apply


SUITE: dict[str, tuple[tuple[str, Distortion], tuple[str, Distortion]]] = {
    "energy low": (("energy x0.8", scaled(0.8)), ("energy x0.5", scaled(0.5))),
    "energy high": (("energy x1.2", scaled(1.2)), ("energy x1.5", scaled(1.5))),
    "deeper": (("deeper by 1 layer", shifted(3, 1)), ("deeper by 3 layers", shifted(3, 3))),
    "sideways": (("sideways by 1 cell", shifted(1, 1)), ("sideways by 3 cells", shifted(1, 3))),
    "blurred": (("blurred 0.5 cell", blurred(0.5)), ("blurred 1 cell", blurred(1.0))),
    "dropped": (("10% of cells dropped", dropped(0.1)), ("40% of cells dropped", dropped(0.4))),
    "noise": (("10% of energy as noise", noise(0.1)), ("all energy as noise", noise(1.0))),
    "smeared": (("energies smeared 10%", smeared(0.1)), ("energies smeared 20%", smeared(0.2))),
    "repeated": (("50 distinct showers", repeated(50)), ("5 distinct showers", repeated(5))),
}
"""Kinds of damage: (name, distortion) at a small and a large strength."""

SINGLE: dict[str, Distortion] = {
    "every event the mean shower": mean_shower(),
    "all showers empty": empty(),
}
"""Damage without a natural strength."""


def moved(detector: Detector, move: Move, samples: int = 4) -> Distortion:
    """Energy moved between the voxels of a cylindrical ``detector`` by ``move`` (module
    docstring), with ``samples`` x ``samples`` points per voxel."""
    geometry = detector.geometry
    if not isinstance(geometry, CylindricalBinning):
        raise ValueError(f"moved() needs a cylindrical detector, got {detector.describe()}")
    transfer = _transfer(geometry, move, samples)

    def apply(ecal: np.ndarray, _energy: np.ndarray, _rng: np.random.Generator) -> np.ndarray:
        grid = ecal.ndim == 4
        flat = geometry.to_flat(ecal) if grid else ecal
        out = np.asarray((transfer.T @ flat.T).T, dtype=ecal.dtype)
        return geometry.to_grid(out) if grid else out

    return apply


def _transfer(binning: CylindricalBinning, move: Move, samples: int) -> sparse.csr_matrix:
    """(voxels, voxels): the share of each voxel's energy that lands in each voxel."""
    lo_r, hi_r, lo_a, hi_a = [], [], [], []
    for bins in binning.layer_bins:
        edges = np.asarray(bins.r_edges_mm)
        step = 2 * np.pi / bins.alpha_bins
        alpha = -np.pi + step * np.repeat(np.arange(bins.alpha_bins), bins.radial_bins)
        lo_r.append(np.tile(edges[:-1], bins.alpha_bins))
        hi_r.append(np.tile(edges[1:], bins.alpha_bins))
        lo_a.append(alpha)
        hi_a.append(alpha + step)
    lo_r, hi_r, lo_a, hi_a = map(np.concatenate, (lo_r, hi_r, lo_a, hi_a))
    u = (np.arange(samples) + 0.5) / samples
    r = lo_r[:, None, None] + (hi_r - lo_r)[:, None, None] * u[None, :, None]
    a = lo_a[:, None, None] + (hi_a - lo_a)[:, None, None] * u[None, None, :]
    layer = np.broadcast_to(binning.voxel_map.layer[:, None, None], r.shape)
    r, a = np.broadcast_arrays(r, a)
    target = _locate(binning, *move(layer, r, a)).reshape(binning.voxels, -1)
    source = np.broadcast_to(np.arange(binning.voxels)[:, None], target.shape)
    keep = target >= 0
    weights = np.full(keep.sum(), 1.0 / samples**2)
    shape = (binning.voxels, binning.voxels)
    return sparse.coo_matrix((weights, (source[keep], target[keep])), shape=shape).tocsr()


def _locate(
    binning: CylindricalBinning, layer: np.ndarray, r: np.ndarray, alpha: np.ndarray
) -> np.ndarray:
    """Flat voxel index of points (layer, r_mm, alpha); -1 where no voxel holds the point."""
    layer, r, alpha = (np.ravel(v) for v in np.broadcast_arrays(layer, r, alpha))
    out = np.full(layer.shape, -1)
    start = 0
    for index, bins in enumerate(binning.layer_bins):
        here = np.flatnonzero(layer == index)
        radial = np.searchsorted(bins.r_edges_mm, r[here], side="right") - 1
        inside = (radial >= 0) & (radial < bins.radial_bins)
        angular = np.floor((alpha[here] + np.pi) / (2 * np.pi) * bins.alpha_bins).astype(int)
        angular %= bins.alpha_bins
        out[here[inside]] = start + angular[inside] * bins.radial_bins + radial[inside]
        start += bins.voxels
    return out


def deeper(detector: Detector, layers: int) -> Distortion:
    """Showers of a cylindrical detector ``layers`` layers deeper."""
    return moved(detector, lambda layer, r, a: (layer + layers, r, a))


def broader(detector: Detector, factor: float) -> Distortion:
    """Radial broadening: every radius times ``factor``."""
    return moved(detector, lambda layer, r, a: (layer, r * factor, a))


def sideways(detector: Detector, mm: float) -> Distortion:
    """Showers moved by ``mm`` along x."""

    def move(layer: np.ndarray, r: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, ...]:
        x, y = r * np.cos(a) + mm, r * np.sin(a)
        return layer, np.hypot(x, y), np.arctan2(y, x)

    return moved(detector, move)


def suite(detector: Detector | None = None) -> dict[str, tuple[tuple[str, Distortion], ...]]:
    """The kinds of damage for ``detector`` at a small and a large strength: :data:`SUITE` for
    a Cartesian grid (the CLIC ECAL when None); for a cylinder the same kinds, with the
    geometric ones through the voxel map (shifts in Moliere radii of the absorber)."""
    if detector is None or not isinstance(detector.geometry, CylindricalBinning):
        return dict(SUITE)
    moliere = detector.materials.moliere_mm
    geometric = {
        "deeper": (
            ("deeper by 1 layer", deeper(detector, 1)),
            ("deeper by 3 layers", deeper(detector, 3)),
        ),
        "broader": (
            ("radii x1.25", broader(detector, 1.25)),
            ("radii x2", broader(detector, 2.0)),
        ),
        "sideways": (
            ("sideways by 0.5 R_M", sideways(detector, 0.5 * moliere)),
            ("sideways by 1.5 R_M", sideways(detector, 1.5 * moliere)),
        ),
    }
    kept = ("energy low", "energy high", "dropped", "noise", "smeared", "repeated")
    return {**{k: SUITE[k] for k in kept}, **geometric}
