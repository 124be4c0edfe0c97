"""Ensemble statistics (SAGIPS equations 7-8) on known inputs and on real generators."""

from __future__ import annotations

import numpy as np
import pytest

from evogan.config.gan import GanSpec
from evogan.errors import EvoganError
from evogan.physics.ensemble import check_compatible, combine, ensemble_moments, ensemble_validation
from evogan.physics.validation import equal_count_edges, shower_stats
from tests.gan_fixtures import tiny_generator, tiny_spec, toy_showers


def test_ensemble_mean_and_std_follow_equations_7_and_8() -> None:
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    mean, std = ensemble_moments(values)
    np.testing.assert_allclose(mean, [3.0, 5.0])
    np.testing.assert_allclose(std, [np.sqrt(8.0 / 3.0), np.sqrt(26.0 / 3.0)])
    mean, std = ensemble_moments(np.array([[1.0, np.nan], [3.0, np.nan], [np.nan, np.nan]]))
    np.testing.assert_allclose(mean, [2.0, np.nan])
    np.testing.assert_allclose(std, [1.0, np.nan])
    with pytest.raises(ValueError, match="member axis"):
        ensemble_moments(np.empty((0, 3)))


def _stats(fraction: float):
    ecal, energy, _ = toy_showers(12, seed=5)
    scale = fraction / 0.02
    return shower_stats(ecal * scale, energy, equal_count_edges(energy, 3))


def test_combined_members_give_mean_std_and_score_spread() -> None:
    reference = _stats(0.02)
    members = [_stats(0.018), _stats(0.02), _stats(0.022)]
    result = combine(members, reference)
    sf = reference.values["sampling_fraction"]  # members are x0.9, x1, x1.1 of it
    np.testing.assert_allclose(result.mean.values["sampling_fraction"], sf, rtol=1e-6)
    spread = sf * 0.1 * np.sqrt(2.0 / 3.0)
    np.testing.assert_allclose(result.std["sampling_fraction"], spread, rtol=1e-6)
    np.testing.assert_allclose(result.std["profile_z"], 0.0, atol=1e-9)  # shapes identical
    scores = [s["score"] for s in result.scores]
    np.testing.assert_allclose(scores, [0.1, 0.0, 0.1], atol=1e-6)
    assert result.score_mean == pytest.approx(0.2 / 3.0, abs=1e-6)
    assert result.score_std == pytest.approx(np.std([0.1, 0.0, 0.1]), abs=1e-6)
    assert result.mean_score["score"] == pytest.approx(0.0, abs=1e-6)  # errors cancel in the mean
    assert result.to_json()["members"] == 3


def test_generators_see_the_same_noise_and_conditions() -> None:
    spec = tiny_spec()
    ecal, energy, theta = toy_showers(16, seed=1)
    reference = shower_stats(ecal, energy, equal_count_edges(energy, 2))
    same = tiny_generator(7)
    twins = ensemble_validation([(spec, same), (spec, same)], reference, energy, theta, seed=3)
    for name, std in twins.std.items():
        np.testing.assert_array_equal(np.nan_to_num(std), 0.0, err_msg=name)
    assert twins.scores[0] == twins.scores[1]
    mixed = ensemble_validation(
        [(spec, tiny_generator(7)), (spec, tiny_generator(8))], reference, energy, theta, seed=3
    )
    assert mixed.scores[0] == twins.scores[0]  # member 1 is the same model on the same noise
    assert float(np.nanmax(mixed.std["sampling_fraction"])) > 0
    np.testing.assert_allclose(
        mixed.mean.values["hits"],
        0.5 * (mixed.members[0].values["hits"] + mixed.members[1].values["hits"]),
    )


def test_members_must_share_the_latent() -> None:
    spec = tiny_spec()
    other = GanSpec.model_validate({**spec.model_dump(), "latent_size": 20, "name": "wide"})
    with pytest.raises(EvoganError, match=r"ensemble member 2 \(wide\) must share latent size"):
        check_compatible([spec, other])
