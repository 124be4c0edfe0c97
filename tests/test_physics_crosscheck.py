"""evogan's features and metrics cross-checked against independent computations.

- Features: the CaloChallenge high-level features per layer (``HighLevelFeatures.py`` of
  CaloChallenge/homepage: centre sum(E x) / (sum E + 1e-16), width
  sqrt(max(sum(E x^2) / (sum E + 1e-16) - centre^2, 0)), sparsity 1 - mean(E > 0)) computed
  here voxel by voxel from the binning's own edges (not the voxel map), on hand-made showers of
  a Cartesian window and of cylindrical detectors (regular and irregular), and on random ones.
- Separation power: the challenge's ``_separation_power`` takes density histograms and
  multiplies them by the bin widths (so each sums to 1); evogan's :func:`triangular` takes
  counts (any normalisation) and divides each histogram by its sum. Same number.
- FPD and KPD against jetnet 0.2.5 (``jetnet.evaluation``), by exact formula cases: jetnet is
  not a test dependency because it does not import here. ``import jetnet`` loads
  ``jetnet.datasets`` and ``jetnet.evaluation.gen_metrics``, which import ``energyflow``,
  ``coffea``, ``awkward`` 1, ``numba`` and ``requests`` at module level; coffea 0.7 and
  awkward 1 (what jetnet 0.2.5 was written against) require numpy < 2, and evogan runs on
  numpy 2 with torch 2.13. KPD's cases (jetnet's scaling, kernel, estimator and summary) are in
  tests/test_physics_metrics.py; here the Frechet distance against jetnet's formula with a
  general matrix square root, and the extrapolation: jetnet fits FD = a + b / N with a
  bounded to >= 0 (scipy ``curve_fit``) on features divided by the reference's largest |value|,
  evogan fits it unbounded (a may be < 0) on features standardised with the reference's mean
  and standard deviation (docs/explanation/validation.md): the same straight line, another feature
  scale.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import linalg

from evogan.detectors import Detector, detector_for
from evogan.detectors.geometry import CartesianGrid, CylindricalBinning
from evogan.detectors.materials import Materials
from evogan.physics.features import shower_features
from evogan.physics.frechet import _intercepts, frechet_distance
from evogan.physics.layered import relevant_layers
from evogan.physics.separation import triangular

WINDOW = Detector(
    "window",
    CartesianGrid(5, 4, 3, 5.1),
    Materials("tungsten", 74, 3.504, 9.327, 0.008, (2.4, 2.4, 4.8), 0.5, 0.02),
)


def _challenge_layer(energies: np.ndarray, x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """One layer's features, as the challenge writes them (with its 1e-16)."""
    total = energies.sum()
    cx, cy = (energies * x).sum() / (total + 1e-16), (energies * y).sum() / (total + 1e-16)
    wx = math.sqrt(max((energies * x * x).sum() / (total + 1e-16) - cx**2, 0.0))
    wy = math.sqrt(max((energies * y * y).sum() / (total + 1e-16) - cy**2, 0.0))
    sparsity = 1.0 - (energies > 0).mean()
    return {"energy": total, "centre_x_mm": cx, "centre_y_mm": cy, "width_x_mm": wx,
            "width_y_mm": wy, "sparsity": sparsity}  # fmt: skip


def _cylinder_positions(binning: CylindricalBinning) -> list[tuple[np.ndarray, ...]]:
    """Per layer: (x, y) of each voxel from the layer's r_edges and n_bin_alpha, in the
    challenge's order (radial fastest, then angle); angles from -pi as its XMLHandler."""
    out = []
    for bins in binning.layer_bins:
        r = [(bins.r_edges_mm[i] + bins.r_edges_mm[i + 1]) / 2 for i in range(bins.radial_bins)]
        step = 2 * math.pi / bins.alpha_bins
        alpha = [-math.pi + (j + 0.5) * step for j in range(bins.alpha_bins)]
        x = np.array([ri * math.cos(a) for a in alpha for ri in r])
        y = np.array([ri * math.sin(a) for a in alpha for ri in r])
        out.append((x, y))
    return out


