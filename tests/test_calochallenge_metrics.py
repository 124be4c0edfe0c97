"""The CaloChallenge metric set (:mod:`evogan.physics.calochallenge`): high-level features
against a hand computation in both geometries, the metrics on samples of one distribution and
of two, the JSON names, the table of ``validate --format calochallenge``, the figures, and the
``evogan validate`` path on CLIC ECAL files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from evogan.cli import main
from evogan.commands.validate_report import calochallenge_table
from evogan.detectors import CartesianGrid, CylindricalBinning, Detector, LayerBins, detector_for
from evogan.detectors.shipped import CLIC_MATERIALS, _par04_materials
from evogan.physics.calochallenge import (
    METRICS,
    calochallenge_metrics,
    feature_family,
    figure_data,
    high_level_features,
)
from evogan.physics.classifier import NetworkSetup, isotonic_calibration
from evogan.physics.profiles import layer_profiles
from evogan.plots.calochallenge import plot_calochallenge, plot_detector_profiles

SMALL = NetworkSetup(hidden=(32, 32), max_epochs=30, patience=3, batch_size=200)
EVENTS = 500  # per side: the test part holds 100 of each


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: the tiny networks train faster than with two on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _cylinder() -> Detector:
    binning = CylindricalBinning((LayerBins((0.0, 2.0, 6.0), 4), LayerBins((0.0, 10.0), 1)))
    return Detector("tiny-cylinder", binning, _par04_materials(2), "MeV")


def _showers(detector: Detector, n: int, rng, width: float = 1.0) -> tuple:
    """Smooth showers with gamma fluctuations: a depth profile times exp(-r / (10 mm x width))."""
    vmap = detector.geometry.voxel_map
    energy = 10 ** rng.uniform(0, 2, n)
    depth = np.exp(-0.5 * ((vmap.layer - detector.layers * 0.3) / (detector.layers * 0.25)) ** 2)
    shape = depth * np.exp(-vmap.r_mm / (10.0 * width))
    shape /= shape.sum()
    return rng.gamma(4.0, 0.25, (n, detector.voxels)) * shape * energy[:, None] * 0.03, energy


def test_features_match_a_hand_computation_on_a_cylinder() -> None:
    detector = _cylinder()
    shower = np.zeros((1, detector.voxels))
    # layer 0: radial fastest, then angle; bins centred at alpha = -3pi/4, -pi/4, pi/4, 3pi/4
    shower[0, 0] = 2.0  # r = 1, alpha = -3pi/4
    shower[0, 1 + 2 * 2] = 6.0  # r = 4, alpha = pi/4 (third angular bin, outer ring)
    shower[0, 8] = 1.0  # layer 1: one voxel, no angular binning
    f = high_level_features(shower, np.array([100.0]), detector)
    xs = np.array([np.cos(-3 * np.pi / 4), 4 * np.cos(np.pi / 4)])
    weights = np.array([2.0, 6.0])
    centre = (weights * xs).sum() / 8.0
    width = np.sqrt((weights * xs**2).sum() / 8.0 - centre**2)
    assert f["Etot_Einc"][0] == pytest.approx(9.0 / 100.0)
    assert f["E_layer_0"][0] == 8.0 and f["E_layer_1"][0] == 1.0
    assert f["EC_x_0"][0] == pytest.approx(centre) and f["EC_y_0"][0] == pytest.approx(centre)
    assert f["width_x_0"][0] == pytest.approx(width)
    assert "EC_x_1" not in f  # a layer with one angular bin has no centre (the challenge's rule)


def test_features_match_a_hand_computation_on_a_grid() -> None:
    detector = Detector("grid", CartesianGrid(3, 3, 25, 5.0), CLIC_MATERIALS, "GeV")
    grid = np.zeros((2, 3, 3, 25))
    grid[0, 2, 1, 0] = 3.0  # x = +5 mm, y = 0
    grid[0, 0, 1, 0] = 1.0  # x = -5 mm
    f = high_level_features(detector.geometry.to_flat(grid), np.array([10.0, 10.0]), detector)
    assert f["EC_x_0"][0] == pytest.approx((3 * 5 - 5) / 4.0)
    assert f["width_x_0"][0] == pytest.approx(np.sqrt((3 * 25 + 25) / 4.0 - 2.5**2))
    assert f["EC_y_0"][0] == 0.0 and f["EC_x_1"][0] == 0.0  # an empty layer gives 0
    assert f["Etot_Einc"][1] == 0.0
    assert feature_family("width_x_12") == "width_x" and feature_family("Etot_Einc") == "Etot_Einc"


def test_isotonic_calibration_is_monotone_and_fits_frequencies() -> None:
    prob = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])
    label = np.array([0, 1, 0, 0, 1, 1, 0, 1])
    mapped = isotonic_calibration(prob, label)(np.linspace(0, 1, 50))
    assert np.all(np.diff(mapped) >= 0) and mapped.min() >= 1e-6 and mapped.max() <= 1 - 1e-6
    assert isotonic_calibration(prob, label)(np.array([0.1]))[0] == pytest.approx(1e-6)


@pytest.fixture(scope="module")
def compared() -> dict:
    detector = detector_for("calochallenge-1-photons")
    rng = np.random.default_rng(3)
    ref = _showers(detector, EVENTS, rng)
    same = _showers(detector, EVENTS, rng)
    wide = _showers(detector, EVENTS, rng, width=1.6)
    run = {"setup": SMALL, "seed": 0}
    return {
        "same": calochallenge_metrics(*same, *ref, detector, **run),
        "wide": calochallenge_metrics(*wide, *ref, detector, **run),
    }


@pytest.mark.slow
def test_one_distribution_scores_near_chance_and_two_near_certainty(compared: dict) -> None:
    # 100 test showers a side: the AUC's standard error at 0.5 is sqrt(201 / (12 x 100^2)) =
    # 0.041, so 0.5 +- 0.15 is more than 3.5 sigma; a 60% wider shower is seen in every one.
    same, wide = compared["same"]["metrics"], compared["wide"]["metrics"]
    for name in ("AUC_low", "AUC_high"):
        assert abs(same[name]["value"] - 0.5) < 0.15, (name, same[name])
        assert abs(same[name]["floor"] - 0.5) < 0.15, (name, same[name])
        assert wide[name]["value"] > 0.9, (name, wide[name])
        assert wide[name]["value"] > wide[name]["floor"] + 3 * wide[name]["floor_error"]
    assert wide["JSD_high"]["value"] > 0.5 > same["JSD_high"]["value"]
    for name in ("FPD", "KPD"):
        assert wide[name]["value"] > same[name]["value"] + 3 * same[name]["error"], name
    groups = (compared["same"]["separation_groups"], compared["wide"]["separation_groups"])
    assert groups[1]["width_x"]["value"] > 5 * groups[0]["width_x"]["value"]


@pytest.mark.slow
def test_json_uses_the_challenge_names_with_errors_and_floors(compared: dict) -> None:
    report = json.loads(json.dumps(compared["wide"]))
    assert set(report["metrics"]) == set(METRICS)
    for entry in (*report["metrics"].values(), *report["separation_power"].values()):
        assert set(entry) == {"value", "error", "floor", "floor_error"}
    assert {"Etot_Einc", "E_layer_1", "EC_x_1", "width_y_2", "voxel_energy"} <= set(
        report["separation_power"]
    )
    assert report["separation_groups"]["mean"]["features"] == len(report["separation_power"])
    assert report["events"] == {"generated": EVENTS, "reference": EVENTS}
    assert report["floor_events"] == EVENTS // 2


@pytest.mark.slow
def test_the_table_sets_the_set_beside_the_published_results(compared: dict) -> None:
    report = {"calochallenge": {**compared["wide"], "detector": "calochallenge-2"}}
    table = calochallenge_table(report, "wide.h5")
    lines = table.splitlines()
    header = next(line for line in lines if "AUC low" in line)
    for heading in ("AUC high", "JSD low", "JSD high", "FPD x10^3", "KPD x10^3"):
        assert heading in header
    row = next(line for line in lines if line.startswith("wide.h5"))
    fpd = compared["wide"]["metrics"]["FPD"]["value"] * 1e3
    assert f"{fpd:.3g} ±" in row and "±" in next(
        line for line in lines if line.startswith("floor ")
    )
    assert any(line.startswith("CaloDREAM") and "24.6" in line for line in lines)
    assert any(line.startswith("width_x") for line in lines)
    photons = {"calochallenge": compared["wide"]}  # no published rows for dataset 1 here
    assert "published" not in calochallenge_table(photons, "wide.h5")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["calochallenge-2", "clic-ecal-25"])
def test_figures_are_written_for_both_geometries(name: str, tmp_path: Path) -> None:
    detector = detector_for(name)
    rng = np.random.default_rng(0)
    ref, gen = _showers(detector, 60, rng), _showers(detector, 60, rng, width=1.2)
    written = plot_calochallenge(
        figure_data(*ref, detector), figure_data(*gen, detector), tmp_path / "cc.png", title=name
    )
    profiles = plot_detector_profiles(
        layer_profiles(ref[0], detector), tmp_path / "profiles.png", title=name
    )
    for path in (written, profiles):
        assert path.is_file() and path.stat().st_size > 20_000, path


@pytest.mark.slow
def test_validate_reports_the_set_on_clic_files(tmp_path: Path, capsys) -> None:
    from evogan.data.synthetic import write_synthetic

    ref = write_synthetic(tmp_path / "ref.h5", 60, (10.0, 100.0), seed=1)
    gen = write_synthetic(tmp_path / "gen.h5", 60, (10.0, 100.0), seed=2)
    out = tmp_path / "out"
    args = ["validate", str(gen), str(ref), "--bins", "2", "--out", str(out)]
    assert main([*args, "--format", "calochallenge"]) == 0
    shown = capsys.readouterr().out
    assert "CaloChallenge metric set, detector clic-ecal: 60 generated" in shown
    assert "AUC low" in shown and "separation power" in shown
    report = json.loads((out / "score.json").read_text())
    assert set(report["calochallenge"]["metrics"]) == set(METRICS)
    assert (out / "calochallenge.png").stat().st_size > 20_000
    assert main([*args, "--format", "calochallenge", "--json"]) != 0
    assert "--json and --format calochallenge" in capsys.readouterr().err


@pytest.mark.slow
def test_validate_a_generator_with_the_set_scores_the_showers_it_generated(
    tmp_path: Path, capsys
) -> None:
    from evogan.data.synthetic import write_synthetic
    from tests.gan_fixtures import save_tiny_generator

    ref = write_synthetic(tmp_path / "ref.h5", 40, (40.0, 60.0), seed=1)
    trained_on = {"energy_gev": [40.0, 60.0], "theta_deg": [90.0, 90.0]}
    generator = save_tiny_generator(tmp_path / "g.h5", seed=1, trained_on=trained_on)
    out = tmp_path / "out"
    args = ["validate", str(generator), str(ref), "--bins", "2", "--out", str(out)]
    assert main([*args, "--calochallenge", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["calochallenge"]["events"] == {"generated": 40, "reference": 40}
    assert (out / "calochallenge.png").stat().st_size > 20_000


def test_without_classifiers_the_set_is_the_distances_and_separations() -> None:
    detector = _cylinder()
    rng = np.random.default_rng(5)
    ref, gen = _showers(detector, 80, rng), _showers(detector, 80, rng)
    gen[0][0, 0] = np.nan  # counted as 0, not carried into every metric
    report = calochallenge_metrics(*gen, *ref, detector, classifiers=False)
    assert set(report["metrics"]) == {"FPD", "KPD"}
    assert all(np.isfinite(v["value"]) for v in report["metrics"].values())
