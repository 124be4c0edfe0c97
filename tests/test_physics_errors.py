"""Stated errors mean what they say: over many independent pairs of samples, the pulls
(value - truth) / error of FPD and of the separation power have an RMS near 1.

Tolerance: RMS within [0.7, 1.4]. The RMS of 100 pulls scatters by about 0.1 (more than the
0.07 of exact errors: the errors come from 20 + 20 replicates), and the error's rule
(:mod:`evogan.physics.resampling`) is right within about 0.3 between the null and a distance
comparable with the noise: over seeds 0-4 (five feature distributions), 0.74-1.03 for FPD and
0.79-0.95 for the separation power of samples of one distribution, 1.05-1.34 for FPD a known
distance apart. The errors these replaced gave pulls of 4-8 for FPD (a line fit's error) and
0.3-0.45 for the separation power (per-bin errors' RMS as the error of their mean). Features
are cheap skewed, correlated numbers, not showers, so the tests are fast.
"""

from __future__ import annotations

import numpy as np
import pytest

from evogan.physics.features import SPECTRUM_EDGES, FeatureTable
from evogan.physics.frechet import fpd
from evogan.physics.resampling import (
    BOOTSTRAP,
    NULL_EXCESS,
    EventWeights,
    dealt,
    resampled_error,
)
from evogan.physics.score import Reference
from evogan.physics.separation import separation_powers


def _rms(pulls: list[float]) -> float:
    return float(np.sqrt(np.mean(np.square(pulls))))


