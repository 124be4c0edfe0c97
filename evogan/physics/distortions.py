"""Known damage to a shower set: the evidence that a validation metric ranks generators right.

Each distortion takes showers ``ecal`` (n, X, Y, Z) GeV, their primary ``energy`` and a random
generator, and returns damaged showers for the same primaries: the failure modes a GAN shows
(wrong energy scale, shifted or blurred showers, missing cells, noise, no fluctuations, wrong
resolution, mode collapse). :data:`SUITE` lists them at a small and a large strength; the tests
and ``scripts/validation_distortions.py`` score every entry against the independent-sample
floor, and a larger strength must score worse than a smaller one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import ndimage

Distortion = Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray]


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
        scale = (weight * totals / np.where(norm > 0, norm, 1.0))[:, None, None, None]
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
                unit = (ecal[rows] / energy[rows, None, None, None]).mean(axis=0)
                out[rows] = unit[None] * energy[rows, None, None, None]
        return out

    return apply


def smeared(resolution: float) -> Distortion:
    """Each shower's energy scaled by 1 + ``resolution`` x N(0, 1): a worse energy resolution."""

    def apply(ecal: np.ndarray, _energy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        factor = np.clip(1.0 + resolution * rng.standard_normal(len(ecal)), 0.05, None)
        return ecal * factor[:, None, None, None].astype(ecal.dtype)

    return apply


def repeated(distinct: int) -> Distortion:
    """Mode collapse: only ``distinct`` showers exist; each event gets the one nearest to its
    energy, scaled to it (the energy response survives, the variety does not)."""

    def apply(ecal: np.ndarray, energy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        keep = rng.choice(len(ecal), distinct, replace=False)
        nearest = keep[np.abs(energy[:, None] - energy[keep][None, :]).argmin(axis=1)]
        ratio = (energy / energy[nearest]).astype(ecal.dtype)
        return ecal[nearest] * ratio[:, None, None, None]

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
