"""Each validation metric and the shower features on inputs with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evogan.data.synthetic import generate_showers
from evogan.detectors import detector_for
from evogan.physics.classifier import auc, average_ranks, classifier_auc
from evogan.physics.features import shower_features
from evogan.physics.frechet import fpd, frechet_distance
from evogan.physics.kernel import jetnet_scale, kpd, mmd_poly
from evogan.physics.resampling import EventWeights, resampled_error
from evogan.physics.sampling import sf_error
from evogan.physics.separation import reference_edges, separation_powers, triangular
from tests.conftest import imported_by


def test_triangular_discrimination_known_values() -> None:
    assert triangular([1, 2, 3], [2, 4, 6]) == pytest.approx(0.0)  # normalised first
    assert triangular([1, 0], [0, 1]) == pytest.approx(1.0)
    # p = (1, 0), q = (1/2, 1/2): 1/2 (1/4 / 3/2 + 1/4 / 1/2) = 1/3
    assert triangular([1, 0], [1, 1]) == pytest.approx(1.0 / 3.0)
    np.testing.assert_allclose(triangular([[1, 0], [1, 1]], [[0, 1], [1, 1]]), [1.0, 0.0])


def test_separation_uses_reference_quantiles_and_counts_overflow() -> None:
    rng = np.random.default_rng(0)
    assert reference_edges(np.full(10, 3.0)) is None  # constant: no information
    ref = {"a": rng.normal(size=4000), "flat": np.ones(4000)}
    bins = np.zeros(4000, dtype=int)
    weights = EventWeights.draw(bins, bins, rng)
    same = separation_powers(
        ref, {"a": rng.normal(size=4000), "flat": np.ones(4000)}, bins, bins, 1, weights
    )
    assert same.names == ["a"]  # the constant feature is skipped
    assert same.overall[0, 0] < 0.01 and resampled_error(same.overall[:, 0]) > 0
    moved = {"a": rng.normal(size=4000) + 100, "flat": np.ones(4000)}
    far = separation_powers(ref, moved, bins, bins, 1, weights)
    assert far.overall[0, 0] == pytest.approx(1.0)  # all in the overflow bin: counted, not lost
    assert far.per_bin[0, 0].tolist() == pytest.approx([1.0]) and far.worst(1)[0][0] == "a"


def test_frechet_distance_is_analytic_for_gaussians() -> None:
    assert frechet_distance(np.zeros(2), np.eye(2), np.zeros(2), np.eye(2)) == pytest.approx(0)
    # |mu1 - mu2|^2 + (sigma1 - sigma2)^2 per dimension
    value = frechet_distance(
        np.array([0.0, 0.0]), np.diag([1.0, 4.0]), np.array([3.0, 0.0]), np.diag([1.0, 1.0])
    )
    assert value == pytest.approx(9.0 + 1.0)


def test_fpd_extrapolates_to_zero_for_one_distribution_and_finds_a_shift() -> None:
    rng = np.random.default_rng(1)
    real, gen = rng.normal(size=(3000, 3)), rng.normal(size=(3000, 3))
    value, error = fpd(real, gen, rng)
    assert abs(value) < max(3 * error, 0.01) and error > 0
    shifted, error = fpd(real, gen + np.array([1.0, 0.0, 0.0]), rng)
    # |shift|^2 = 1, known to about sqrt(4 |shift|^2 x 2 / 3000) = 0.05 from 3000 events each
    assert abs(shifted - 1.0) < 3 * error and 0.03 < error < 0.1
    # Covariances alone: the second feature twice as wide adds (2 - 1)^2 = 1
    wider, error = fpd(real, gen * np.array([1.0, 2.0, 1.0]), rng)
    assert abs(wider - 1.0) < 3 * error and error < 0.2


def test_kpd_is_unbiased_and_the_quartic_kernel_gives_the_closed_form() -> None:
    rng = np.random.default_rng(2)
    real, gen = rng.normal(size=(4000, 1)), rng.normal(size=(4000, 1))
    value, error = kpd(real, gen, rng)
    assert abs(value) < 3 * error + 1e-4
    # 1-D, k = (xy + 1)^4: MMD^2 = sum_j C(4, j) dm_j^2 over the raw moments j = 1..4;
    # N(0.5, 1) vs N(0, 1): dm1 = 0.5, dm2 = 0.25, dm3 = 0.5^3 + 3 x 0.5 = 1.625,
    # dm4 = 0.5^4 + 6 x 0.5^2 = 1.5625
    expected = 4 * 0.25 + 6 * 0.0625 + 4 * 1.625**2 + 1.5625**2
    assert mmd_poly(real, gen + 0.5) == pytest.approx(expected, rel=0.3)  # noise from x^4


def test_kpd_follows_jetnets_scaling_kernel_and_summary() -> None:
    """jetnet divides both sets by the reference's largest |value| per feature (leaving an
    all-zero feature as it is), and reports the median over batches with half the
    16.275-83.725 percentile range."""
    real = np.array([[1.0, -4.0, 0.0], [-2.0, 2.0, 0.0]])
    gen = np.array([[4.0, 1.0, 3.0]])
    scaled_real, scaled_gen = jetnet_scale(real, gen)
    np.testing.assert_array_equal(scaled_real, [[0.5, -1.0, 0.0], [-1.0, 0.5, 0.0]])
    np.testing.assert_array_equal(scaled_gen, [[2.0, 0.25, 3.0]])
    # 1-D sets small enough to add up by hand: x = (1, 2, 4) / 4, y = (-2, 0) / 4
    x, y = np.array([[1.0], [2.0], [4.0]]), np.array([[-2.0], [0.0]])
    xx = (1.125**4 + 1.25**4 + 1.5**4) / 3  # each pair twice over 3 x 2 ordered pairs
    yy = 1.0
    xy = (0.875**4 + 1 + 0.75**4 + 1 + 0.5**4 + 1) / 6
    assert mmd_poly(*jetnet_scale(x, y)) == pytest.approx(xx + yy - 2 * xy, rel=1e-12)
    rng = np.random.default_rng(8)
    real, gen = rng.gamma(2.0, size=(60, 3)) * [1, 10, 100], rng.gamma(2.0, size=(50, 3))
    value, error = kpd(real, gen, np.random.default_rng(3))
    draw = np.random.default_rng(3)
    scaled_real, scaled_gen = jetnet_scale(real, gen)
    batches = [
        mmd_poly(
            scaled_real[draw.choice(60, 25, replace=False)],
            scaled_gen[draw.choice(50, 25, replace=False)],
        )
        for _ in range(10)
    ]
    low, high = np.percentile(batches, [16.275, 83.725])
    assert value == np.median(batches) and error == pytest.approx((high - low) / 2, rel=1e-12)


def test_mmd_is_the_unbiased_estimator_term_by_term() -> None:
    x = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, -1.0]])
    y = np.array([[1.0, 1.0], [-1.0, 0.5]])

    def k(a: np.ndarray, b: np.ndarray) -> float:
        return (a @ b / 2 + 1.0) ** 4

    xx = sum(k(a, b) for i, a in enumerate(x) for j, b in enumerate(x) if i != j) / 6
    yy = sum(k(a, b) for i, a in enumerate(y) for j, b in enumerate(y) if i != j) / 2
    xy = sum(k(a, b) for a in x for b in y) / 6
    assert mmd_poly(x, y) == pytest.approx(xx + yy - 2 * xy)
    with pytest.raises(ValueError, match="at least 2 events"):
        mmd_poly(x[:1], y)

    rng = np.random.default_rng(5)  # sets over several blocks of kernel rows, as whole matrices
    x, y = rng.normal(size=(300, 4)), rng.normal(size=(257, 4)) + 0.2
    kxx, kyy, kxy = ((x @ x.T / 4 + 1) ** 4, (y @ y.T / 4 + 1) ** 4, (x @ y.T / 4 + 1) ** 4)
    xx = (kxx.sum() - np.trace(kxx)) / (300 * 299)
    yy = (kyy.sum() - np.trace(kyy)) / (257 * 256)
    assert mmd_poly(x, y) == pytest.approx(xx + yy - 2 * kxy.mean(), rel=1e-9)


def test_auc_known_values_and_classifier_sees_means_and_widths() -> None:
    assert auc(np.array([2.0, 3.0]), np.array([0.0, 1.0]))[0] == 1.0
    assert auc(np.array([1.0, 1.0]), np.array([1.0, 1.0]))[0] == 0.5
    rng = np.random.default_rng(3)
    real = rng.normal(size=(2000, 4))
    same, error = classifier_auc(real, rng.normal(size=(2000, 4)), rng)
    assert abs(same - 0.5) < 4 * error and 0 < error < 0.05
    assert classifier_auc(real, rng.normal(size=(2000, 4)) + 2.0, rng)[0] > 0.95
    wider = rng.normal(size=(2000, 4)) * np.array([2.0, 1, 1, 1])  # same mean: needs x^2 terms
    assert classifier_auc(real, wider, rng)[0] > 0.65


def test_average_ranks_are_scipys_rankdata() -> None:
    from scipy import stats

    rng = np.random.default_rng(4)
    for values in (
        rng.normal(size=1000),
        np.round(rng.normal(size=1000) * 2) / 2,  # many ties
        np.array([1.0, np.inf, 2.0, np.inf, -np.inf]),
        np.array([5.0]),
        np.array([]),
    ):
        np.testing.assert_array_equal(average_ranks(values), stats.rankdata(values))
    assert np.isnan(average_ranks(np.array([1.0, np.nan, 2.0]))).all()


@pytest.mark.slow
def test_scoring_does_not_import_scipy() -> None:
    """Every process that scores (search ranks, validation during training) would pay 0.4-0.5 s
    for scipy.optimize or scipy.stats."""
    code = (
        "import numpy as np\n"
        "from evogan.physics.classifier import classifier_auc\n"
        "import evogan.physics.score, evogan.search.final\n"
        "rng = np.random.default_rng(0)\n"
        "classifier_auc(rng.normal(size=(40, 3)), rng.normal(size=(40, 3)), rng)\n"
    )
    assert not imported_by(code, "scipy")


def test_sf_term_is_the_mean_relative_error_per_bin() -> None:
    ref = np.full(8, 0.02)
    bins = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    value, error = sf_error(ref, np.full(8, 0.022), bins, bins, 2)
    assert value == pytest.approx(0.1) and error == pytest.approx(0.0)
    assert sf_error(ref, np.zeros(8), bins, bins, 2)[0] == pytest.approx(1.0)  # empty: finite
    assert math.isnan(sf_error(ref, ref, bins, np.full(8, -1), 2)[0])


def test_features_of_a_known_shower() -> None:
    ecal = np.zeros((3, 51, 51, 25), dtype=np.float32)
    ecal[0, 25, 25, 3] = 0.5  # two deposits 2 cells apart in x, same layer
    ecal[0, 27, 25, 3] = 0.5
    ecal[2, 25, 25, 0] = np.nan  # non-finite
    table = shower_features(ecal, np.array([50.0, 50.0, 50.0]))
    s = {k: v[0] for k, v in table.scalars.items()}
    assert s["energy_ratio"] == pytest.approx(0.02)
    assert s["centre_x_mm"] == pytest.approx(
        1 * detector_for("clic-ecal").geometry.cell_mm
    )  # relative to the window centre
    assert s["width_x_mm"] == pytest.approx(1 * detector_for("clic-ecal").geometry.cell_mm)
    assert s["centre_y_mm"] == 0 and s["width_y_mm"] == 0
    assert s["centre_z_layer"] == 3 and s["centre_z_x0"] == pytest.approx(3.5 * 2.4 / 3.504)
    assert s["hits"] == 2 and s["sparsity"] == pytest.approx(1 - 2 / (51 * 51 * 25))
    assert table.bad.tolist() == [False, True, True]
    for values in table.scalars.values():
        assert np.isfinite(values).all()
    assert table.spectrum[0].sum() == 2 and table.profiles["z"][0, 3] == pytest.approx(1.0)


def test_features_over_several_chunks_equal_each_shower_alone() -> None:
    """The table is built in chunks that share one buffer: a short last chunk, a chunk with
    non-finite and negative cells, and an empty shower give every shower its own features."""
    rng = np.random.default_rng(11)
    ecal = (rng.exponential(0.01, (300, 6, 5, 25)) * (rng.random((300, 6, 5, 25)) < 0.3)).astype(
        np.float32
    )
    ecal[260, 1, 2, 3], ecal[270, 0, 0, 0], ecal[280] = np.inf, -1.0, 0.0
    energy, theta = rng.uniform(10.0, 100.0, 300), rng.uniform(1.2, 1.9, 300)
    whole = shower_features(ecal, energy, theta)
    for i in (0, 255, 256, 260, 270, 280, 299):
        alone = shower_features(ecal[i : i + 1], energy[i : i + 1], theta[i : i + 1])
        for name, values in alone.scalars.items():
            np.testing.assert_allclose(whole.scalars[name][i], values[0], rtol=1e-12, atol=0)
        for axis, values in alone.profiles.items():
            np.testing.assert_allclose(whole.profiles[axis][i], values[0], rtol=1e-12, atol=0)
        np.testing.assert_array_equal(whole.spectrum[i], alone.spectrum[0])
        assert whole.bad[i] == alone.bad[0] == (i in (260, 280))


def test_measured_angle_follows_the_true_angle() -> None:
    rng = np.random.default_rng(4)
    energy = np.full(24, 50.0)
    for theta in (1.2, 1.5707963):
        ecal = generate_showers(energy, rng, theta=theta)
        table = shower_features(ecal, energy, np.full(24, theta))
        angle, error = table.scalars["angle_deg"], table.scalars["angle_error_deg"]
        assert np.median(angle) == pytest.approx(np.degrees(theta), abs=2.0)
        np.testing.assert_allclose(error, angle - np.degrees(theta), atol=1e-9)
        assert "angle_error_deg" in table.scored_names() and "angle_deg" not in table.scored_names()
