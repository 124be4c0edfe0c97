"""Synthetic GFLASH showers: physics against the reference table, reproducibility, layout."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evogan.data.synthetic import BLOCK_EVENTS, generate_showers, synthesize
from evogan.detectors import detector_for
from evogan.errors import EvoganError
from evogan.physics import observables as obs

REFERENCE_SF = {10.0: 0.0220, 100.0: 0.0202, 400.0: 0.0184}

CLIC = detector_for("clic-ecal")


def _showers(energy: float, n: int, seed: int) -> np.ndarray:
    return generate_showers(np.full(n, energy), np.random.default_rng(seed))


def test_detector_geometry() -> None:
    edges = CLIC.materials.layer_edges_x0()
    assert edges.shape == (26,)
    assert edges[17] == pytest.approx(17 * 2.4 / 3.504)
    assert edges[-1] == pytest.approx((17 * 2.4 + 8 * 4.8) / 3.504)  # about 22.6 X0
    assert np.allclose(np.diff(edges)[17:], 2 * np.diff(edges)[0])
    centres = CLIC.materials.layer_centres_x0()
    assert np.all((centres > edges[:-1]) & (centres < edges[1:]))


@pytest.mark.parametrize("energy", sorted(REFERENCE_SF))
def test_sampling_fraction_matches_reference(energy: float) -> None:
    ecal = _showers(energy, 200, seed=int(energy))
    sf = obs.sampling_fraction(ecal, np.full(len(ecal), energy)).mean()
    assert sf == pytest.approx(REFERENCE_SF[energy], rel=0.10)


def test_sampling_fraction_falls_with_energy() -> None:
    means = [
        obs.sampling_fraction(_showers(e, 150, seed=3), np.full(150, e)).mean()
        for e in (10.0, 100.0, 400.0)
    ]
    assert means[0] > means[1] > means[2]


def test_shower_maximum_deepens_linearly_in_log_energy() -> None:
    energies = np.array([5.0, 20.0, 100.0, 400.0])
    centres = CLIC.materials.layer_centres_x0()
    depth = np.array(
        [np.nanmean(obs.shower_max_depth_x0(_showers(e, 150, seed=11), centres)) for e in energies]
    )
    assert np.all(np.diff(depth) > 0), depth
    slope, intercept = np.polyfit(np.log(energies), depth, 1)
    # GFLASH: T = ln(E / Ec) - 0.812, i.e. one X0 per e-fold of energy.
    assert 0.7 < slope < 1.2, slope
    assert np.max(np.abs(depth - (slope * np.log(energies) + intercept))) < 0.5
    assert 7.5 < depth[2] < 9.5  # reference T = 8.6 X0 at 100 GeV


def test_images_are_sparse_like_calorimeter_data() -> None:
    ecal = _showers(100.0, 50, seed=5)
    empty = obs.empty_cell_fraction(ecal)
    assert np.all((empty > 0.95) & (empty < 0.9995))
    assert np.all(obs.hit_count(ecal) > 50)
    # Centred, perpendicular incidence: the barycentre sits in the middle cell.
    for axis in ("x", "y"):
        mean, spread = obs.moments(ecal, axis)
        assert np.allclose(mean, 25.0, atol=1.0)
        assert np.all((spread > 0.3) & (spread < 5.0))


def test_chunks_have_layout_dtype_and_angle() -> None:
    chunks = list(synthesize(70, (2.0, 500.0), seed=1, chunk_events=32))
    assert [len(energy) for _, energy, _ in chunks] == [32, 32, 6]
    for ecal, energy, theta in chunks:
        assert ecal.shape == (len(energy), 51, 51, 25) and ecal.dtype == np.float32
        assert energy.dtype == np.float32 and theta.dtype == np.float32
        assert np.all((energy >= 2.0) & (energy <= 500.0))
        assert np.all(ecal >= 0) and np.all(ecal.sum(axis=(1, 2, 3)) > 0)
        assert np.allclose(theta, math.pi / 2)


def _collect(events: int, seed: int, chunk_events: int) -> tuple[np.ndarray, np.ndarray]:
    chunks = list(synthesize(events, (2.0, 500.0), seed, chunk_events=chunk_events))
    return np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])


def test_same_seed_same_showers_whatever_the_chunk_size() -> None:
    events = BLOCK_EVENTS + 20
    ecal, energy = _collect(events, seed=42, chunk_events=events)
    for chunk_events in (1 + BLOCK_EVENTS // 3, BLOCK_EVENTS, 1000):
        other_ecal, other_energy = _collect(events, seed=42, chunk_events=chunk_events)
        np.testing.assert_array_equal(other_ecal, ecal)
        np.testing.assert_array_equal(other_energy, energy)
    # A shorter request is a prefix of the longer one.
    head_ecal, head_energy = _collect(30, seed=42, chunk_events=7)
    np.testing.assert_array_equal(head_ecal, ecal[:30])
    np.testing.assert_array_equal(head_energy, energy[:30])


def test_each_block_draws_from_its_spawned_seed() -> None:
    """Block b draws from SeedSequence(seed).spawn(...)[b], made as it is reached: a request
    of any size starts in constant memory."""
    events = 2 * BLOCK_EVENTS + 5
    _ecal, energy = _collect(events, seed=7, chunk_events=events)
    children = np.random.SeedSequence(7).spawn(3)
    for block, child in enumerate(children):
        drawn = np.random.default_rng(child).uniform(2.0, 500.0, BLOCK_EVENTS)
        part = energy[block * BLOCK_EVENTS : (block + 1) * BLOCK_EVENTS]
        np.testing.assert_array_equal(part, drawn[: len(part)].astype(np.float32))


def test_a_file_beyond_the_free_disk_is_refused_before_any_work(tmp_path, capsys) -> None:
    from evogan.cli import main

    out = tmp_path / "big.h5"
    assert main(["data", "synth", "--out", str(out), "--events", "1000000000000"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "evogan: error: writing 1,000,000,000,000 synthetic showers (1000 bytes or more each) "
        "needs at least 1 PB of disk, more than the "
    )
    assert err.endswith(
        f"free for {out}; ask for fewer showers, or write to a file system with room"
    )
    args = ["data", "synth", "--out", str(out), "--events", "4", "--energy-range", "10", "inf"]
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == (
        "evogan: error: --energy-range takes finite numbers only, got 10 inf"
    )
    assert list(tmp_path.iterdir()) == []


def test_different_seeds_differ() -> None:
    a, ea = _collect(8, seed=1, chunk_events=8)
    b, eb = _collect(8, seed=2, chunk_events=8)
    assert not np.array_equal(ea, eb)
    assert not np.array_equal(a, b)


def test_inclined_showers_drift_along_y() -> None:
    rng = np.random.default_rng(9)
    ecal = generate_showers(np.full(40, 100.0), rng, theta=1.0)  # about 57 degrees
    front_y, _ = obs.moments(ecal[..., :5], "y")
    back_y, _ = obs.moments(ecal[..., 15:], "y")
    x_mean, _ = obs.moments(ecal, "x")
    assert np.nanmean(back_y) - np.nanmean(front_y) > 3.0  # cot(1.0) x ~50 mm ~ 6 cells
    assert np.allclose(x_mean, 25.0, atol=1.0)


def test_out_of_range_requests_are_user_errors() -> None:
    with pytest.raises(EvoganError, match="energies must lie"):
        generate_showers(np.array([10.0, 0.1]), np.random.default_rng(0))
    with pytest.raises(EvoganError, match="at least 1"):
        next(synthesize(0, (2.0, 500.0), seed=0))
    with pytest.raises(EvoganError, match="LO < HI"):
        next(synthesize(5, (500.0, 2.0), seed=0))