def test_the_error_is_the_bootstrap_variance_less_the_nulls_excess() -> None:
    data = np.zeros(1)
    boot = np.tile([-3.0, 3.0], BOOTSTRAP // 2)  # variance 9 x 20/19
    null = np.tile([-1.0, 1.0], 10)  # variance 20/19
    scale = 20 / 19
    far = (9 - NULL_EXCESS) * scale
    assert resampled_error(np.concatenate([data, boot, null])) == pytest.approx(np.sqrt(far))
    same = np.concatenate([data, null, null])  # no more spread than the null: the null's
    assert resampled_error(same) == pytest.approx(np.sqrt(scale))
    columns = np.stack([np.concatenate([data, boot, null]), same], axis=1)
    np.testing.assert_allclose(resampled_error(columns), np.sqrt([far, scale]))


def test_a_deal_keeps_each_sides_count_per_stratum() -> None:
    rng = np.random.default_rng(0)
    ref, gen = rng.integers(0, 3, 50), np.concatenate([rng.integers(-1, 3, 70)])
    deals = dealt(ref, gen, 30, rng)
    pooled = np.concatenate([ref, gen])
    assert set(np.unique(deals)) == {0.0, 1.0}
    for stratum in np.unique(pooled):
        counts = deals[:, pooled == stratum].sum(axis=1)
        assert (counts == np.count_nonzero(ref == stratum)).all(), stratum
    assert len({row.tobytes() for row in deals}) == 30  # random deals, not one
    weights = EventWeights.draw(ref, gen, rng)
    assert weights.ref.shape == (1 + BOOTSTRAP, 50) and weights.gen.shape == (1 + BOOTSTRAP, 70)
    assert (weights.ref[0] == 1).all() and (weights.gen[0] == 1).all()


def _standardised_pair(rng: np.random.Generator, n: int, mix: np.ndarray) -> tuple:
    """Two independent samples of one skewed, correlated distribution, standardised by the
    first as the score standardises by the reference."""
    x = rng.gamma(3.0, size=(n, len(mix))) @ mix
    y = rng.gamma(3.0, size=(n, len(mix))) @ mix
    mean, std = x.mean(axis=0), x.std(axis=0)
    return (x - mean) / std, (y - mean) / std


@pytest.mark.parametrize("shift", [0.0, 0.5])
@pytest.mark.slow
def test_fpd_pulls_have_rms_near_1(shift: float) -> None:
    """Identical distributions (truth 0: the value is extrapolated to infinite N), and one
    moved by ``shift`` along a feature (truth shift^2, the covariances being equal)."""
    rng = np.random.default_rng(0)
    mix = np.eye(6) + 0.3 * rng.normal(size=(6, 6))
    pulls = []
    for _ in range(100):
        x, y = _standardised_pair(rng, 300, mix)
        y[:, 0] += shift
        value, error = fpd(x, y, rng)
        pulls.append((value - shift**2) / error)
    assert 0.7 < _rms(pulls) < 1.4, _rms(pulls)


def test_separation_pulls_of_the_mean_over_energy_bins_have_rms_near_1() -> None:
    """The separation power of two samples of one distribution is above 0 on average (a
    histogram distance of noisy histograms), so the truth is its mean over the pairs."""
    rng = np.random.default_rng(0)
    values, errors = [], []
    for _ in range(100):
        e1, e2 = rng.uniform(0.0, 1.0, 400), rng.uniform(0.0, 1.0, 400)
        edges = np.quantile(e1, np.linspace(0.0, 1.0, 5))
        edges[-1] = np.nextafter(edges[-1], 2.0)
        ref_bins = np.searchsorted(edges, e1, side="right") - 1
        gen_bins = np.searchsorted(edges, e2, side="right") - 1
        gen_bins[(gen_bins < 0) | (gen_bins > 3)] = -1
        ref = {f"f{i}": rng.gamma(2.0, size=400) * (1 + e1) for i in range(3)}
        gen = {f"f{i}": rng.gamma(2.0, size=400) * (1 + e2) for i in range(3)}
        weights = EventWeights.draw(ref_bins, gen_bins, rng)
        sep = separation_powers(ref, gen, ref_bins, gen_bins, 4, weights)
        means = sep.per_bin.mean(axis=(1, 2))  # over features and energy bins, per replicate
        values.append(means[0])
        errors.append(resampled_error(means))
    values = np.array(values)
    assert 0.7 < _rms(list((values - values.mean()) / np.array(errors))) < 1.4


def _table(rng: np.random.Generator, n: int, mix: np.ndarray) -> FeatureTable:
    """A feature table of skewed, energy-dependent numbers (no showers behind it)."""
    energy = rng.uniform(10.0, 100.0, n)
    names = ["energy_ratio", "centre_x_mm", "centre_y_mm", "width_x_mm", "width_y_mm", "hits"]
    values = rng.gamma(3.0, size=(n, len(names))) @ mix
    scalars = {name: values[:, i] * (1 + energy / 100) for i, name in enumerate(names)}
    scalars["sparsity"] = rng.beta(20.0, 2.0, n)
    shape = (5, 5, 4)
    profiles = {
        axis: rng.gamma(2.0, size=(n, size)) * energy[:, None] / 50
        for axis, size in zip("xyz", shape, strict=True)
    }
    spectrum = rng.poisson(3.0, (n, SPECTRUM_EDGES.size - 1)).astype(np.float64)
    return FeatureTable(scalars, profiles, spectrum, energy, np.zeros(n, bool), shape, 1e-6)


@pytest.mark.slow
def test_the_scores_separation_and_fpd_errors_mean_what_they_say() -> None:
    """Through the score itself: the separation power averaged over energy bins, profile
    slices and feature groups (the spectrum included), and FPD."""
    rng = np.random.default_rng(0)
    mix = np.eye(6) + 0.3 * rng.normal(size=(6, 6))
    separation, fpd_pulls = [], []
    for _ in range(40):
        reference = Reference(_table(rng, 200, mix), bins=3, seed=int(rng.integers(1 << 30)))
        metrics = reference.score_table(_table(rng, 200, mix)).metrics
        separation.append((metrics["separation"]["value"], metrics["separation"]["error"]))
        fpd_pulls.append(metrics["fpd"]["value"] / metrics["fpd"]["error"])
    values, errors = np.array(separation).T
    assert 0.7 < _rms(list((values - values.mean()) / errors)) < 1.4
    assert 0.7 < _rms(fpd_pulls) < 1.4
