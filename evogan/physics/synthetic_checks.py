"""The physics a synthetic set is checked against, in any detector (docs/explanation/physics.md
section 7): the sampling fraction against the detector's nominal one, the depth of the longitudinal
maximum against GFLASH's T = ln(E/Ec) - 0.858 for electrons, and the transverse containment within
one and two Moliere radii (about 90% and 95% for an electromagnetic shower).

Measured on the showers as the generator returns them (grid or flat), through the detector's
voxel map, so a check fails when showers land in the wrong cells or the wrong materials shaped
them. ``scripts/bench_synth.py --physics`` prints these numbers; tests hold them to tolerances.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from evogan.data.synthetic.deposit import layer_and_visible
from evogan.detectors.detector import Detector
from evogan.physics.observables import peak_depth

ELECTRON_T_OFFSET = 0.858  # GFLASH: <T_hom> = ln(E / Ec) - 0.858 for electrons
MAX_LAYER_X0 = 1.5  # thicker layers around the maximum leave its depth unmeasured


@dataclass(frozen=True)
class ShowerChecks:
    """Means over a set of showers at one primary energy (GeV)."""

    energy_gev: float
    sampling_fraction: float
    nominal_ratio: float  # sampling fraction / the detector's nominal one
    t_max_x0: float  # NaN where the layers are too coarse to locate the maximum
    t_gflash_x0: float
    containment_1rm: float
    containment_2rm: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def flat_showers(showers: np.ndarray, detector: Detector) -> np.ndarray:
    """Showers in the detector's flat voxel order, whatever form they came in."""
    if showers.ndim == 2:
        return showers
    return detector.geometry.to_flat(showers)


def gflash_t_max(energy_gev: float, detector: Detector) -> float:
    """GFLASH's mean depth of the maximum of an electron shower in the absorber, in X0."""
    return math.log(energy_gev / detector.materials.critical_gev) - ELECTRON_T_OFFSET


def layer_density(flat: np.ndarray, detector: Detector) -> np.ndarray:
    """Absorbed energy per X0 in each layer, (N, layers): visible energy over the layer's
    thickness and its visible fraction, so thick or differently sampled layers compare."""
    materials = detector.materials
    centres = materials.layer_centres_x0().astype(np.float32)
    _, visible = layer_and_visible(centres, materials)
    weight = np.diff(materials.layer_edges_x0()) * visible
    return detector.geometry.voxel_map.layer_sum(flat) / weight


def t_max_x0(flat: np.ndarray, detector: Detector) -> np.ndarray:
    """Per shower, the depth in X0 of the vertex of the parabola through the densest layer and
    its two neighbours (clipped to their centres; a first or last layer gives its centre)."""
    density = layer_density(flat, detector)
    return peak_depth(density, detector.materials.layer_centres_x0())


def containment(flat: np.ndarray, detector: Detector, radii_rm: float) -> np.ndarray:
    """Per shower, the share of its visible energy in cells whose centre lies within
    ``radii_rm`` Moliere radii of the shower axis."""
    inside = detector.geometry.voxel_map.r_mm < radii_rm * detector.materials.moliere_mm
    total = flat.sum(axis=1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return flat[:, inside].sum(axis=1, dtype=np.float64) / total


def _maximum_measurable(energy_gev: float, detector: Detector) -> bool:
    edges = detector.materials.layer_edges_x0()
    near = edges[1:] <= 2.0 * gflash_t_max(energy_gev, detector) + 2.0
    return bool(np.all(np.diff(edges)[near] <= MAX_LAYER_X0))


def check_showers(showers: np.ndarray, energy_gev: float, detector: Detector) -> ShowerChecks:
    """The checks for ``showers`` made at one primary energy in ``detector``."""
    flat = flat_showers(showers, detector).astype(np.float64)
    sampling = float(flat.sum(axis=1).mean() / energy_gev)
    t_max = (
        float(np.nanmean(t_max_x0(flat, detector)))
        if _maximum_measurable(energy_gev, detector)
        else math.nan
    )
    return ShowerChecks(
        energy_gev=energy_gev,
        sampling_fraction=sampling,
        nominal_ratio=sampling / detector.materials.sampling_fraction,
        t_max_x0=t_max,
        t_gflash_x0=gflash_t_max(energy_gev, detector),
        containment_1rm=float(np.nanmean(containment(flat, detector, 1.0))),
        containment_2rm=float(np.nanmean(containment(flat, detector, 2.0))),
    )