def _expected(detector: Detector, flat: np.ndarray) -> dict[str, np.ndarray]:
    """Every per-layer feature of flat showers, voxel by voxel."""
    geometry = detector.geometry
    if isinstance(geometry, CylindricalBinning):
        positions = _cylinder_positions(geometry)
        angular = relevant_layers(geometry)[1]
    else:  # the window's pads by (x, y) index, layer fastest in the flat order
        ix, iy = np.meshgrid(np.arange(5), np.arange(4), indexing="ij")
        positions = [((ix.ravel() - 2) * 5.1, (iy.ravel() - 1.5) * 5.1)] * 3
        angular = [0, 1, 2]
    out = {}
    for n, shower in enumerate(flat):
        start = 0
        for layer, (x, y) in enumerate(positions):
            if isinstance(geometry, CylindricalBinning):
                energies, start = shower[start : start + len(x)], start + len(x)
            else:
                energies = shower.reshape(20, 3)[:, layer]
            row = _challenge_layer(energies.astype(np.float64), x, y) if len(x) else {}
            row = row or {"energy": 0.0, "sparsity": 1.0}
            for key in ("centre_x_mm", "centre_y_mm", "width_x_mm", "width_y_mm"):
                row[key] = row.get(key, 0.0) if layer in angular else 0.0
            for key, value in row.items():
                out.setdefault(key, np.zeros((len(flat), len(positions))))[n, layer] = value
    return out


def _table_layers(detector: Detector, flat: np.ndarray) -> dict[str, np.ndarray]:
    held = flat if detector.grid_shape is None else detector.geometry.to_grid(flat)
    return shower_features(held, np.full(len(flat), 10.0), detector=detector).layers


