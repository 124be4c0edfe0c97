"""Shower observables on hand-made images whose answers are known exactly."""

from __future__ import annotations

import numpy as np
import pytest

from evogan.physics import observables as obs


def _image(deposits: list[tuple[int, int, int, float]], shape=(5, 6, 7)) -> np.ndarray:
    ecal = np.zeros((1, *shape), dtype=np.float32)
    for x, y, z, e in deposits:
        ecal[0, x, y, z] = e
    return ecal


def test_sampling_fraction_and_total() -> None:
    ecal = np.concatenate([_image([(0, 0, 0, 1.0), (4, 5, 6, 1.0)]), _image([(1, 1, 1, 3.0)])])
    np.testing.assert_allclose(obs.total_energy(ecal), [2.0, 3.0])
    np.testing.assert_allclose(obs.sampling_fraction(ecal, np.array([100.0, 150.0])), [0.02, 0.02])


def test_profiles_sum_over_the_other_axes() -> None:
    ecal = _image([(1, 2, 3, 2.0), (1, 4, 6, 1.0)])
    np.testing.assert_allclose(obs.x_profile(ecal)[0], [0, 3, 0, 0, 0])
    np.testing.assert_allclose(obs.y_profile(ecal)[0], [0, 0, 2, 0, 1, 0])
    np.testing.assert_allclose(obs.z_profile(ecal)[0], [0, 0, 0, 2, 0, 0, 1])
    np.testing.assert_allclose(obs.longitudinal_profile(ecal), obs.profile(ecal, 2))
    with pytest.raises(ValueError, match="axis"):
        obs.profile(ecal, "w")
    with pytest.raises(ValueError, match="shape"):
        obs.z_profile(ecal[0])


def test_moments_are_energy_weighted() -> None:
    ecal = _image([(2, 0, 0, 1.0), (4, 0, 0, 1.0)])
    mean, spread = obs.moments(ecal, "x")
    assert mean[0] == pytest.approx(3.0) and spread[0] == pytest.approx(1.0)
    ecal = _image([(0, 1, 0, 3.0), (0, 5, 0, 1.0)])
    mean, spread = obs.moments(ecal, "y")
    assert mean[0] == pytest.approx(2.0) and spread[0] == pytest.approx(np.sqrt(3.0))
    mean, spread = obs.moments(np.zeros((1, 2, 2, 2)), "z")
    assert np.isnan(mean[0]) and np.isnan(spread[0])


def test_shower_max_recovers_a_parabola_vertex() -> None:
    centres = np.array([0.5, 1.5, 2.5, 3.5, 5.0, 7.0, 9.0])  # non-uniform spacing
    vertex = 3.8
    ecal = np.zeros((3, 1, 1, 7), dtype=np.float64)
    ecal[0, 0, 0] = np.maximum(20.0 - (centres - vertex) ** 2, 0.0)
    ecal[1, 0, 0, 0] = 5.0  # maximum in the first layer: its centre
    depth = obs.shower_max_depth_x0(ecal, centres)
    assert depth[0] == pytest.approx(vertex)
    assert depth[1] == pytest.approx(0.5)
    assert np.isnan(depth[2])  # empty event
    with pytest.raises(ValueError, match="one depth per layer"):
        obs.shower_max_depth_x0(ecal, centres[:-1])


def test_hits_and_empty_cells() -> None:
    ecal = _image([(0, 0, 0, 3e-4), (0, 0, 1, 3.1e-4), (1, 1, 1, 1.0)])
    assert obs.hit_count(ecal)[0] == 2  # strictly above the threshold
    assert obs.hit_count(ecal, threshold=0.5)[0] == 1
    assert obs.empty_cell_fraction(ecal)[0] == pytest.approx(1 - 3 / (5 * 6 * 7))


def test_binned_mean() -> None:
    energy = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 20.0, 99.0])
    values = np.array([1.0, 3.0, 5.0, 7.0, 9.0, 4.0, 100.0])
    stats = obs.binned_mean(values, energy, np.array([0.0, 5.0, 15.0, 20.0, 30.0]))
    np.testing.assert_array_equal(stats.count, [3, 2, 0, 1])  # 20 opens bin 3; 99 is outside
    np.testing.assert_allclose(stats.mean[[0, 1, 3]], [3.0, 8.0, 4.0])
    np.testing.assert_allclose(stats.std[[0, 1, 3]], [np.sqrt(8 / 3), 1.0, 0.0])
    assert np.isnan(stats.mean[2]) and np.isnan(stats.std[2])
    last = obs.binned_mean(values, energy, np.array([10.0, 20.0]))  # right edge included
    np.testing.assert_array_equal(last.count, [3])
    np.testing.assert_allclose(stats.centres, [2.5, 10.0, 17.5, 25.0])
    with pytest.raises(ValueError, match="increasing"):
        obs.binned_mean(values, energy, np.array([5.0, 1.0]))
