"""The whole 3DGAN job on a cylindrical detector (CaloChallenge dataset 2, the tiny cc2 spec)
under real mpirun: a 2-rank training that validates as it trains, showers generated from its
best model in the CaloChallenge format, those showers validated against a synthetic reference
with the challenge's metric set and figures (a cylinder's radial and angular profiles where a
Cartesian grid's x and y profiles go), and a training stopped by SIGTERM that resumes to the
weights of the uninterrupted one. The commands after the training run in this process."""

from __future__ import annotations

import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest
from matplotlib.image import imread

from evogan.cli import main
from evogan.data.reader import ShowerDataset, open_files
from evogan.data.synthetic.showers import synthesize
from evogan.detectors import detector_for
from evogan.gan3d.model.generate import event_conditions, generate_events
from evogan.gan3d.model.model_file import load_generator
from evogan.physics.ensemble import observables
from evogan.physics.features import VOXEL_HIT_THRESHOLD, shower_features
from evogan.physics.profiles import layer_profiles
from evogan.physics.score import equal_count_edges
from evogan.plots.gan import profiles_figure
from evogan.store import load_weights, read_metrics

from .conftest import mpirun
from .gan_fixtures import assert_same_weights, one_thread

CONFIG = "configs/gan3d_cc2_tiny.yaml"
SCRIPT = "tests/mpi_scripts/train_gan.py"
SIZE = ["--set", "trainer.steps_per_epoch=3", "--set", "trainer.epochs=2"]
VALIDATION = ["--set", "trainer.validation_events=24", "--set", "trainer.validation_bins=2"]
VALIDATION += ["--set", "trainer.standing_batches=2", "--set", "trainer.validate_every=1"]
SHAPE = (9, 16, 45)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``evogan train`` of the tiny cc2 spec on 2 ranks, validated at every epoch end (steps 3
    and 6); the uninterrupted run a stopped one must resume to. (A validation timer shorter
    than a step: tests/test_gan_stop.py.)"""
    run = tmp_path_factory.mktemp("cc2") / "run"
    args = ["-m", "evogan", "train", CONFIG, "--run-dir", str(run), *SIZE, *VALIDATION]
    done = mpirun(2, args)
    assert done.returncode == 0, done.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def generated(trained: Path) -> Path:
    """``evogan generate`` of the best model, on one thread as a launched command runs."""
    out = trained.parent / "generated.h5"
    args = ["--events", "40", "--log-uniform", "--seed", "3", "--batch-size", "16"]
    with one_thread():
        assert main(["generate", str(trained), *args, "--out", str(out)]) == 0
    return out


@pytest.mark.mpi
@pytest.mark.slow
def test_a_two_rank_training_on_a_cylinder_validates_and_keeps_the_best(trained: Path) -> None:
    manifest = json.loads((trained / "manifest.json").read_text())
    assert manifest["world_size"] == 2 and manifest["mode"] == "sync"
    assert [r["epoch"] for r in read_metrics(trained / "metrics.jsonl", "epoch")] == [1, 2]
    scores = read_metrics(trained / "metrics.jsonl", "validation")
    assert [r["step"] for r in scores] == [3, 6]
    assert all(math.isfinite(r["score"]) and r["floor"] < r["score"] for r in scores)
    assert all(r["targets"]["cells"] == 4 * 2 for r in scores)  # four targets per energy bin
    best, meta = load_weights(trained / "best_model.h5")
    lowest = min(scores, key=lambda r: r["score"])
    assert (meta["step"], meta["score"]) == (lowest["step"], lowest["score"])
    spec, generator, _ = load_generator(trained / "best_model.h5")
    assert spec.detector == "calochallenge-2" and spec.output_shape == SHAPE
    assert spec.circular_axis == 1  # the angular axis, padded circularly by default
    assert all(best[k].equal(v) for k, v in generator.state_dict().items())
    low, high = meta["trained_on"]["energy_gev"]
    assert 1.0 <= low < 10.0 and 500.0 < high <= 1000.0  # log-uniform over 1 GeV to 1 TeV
    curve = imread(trained / "learning_curve.png")
    assert curve.shape[1] > 800 and curve[..., :3].std() > 0.05


@pytest.mark.mpi
@pytest.mark.slow
def test_generate_writes_the_calochallenge_format_with_the_detector(
    trained: Path, generated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with h5py.File(generated, "r") as handle:
        assert sorted(handle) == ["event", "incident_energies", "showers"]
        np.testing.assert_array_equal(handle["event"][:], np.arange(40))
        low, high = handle.attrs["energy_range"]
        assert handle["showers"].shape == (40, 9 * 16 * 45)
        assert handle["incident_energies"].shape == (40, 1)
        assert handle.attrs["detector"] == "calochallenge-2"
        assert handle.attrs["energy_draw"] == "log-uniform"
        stored = handle["showers"][:]
    assert stored.max() > 1.0  # MeV, the format's unit
    dataset = ShowerDataset.from_files(open_files(generated))
    assert dataset.detector is detector_for("calochallenge-2")
    chunk = dataset.read()
    assert chunk.ecal.shape == (40, *SHAPE)
    assert np.median(chunk.energy) < 100.0  # log-uniform over 1-1000 GeV: the median near 32
    spec, generator, _ = load_generator(trained / "best_model.h5")
    again = []
    with one_thread():  # events 0-39 of seed 3 in the grid batches of 16 the command ran
        for start in (0, 16, 32):
            numbers = np.arange(start, start + 16)
            energy, _ = event_conditions(3, numbers, (low, high), None, log_uniform=True)
            made = generate_events(spec, generator, energy, None, 3, numbers)
            again.append(made[: 40 - start])
    again = np.concatenate(again)
    again[again < 1e-6] = 0.0  # the reader's cell threshold
    np.testing.assert_allclose(chunk.ecal, again, rtol=1e-6, atol=1e-9)  # GeV -> MeV -> GeV
    capsys.readouterr()
    assert main(["data", "inspect", str(generated), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["detector"], report["layout"], report["events"]) == (
        "calochallenge-2",
        "calochallenge",
        40,
    )
    assert report["shape"] == list(SHAPE) and report["made_by"]["spec"] == "gan3d-cc2-tiny"


@pytest.mark.mpi
@pytest.mark.slow
def test_validate_scores_generated_showers_against_a_synthetic_reference(
    generated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = generated.parent
    reference = root / "reference.h5"
    synth = ["--events", "120", "--energy-range", "1", "1000", "--log-uniform", "--seed", "5"]
    synth += ["--detector", "calochallenge-2"]
    assert main(["data", "synth", "--out", str(reference), *synth]) == 0
    out = root / "validation"
    capsys.readouterr()
    validate = [str(generated), str(reference), "--json", "--bins", "2", "--out", str(out)]
    assert main(["validate", *validate]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["events"] == 40 and report["metrics"]["bad_fraction"]["value"] == 0
    floor = report["floor"]
    assert report["score"] > floor["score"] + 3 * floor["spread"]  # six steps learn little
    challenge = report["calochallenge"]  # automatic on a cylinder
    assert challenge["detector"] == "calochallenge-2"
    assert challenge["events"] == {"generated": 40, "reference": 120}
    assert challenge["metrics"]["AUC_low"]["value"] > challenge["metrics"]["AUC_low"]["floor"]
    for png in ("features.png", "profiles.png", "calochallenge.png"):
        image = imread(out / png)
        assert image.shape[1] > 1200 and image[..., :3].std() > 0.05, png


@pytest.mark.mpi
@pytest.mark.slow
def test_a_stopped_run_resumes_to_the_weights_of_an_uninterrupted_one(
    trained: Path, tmp_path: Path
) -> None:
    """Validated at every epoch end (steps 3 and 6): the resumed run scores the same
    generators as the uninterrupted one and ends with its weights, best_model.h5 included."""
    straight, run = trained, tmp_path / "run"
    stop = ["--signal-rank", "1", "--signal-step", "4"]
    stopped = mpirun(2, [SCRIPT, CONFIG, "--run-dir", str(run), *SIZE, *VALIDATION, *stop])
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    assert f"mpirun -n 2 --oversubscribe evogan train --resume {run}" in stopped.stderr
    marker = json.loads((run / "checkpoint.json").read_text())
    assert (marker["epoch"], marker["step"]) == (1, 1)
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    done = mpirun(2, ["-m", "evogan", "train", "--resume", str(run)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert_same_weights(run, straight)
    scores = [
        [
            (r["step"], r["score"], r["best"])
            for r in read_metrics(path / "metrics.jsonl", "validation")
        ]
        for path in (run, straight)
    ]
    assert scores[0] == scores[1] and [s[0] for s in scores[0]] == [3, 6]


def test_the_profiles_figure_of_a_cylinder_shows_a_seam_in_angle() -> None:
    """A set with twice the energy in the angular bin next to alpha = -pi (the seam a
    zero-padded convolution sees) stands out of the angular profile, which the reference
    spreads evenly; the radial profile is in mm of the detector, hits at its voxel threshold."""
    detector = detector_for("calochallenge-2")
    ((showers, energy, _),) = synthesize(60, (1.0, 1000.0), 2, detector=detector, log_uniform=True)
    seamed = showers.copy()
    seamed[:, :, 0] *= 2.0
    flat = detector.geometry.to_flat
    sums = [layer_profiles(flat(s), detector) for s in (showers, seamed)]
    assert np.allclose(sums[0]["angular_mean"].sum(), sums[0]["layer_mean"].sum())
    assert sums[0]["alpha_edges_deg"][[0, -1]].tolist() == [-180.0, 180.0]
    assert "angular_mean" not in layer_profiles(np.zeros((2, 51 * 51 * 25)), detector_for())
    edges = equal_count_edges(energy, 2)
    tables = [shower_features(s, energy, detector=detector) for s in (showers, seamed)]
    figure = profiles_figure(
        *(observables(t, edges) for t in tables),
        energy_edges=edges,
        headline="test",
        transverse={"reference": sums[0], "generated": sums[1], "label": "seamed"},
        hit_threshold=VOXEL_HIT_THRESHOLD,
    )
    radial, angular, layers = figure.axes[:3]
    assert radial.get_xlabel() == "radius r (mm), all layers"
    assert angular.get_xlabel() == "angle alpha (deg), all layers"
    assert radial.get_visible() and angular.get_visible() and layers.get_legend() is not None
    assert figure.axes[7].get_ylabel() == "cells > 1e-6 GeV"
    even, seam = (bars.lines[0].get_ydata() for bars in angular.containers)
    assert np.ptp(even) < 0.2 / 16 and seam[0] > 1.5 * np.median(seam)
    rings = radial.containers[0].lines[0].get_xdata()
    assert np.allclose(rings, (np.arange(9) + 0.5) * 4.65)  # the detector's rings, in mm