@pytest.mark.parametrize("name", ["window", "calochallenge-2", "calochallenge-1-pions"])
def test_one_lit_voxel_has_its_position_as_centre_and_no_width(name: str) -> None:
    detector = WINDOW if name == "window" else detector_for(name)
    x, y = (np.concatenate(p) for p in zip(*_expected_positions(detector), strict=True))
    flat = np.zeros((3, detector.voxels), np.float32)
    lit = [5, detector.voxels // 2, detector.voxels - 7]
    flat[np.arange(3), lit] = [0.25, 1.0, 4.0]
    layers = _table_layers(detector, flat)
    layer = detector.geometry.voxel_map.layer[lit]
    rows = np.arange(3)
    np.testing.assert_allclose(layers["energy"][rows, layer], [0.25, 1.0, 4.0], rtol=1e-7)
    angular = np.isin(layer, relevant_layers(detector.geometry)[1])
    np.testing.assert_allclose(layers["centre_x_mm"][rows, layer], x[lit] * angular, atol=1e-9)
    np.testing.assert_allclose(layers["centre_y_mm"][rows, layer], y[lit] * angular, atol=1e-9)
    assert np.all(layers["width_x_mm"] == 0) and np.all(layers["width_y_mm"] == 0)
    assert layers["energy"].sum() == pytest.approx(5.25)  # nothing anywhere else


def _expected_positions(detector: Detector) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer (x, y) of the voxels in flat order, independently of the voxel map."""
    if isinstance(detector.geometry, CylindricalBinning):
        return _cylinder_positions(detector.geometry)
    x = np.repeat((np.arange(5) - 2) * 5.1, 4 * 3)  # (x, y, layer): layer fastest
    y = np.tile(np.repeat((np.arange(4) - 1.5) * 5.1, 3), 5)
    return [(x, y)]


def test_two_voxels_give_the_weighted_centre_and_the_exact_width() -> None:
    """E1 at x1, E2 at x2 in one layer: centre (E1 x1 + E2 x2) / (E1 + E2), width
    |x1 - x2| sqrt(E1 E2) / (E1 + E2); in dataset 2 (radial bins of 4.65 mm, 16 angles) two
    voxels opposite each other at the same radius have centre 0 and width r |cos(alpha)|."""
    grid = np.zeros((1, 5, 4, 3), np.float32)
    grid[0, 0, 1, 2], grid[0, 3, 1, 2] = 1.0, 3.0  # x = -10.2 and 5.1 mm, layer 2
    layers = shower_features(grid, np.array([10.0]), detector=WINDOW).layers
    assert layers["centre_x_mm"][0, 2] == pytest.approx((-10.2 + 3 * 5.1) / 4)
    assert layers["width_x_mm"][0, 2] == pytest.approx(15.3 * math.sqrt(3) / 4)
    assert layers["width_y_mm"][0, 2] == 0 and layers["centre_y_mm"][0, 2] == pytest.approx(-2.55)
    assert layers["centre_x_mm"][0, :2].tolist() == [0, 0]  # empty layers: 0, as the challenge
    assert layers["sparsity"][0].tolist() == pytest.approx([1.0, 1.0, 1 - 2 / 20])
    detector = detector_for("calochallenge-2")
    shower = np.zeros((1, 9, 16, 45), np.float32)
    shower[0, 2, 1, 7] = shower[0, 2, 9, 7] = 2.0  # radius 11.625 mm, alpha and alpha + pi
    layers = shower_features(shower, np.array([10.0]), detector=detector).layers
    alpha = -math.pi + 1.5 * 2 * math.pi / 16
    assert layers["centre_x_mm"][0, 7] == pytest.approx(0.0, abs=1e-9)
    assert layers["width_x_mm"][0, 7] == pytest.approx(11.625 * abs(math.cos(alpha)), rel=1e-12)
    assert layers["width_y_mm"][0, 7] == pytest.approx(11.625 * abs(math.sin(alpha)), rel=1e-12)
    assert layers["energy"][0, 7] == pytest.approx(4.0)


@pytest.mark.parametrize(
    "name", ["window", "calochallenge-2", "calochallenge-1-photons", "calochallenge-1-pions"]
)
def test_every_layer_feature_matches_a_voxel_by_voxel_computation(name: str) -> None:
    detector = WINDOW if name == "window" else detector_for(name)
    rng = np.random.default_rng(7)
    flat = rng.gamma(0.3, 1.0, (6, detector.voxels)) * (rng.random((6, detector.voxels)) < 0.4)
    flat = flat.astype(np.float32)
    flat[0] = 0.0  # an empty shower: every layer empty
    got, expected = _table_layers(detector, flat), _expected(detector, flat)
    assert set(got) == set(expected)
    for key, values in expected.items():
        np.testing.assert_allclose(got[key], values, rtol=1e-9, atol=1e-9, err_msg=key)


def test_the_whole_shower_and_its_energy_ratio_in_gev() -> None:
    """E_tot / E_inc is a ratio of GeV (the challenge's is of MeV: the same number); the layer
    energies are GeV (the challenge's MeV / 1000)."""
    detector = detector_for("calochallenge-1-photons")
    rng = np.random.default_rng(3)
    flat = rng.random((4, detector.voxels), dtype=np.float32)
    table = shower_features(flat, np.array([50.0, 60.0, 70.0, 80.0]), detector=detector)
    total = flat.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(table.scalars["energy_ratio"], total / [50, 60, 70, 80])
    np.testing.assert_allclose(table.layers["energy"].sum(axis=1), total, rtol=1e-12)
    assert table.scalars["sparsity"].tolist() == [0.0] * 4


def _challenge_separation(density1: np.ndarray, density2: np.ndarray, bins: np.ndarray) -> float:
    """The challenge's formula on ``plt.hist(..., density=True)`` histograms."""
    h1, h2 = density1 * np.diff(bins), density2 * np.diff(bins)
    return float(0.5 * ((h1 - h2) ** 2 / (h1 + h2 + 1e-16)).sum())


def test_separation_power_is_the_challenges_formula() -> None:
    bins = np.array([0.0, 1.0, 1.5, 4.0, 10.0])  # unequal widths: the density matters
    counts1, counts2 = np.array([5.0, 0.0, 12.0, 3.0]), np.array([1.0, 7.0, 2.0, 10.0])
    density1 = counts1 / counts1.sum() / np.diff(bins)
    density2 = counts2 / counts2.sum() / np.diff(bins)
    expected = _challenge_separation(density1, density2, bins)
    assert triangular(counts1, counts2) == pytest.approx(expected, rel=1e-12)
    assert triangular(counts1, 3 * counts1) == 0.0  # any normalisation: counts are divided
    assert triangular([4.0, 0.0], [0.0, 9.0]) == pytest.approx(1.0)  # disjoint
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=500), rng.normal(0.3, 1.2, 400)
    edges = np.linspace(-4, 4, 17)
    d1, _ = np.histogram(a, edges, density=True)
    d2, _ = np.histogram(b, edges, density=True)
    h1, h2 = np.histogram(a, edges)[0], np.histogram(b, edges)[0]
    assert triangular(h1, h2) == pytest.approx(_challenge_separation(d1, d2, edges), rel=1e-9)


def test_frechet_distance_is_jetnets_formula_with_a_general_square_root() -> None:
    """jetnet: |mu1 - mu2|^2 + Tr(C1 + C2 - 2 sqrtm(C1 C2)) with scipy's sqrtm of the
    (non-symmetric) product; evogan: the eigenvalues of C1^1/2 C2 C1^1/2. Same number for
    covariances that do not commute."""
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
    cov1, cov2 = a @ a.T + 0.1 * np.eye(4), b @ b.T + 0.1 * np.eye(4)
    mu1, mu2 = rng.normal(size=4), rng.normal(size=4)
    root = linalg.sqrtm(cov1 @ cov2).real
    expected = ((mu1 - mu2) ** 2).sum() + np.trace(cov1 + cov2 - 2 * root)
    assert frechet_distance(mu1, cov1, mu2, cov2) == pytest.approx(expected, rel=1e-10)


def test_fpd_extrapolation_is_jetnets_straight_line_in_one_over_n_without_its_bound() -> None:
    """FD = a + b / N measured at several N: the intercept a is the value, as jetnet's
    ``curve_fit(intercept + slope x)``; jetnet bounds a to >= 0, evogan keeps a negative a
    (the noise of two samples of one distribution can put it below 0, and a bound would bias
    the floor upwards)."""
    sizes = np.array([100, 150, 200, 300, 400])
    lines = np.array([0.3 + 12.0 / sizes, -0.02 + 5.0 / sizes])
    np.testing.assert_allclose(_intercepts(lines, sizes), [0.3, -0.02], atol=1e-12)


def test_a_regular_cylinders_showers_flat_or_as_its_grid_give_one_table() -> None:
    detector = detector_for("calochallenge-2")
    rng = np.random.default_rng(9)
    flat = (rng.gamma(0.3, 1e-3, (5, detector.voxels)) * (rng.random((5, 6480)) < 0.3)).astype(
        np.float32
    )
    energy = np.full(5, 5.0)
    as_flat = shower_features(flat, energy, cell_threshold=1e-5, detector=detector)
    grid = detector.geometry.to_grid(flat)
    as_grid = shower_features(grid, energy, cell_threshold=1e-5, detector=detector)
    for key, values in as_flat.layers.items():
        np.testing.assert_allclose(as_grid.layers[key], values, rtol=1e-12, atol=1e-12)
    for key, values in as_flat.scalars.items():
        np.testing.assert_allclose(as_grid.scalars[key], values, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(as_grid.spectrum, as_flat.spectrum)
    with pytest.raises(ValueError, match=r"must be \(n, 6480\) or \(n, 9, 16, 45\)"):
        shower_features(flat[:, :100], energy, detector=detector)
