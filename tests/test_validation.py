"""Validation observables and score on hand-built showers with known answers, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evogan.cli import main
from evogan.physics.validation import (
    SPECTRUM_EDGES,
    equal_count_edges,
    shower_stats,
    validation_score,
)
from tests.conftest import evogan
from tests.gan_fixtures import save_tiny_generator, write_showers

SHAPE = (5, 6, 7)


def _showers(xs: tuple[int, int], fraction: float, energy: np.ndarray) -> np.ndarray:
    """Two equal deposits at x = xs (y = 2, z = 3) summing to ``fraction`` x energy."""
    ecal = np.zeros((len(energy), *SHAPE), dtype=np.float64)
    for x in xs:
        ecal[:, x, 2, 3] = 0.5 * fraction * energy
    return ecal


ENERGY = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
EDGES = np.array([10.0, 30.0, 60.0])


def _stats(xs: tuple[int, int], fraction: float):
    return shower_stats(_showers(xs, fraction, ENERGY), ENERGY, EDGES)


def test_observables_of_known_showers() -> None:
    stats = shower_stats(_showers((1, 3), 0.02, ENERGY), ENERGY, EDGES)
    np.testing.assert_allclose(stats.values["sampling_fraction"], [0.02, 0.02])
    np.testing.assert_array_equal(stats.counts, [2, 4])
    np.testing.assert_allclose(stats.values["profile_x"], [0, 0.5, 0, 0.5, 0])
    np.testing.assert_allclose(stats.values["profile_z"], np.eye(7)[3])
    moments = stats.values["moments"]  # (bins, axis, first/second)
    np.testing.assert_allclose(moments[:, 0], [[2.0, 1.0], [2.0, 1.0]])
    np.testing.assert_allclose(moments[:, 1], [[2.0, 0.0], [2.0, 0.0]])
    np.testing.assert_allclose(moments[:, 2], [[3.0, 0.0], [3.0, 0.0]])
    # Deposits of 0.01 x E GeV: all above 3e-4 GeV, two hits per event.
    np.testing.assert_allclose(stats.values["hits"], [2.0, 2.0])
    assert stats.values["spectrum"].sum() == pytest.approx(2.0)
    (bins,) = np.nonzero(stats.values["spectrum"])
    assert SPECTRUM_EDGES[bins.min()] <= np.log10(0.1) and SPECTRUM_EDGES[bins.max() + 1] > -0.3


def test_identical_showers_score_zero() -> None:
    ecal = _showers((1, 3), 0.02, ENERGY)
    reference = shower_stats(ecal, ENERGY, EDGES)
    assert validation_score(reference, shower_stats(ecal.copy(), ENERGY, EDGES)) == {
        "score": 0.0,
        "sampling_fraction": 0.0,
        "profiles": 0.0,
        "moments": 0.0,
    }


def test_score_counts_each_deviation_once() -> None:
    reference = _stats((1, 3), 0.02)
    # 10% more energy, same shape: only the sampling-fraction term moves.
    brighter = validation_score(reference, _stats((1, 3), 0.022))
    assert brighter["sampling_fraction"] == pytest.approx(0.1)
    assert brighter["profiles"] == pytest.approx(0.0) and brighter["moments"] == pytest.approx(0.0)
    assert brighter["score"] == pytest.approx(0.1)
    # Shifted by one cell in x, same energy: x profile disjoint (distance 1, axes mean 1/3);
    # x mean 2 -> 3 (error 0.5), x spread, y mean and z mean unchanged; zero spreads skipped.
    shifted = validation_score(reference, _stats((2, 4), 0.02))
    assert shifted["sampling_fraction"] == pytest.approx(0.0)
    assert shifted["profiles"] == pytest.approx(1.0 / 3.0)
    assert shifted["moments"] == pytest.approx(0.5 / 4.0)
    assert shifted["score"] == pytest.approx(1.0 / 3.0 + 0.125)


def test_energy_edges_are_equal_count() -> None:
    energy = np.arange(1.0, 101.0)
    edges = equal_count_edges(energy, 4)
    counts = np.histogram(energy, edges)[0]
    assert edges[0] == 1.0 and edges[-1] == 100.0 and counts.tolist() == [25, 25, 25, 25]
    assert equal_count_edges(np.full(5, 7.0), 3).tolist() == [6.5, 7.5]


def test_validate_cli_writes_score_and_figure(tmp_path: Path) -> None:
    data = write_showers(tmp_path / "data.h5", 48)
    model = save_tiny_generator(tmp_path / "g.h5", seed=1)
    other = save_tiny_generator(tmp_path / "h.h5", seed=2)
    out = tmp_path / "val"
    result = evogan(
        "validate",
        str(model),
        str(data),
        "--out",
        str(out),
        "--events",
        "40",
        "--bins",
        "3",
        "--ensemble",
        str(other),
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "score.json").read_text())
    assert report["events"] == 40 and report["spec"] == "gan3d-tiny-51x51x25"
    parts = report["sampling_fraction"] + report["profiles"] + report["moments"]
    assert report["score"] == pytest.approx(parts) and report["score"] > 0
    ensemble = report["ensemble"]
    assert ensemble["members"] == 2
    assert ensemble["member_scores"][0]["score"] == pytest.approx(report["score"])
    assert (out / "validation.png").stat().st_size > 10_000
    assert "score" in result.stdout


def test_validate_rejects_data_of_another_window(tmp_path: Path, capsys) -> None:
    from evogan.data.writer import ShowerWriter

    model = save_tiny_generator(tmp_path / "g.h5", seed=1)
    with ShowerWriter(tmp_path / "small.h5", (25, 25, 25)) as writer:
        writer.append(np.zeros((2, 25, 25, 25)), np.array([10.0, 20.0]))
    code = main(["validate", str(model), str(tmp_path / "small.h5"), "--out", str(tmp_path / "v")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "data cells (25, 25, 25) must match the generator's output_shape (51, 51, 25)" in err
    assert not (tmp_path / "v").exists()
    assert main(["validate", str(tmp_path / "missing"), str(tmp_path / "small.h5")]) == 2
    assert "does not exist" in capsys.readouterr().err
