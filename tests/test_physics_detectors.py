"""The selection score on cylindrical detectors (CaloChallenge dataset 2, held as a grid, and
dataset 1 photons, irregular and flat): every distortion of an independent sample scores
clearly worse than the independent-sample floor, a larger one worse than a smaller one, and
the table carries the CaloChallenge per-layer set. The showers come from a small numpy shower
model (a gamma longitudinal profile in X0 times an exponential radial profile, deposited in the
voxel map, with per-event and per-voxel fluctuations): enough to rank damage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from evogan.detectors import Detector, detector_for
from evogan.errors import DataError
from evogan.physics import WORST_SCORE, Reference, shower_features
from evogan.physics.distortions import SINGLE, suite

EVENTS = 240
THRESHOLD = 1.5e-5  # GeV: the challenge's readout threshold of datasets 2 and 3


def model_showers(detector: Detector, events: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Showers (GeV, the detector's held form) and primaries log-uniform in 10-100 GeV."""
    rng = np.random.default_rng(seed)
    energy = np.exp(rng.uniform(np.log(10.0), np.log(100.0), events))
    materials, vmap = detector.materials, detector.geometry.voxel_map
    edges = materials.layer_edges_x0()
    shape = 1.0 + 0.5 * np.log(energy / materials.critical_gev) * rng.normal(1.0, 0.08, events)
    cdf = special.gammainc(shape[:, None], 0.5 * edges[None, :])
    per_layer = np.diff(cdf, axis=1) * (energy * materials.sampling_fraction)[:, None]
    depth = materials.layer_centres_x0()[vmap.layer]
    radius = materials.moliere_mm * (0.3 + 0.05 * depth)  # showers widen with depth
    weight = np.exp(-vmap.r_mm / radius) * _area(detector)
    weight /= np.maximum(np.bincount(vmap.layer, weight, detector.layers), 1e-30)[vmap.layer]
    cells = per_layer[:, vmap.layer] * weight[None, :]
    cells *= rng.gamma(4.0, 0.25, cells.shape)  # per-voxel fluctuations
    cells = np.where(cells >= THRESHOLD, cells, 0.0).astype(np.float32)
    grid = detector.grid_shape is not None
    return (detector.geometry.to_grid(cells) if grid else cells), energy


def _area(detector: Detector) -> np.ndarray:
    """Area of every voxel's cell (mm^2), so the radial profile is a density."""
    areas = []
    for bins in detector.geometry.layer_bins:
        edges = np.asarray(bins.r_edges_mm)
        ring = np.pi * np.diff(edges**2) / bins.alpha_bins
        areas.append(np.tile(ring, bins.alpha_bins))
    return np.concatenate(areas)


@pytest.fixture(
    scope="module",
    params=[
        "calochallenge-2",
        "calochallenge-3",
        "calochallenge-1-photons",
        "calochallenge-1-pions",
    ],
)
def world(request: pytest.FixtureRequest) -> dict:
    detector = detector_for(request.param)
    ref, ref_energy = model_showers(detector, EVENTS, 1)
    sample, energy = model_showers(detector, EVENTS, 2)
    reference = Reference.from_showers(
        ref, ref_energy, cell_threshold=THRESHOLD, bins=3, detector=detector
    )
    floor = reference.floor()
    return {
        "detector": detector,
        "reference": reference,
        "sample": (sample, energy),
        "floor": floor,
        "clearly": floor["score"] + 3 * floor["spread"],
        "independent": reference.score(sample, energy),
    }


def _score(world: dict, distortion) -> float:
    sample, energy = world["sample"]
    result = world["reference"].score(distortion(sample, energy, np.random.default_rng(5)), energy)
    assert all(not math.isnan(m["value"]) for m in result.metrics.values())
    assert math.isfinite(result.score)
    return result.score


@pytest.mark.slow
def test_independent_sample_scores_at_the_floor(world: dict) -> None:
    floor = world["floor"]
    assert 0 < floor["score"] < 1 and floor["spread"] > 0
    assert world["independent"].score < 2 * floor["score"]


@pytest.mark.parametrize(
    "kind",
    ["energy low", "energy high", "deeper", "broader", "sideways", "dropped", "noise",
     "smeared", "repeated"],
)  # fmt: skip
def test_distortions_score_worse_than_the_floor_and_grow_with_strength(
    world: dict, kind: str
) -> None:
    small, large = (_score(world, d) for _name, d in suite(world["detector"])[kind])
    assert small > world["clearly"], (kind, small, world["floor"])
    assert large > small, (kind, small, large)


@pytest.mark.parametrize("kind", list(SINGLE))
def test_fluctuation_free_and_empty_showers_score_worse_than_the_floor(
    world: dict, kind: str
) -> None:
    assert _score(world, SINGLE[kind]) > world["clearly"]


def test_the_score_compares_the_calochallenge_set_per_layer(world: dict) -> None:
    result, detector = world["independent"], world["detector"]
    groups = set(result.separation)
    expected = {"energy_ratio", "spectrum", "profile_z", "profile_centre_x_mm",
                "profile_width_y_mm", "profile_sparsity"}  # fmt: skip
    assert expected <= groups, groups
    layers = 45 if detector.grid_shape else 24
    assert result.table.detector is detector
    assert result.table.layers["energy"].shape == (EVENTS, layers)
    sample, energy = world["sample"]
    assert world["reference"].score(np.zeros_like(sample[:20]), energy[:20]).score == WORST_SCORE


def test_showers_of_another_detector_are_refused(world: dict) -> None:
    other = detector_for("calochallenge-1-photons" if world["detector"].grid_shape else
                         "calochallenge-2")  # fmt: skip
    showers, energy = model_showers(other, 8, 3)
    with pytest.raises(DataError, match="cell window"):
        world["reference"].score(showers, energy)
    table = shower_features(showers, energy, cell_threshold=THRESHOLD, detector=other)
    with pytest.raises(DataError, match=f"showers are of detector {other.name}"):
        world["reference"].score_table(table)
