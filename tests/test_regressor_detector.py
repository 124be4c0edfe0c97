"""The regressor on any detector with a grid: the 2D image follows the detector (``y`` of a
Cartesian grid, the angular bins of a cylindrical one), impossible projections and networks are
refused in one line before any run directory, and the GA, its islands and RMSprop run end to
end on synthetic CaloChallenge dataset-2 showers, naming the detector in their figures."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import yaml

from evogan.config import load_config
from evogan.config.base import validate
from evogan.config.data import DataConfig
from evogan.config.regressor import RegressorConfig
from evogan.data import projections
from evogan.data.reader import ShowerDataset, open_files
from evogan.data.transforms import load_regressor_data, project_2d, regressor_arrays
from evogan.detectors import detector_for, image_shape, projection_axis
from evogan.detectors.geometry import CylindricalBinning, LayerBins
from evogan.errors import EXIT_USER_ERROR, ConfigError
from evogan.plots.compare import RunRecord, images_caption
from evogan.regressor.data import mape
from evogan.regressor.network import load_regressor
from evogan.store import read_metrics
from tests.conftest import evogan_here, mpirun, write_config
from tests.data_fixtures import write_layout

DS2 = detector_for("calochallenge-2")
DS2_IMAGE = "calochallenge-2 (cylindrical, 9x16x45), summed over alpha"
TINY_DS2 = {
    "task": "regressor",
    "seed": 2,
    "data": {
        "detector": "calochallenge-2",
        "synthetic": {"events": 300, "energy_range": [1.0, 1000.0], "log_uniform": True},
        "train_events": 240,
        "test_events": 60,
    },
    "model": {"readout": "least_squares", "readout_events": 128},
    "ga": {"batch_size": 32, "epochs": 2, "rate_schedule": "constant"},
    "train": {"batch_size": 32, "epochs": 2},
    "run": {"progress_every": 1000},
    "migration": {"every": 2, "mode": "sync"},
}


def _regressor(**data) -> RegressorConfig:
    return validate(RegressorConfig, {"task": "regressor", "data": data})


def test_alpha_image_is_the_sum_over_the_angular_bins_of_the_file_order(tmp_path) -> None:
    """A dataset-2 file (MeV, voxels radial fastest, then angular, then layer) gives images of
    radial bins x layers: each the file's voxels of that radius and layer summed over angle."""
    rng = np.random.default_rng(5)
    events, radial, angular, layers = 6, 9, 16, 45
    flat = rng.uniform(1.0, 50.0, (events, DS2.voxels)) * (rng.random((events, DS2.voxels)) < 0.4)
    flat = flat.astype(np.float32)
    energy = rng.uniform(1_000.0, 100_000.0, (events, 1)).astype(np.float32)
    with h5py.File(tmp_path / "ds2.h5", "w") as f:
        f["incident_energies"] = energy
        f["showers"] = flat
    expected = np.zeros((events, radial, layers))
    for voxel in range(DS2.voxels):
        layer, rest = divmod(voxel, angular * radial)
        expected[:, rest % radial, layer] += flat[:, voxel] / 1000.0  # MeV -> GeV
    cfg = DataConfig(detector="calochallenge-2", files=[str(tmp_path / "ds2.h5")])
    dataset = ShowerDataset.from_files(open_files(cfg.files, detector=cfg.detector))
    arrays = regressor_arrays(cfg, dataset, announce=pytest.fail)
    assert arrays.x.shape == (events, 1, radial, layers)
    np.testing.assert_allclose(arrays.x[:, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(arrays.energy, energy[:, 0] / 1000.0, rtol=1e-6)
    assert (arrays.detector, arrays.axis) == (DS2.describe(), "alpha")


def test_project_2d_sums_a_hand_built_cylindrical_grid_over_alpha() -> None:
    """3 radial x 4 angular bins x 2 layers: the grid of flat rows in file order, summed."""
    binning = CylindricalBinning((LayerBins((0.0, 1.0, 2.0, 3.0), 4),) * 2)
    flat = np.arange(2 * binning.voxels, dtype=np.float32).reshape(2, -1)
    image = project_2d(binning.to_grid(flat), "alpha")
    radial_then_angle = flat.reshape(2, 2, 4, 3)  # (event, layer, angle, radius)
    np.testing.assert_array_equal(image, radial_then_angle.sum(axis=2).transpose(0, 2, 1))
    assert image[0, 1, 0] == 1 + 4 + 7 + 10  # radius 1 of layer 0 at every angle


@pytest.mark.parametrize(
    ("name", "asked", "axis", "shape"),
    [
        ("clic-ecal", "auto", "y", (51, 25)),
        ("clic-ecal", "x", "x", (51, 25)),
        ("clic-ecal-25", "auto", "y", (25, 25)),
        ("calochallenge-2", "auto", "alpha", (9, 45)),
        ("calochallenge-2", "alpha", "alpha", (9, 45)),
        ("calochallenge-3", "auto", "alpha", (18, 45)),
    ],
)
def test_auto_resolves_to_y_on_a_cartesian_grid_and_alpha_on_a_cylinder(
    name, asked, axis, shape
) -> None:
    detector = detector_for(name)
    assert projection_axis(detector, asked) == axis
    assert image_shape(detector, asked) == shape


def test_auto_on_a_cartesian_grid_keeps_the_cache_key_of_y(tmp_path, monkeypatch) -> None:
    """Caches made before ``auto`` existed (keyed ``y``) serve a run of the default config."""
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path / "cache"))
    write_layout(tmp_path / "a.h5", "processed51", 5)
    cfg = DataConfig(files=[str(tmp_path / "a.h5")])
    assert cfg.projection_axis == "auto"
    dataset = ShowerDataset.from_files(open_files(cfg.files))
    arrays = regressor_arrays(cfg, dataset, announce=pytest.fail)
    assert arrays.axis == "y"
    cached = list((tmp_path / "cache" / "projections").iterdir())
    assert cached == [projections.projection_path(dataset, "y")]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"detector": "calochallenge-2", "projection_axis": "x"},
            "data.projection_axis = x does not fit detector calochallenge-2 (cylindrical, "
            "9x16x45), whose grid axes are (radial, alpha, layer); use alpha, or auto (alpha)",
        ),
        (
            {"detector": "calochallenge-3", "projection_axis": "y"},
            "data.projection_axis = y does not fit detector calochallenge-3 (cylindrical, "
            "18x50x45), whose grid axes are (radial, alpha, layer); use alpha, or auto (alpha)",
        ),
        (
            {"projection_axis": "alpha"},
            "data.projection_axis = alpha does not fit detector clic-ecal (cartesian, 51x51x25), "
            "whose grid axes are (x, y, layer); use x or y, or auto (y)",
        ),
        (
            {"detector": "calochallenge-1-photons"},
            "data.projection_axis = auto: the regressor needs showers on a regular 3D grid, but "
            "detector calochallenge-1-photons (cylindrical, 368 voxels (irregular)) bins its "
            "layers differently, so it has no grid axis to sum over; use a detector with one "
            "(clic-ecal, clic-ecal-25, calochallenge-2, calochallenge-3, or a binning XML "
            "whose layers are all binned alike)",
        ),
        (
            {"detector": "calochallenge-1-pions", "projection_axis": "x", "files": ["a.h5"]},
            "data.projection_axis = x: the regressor needs showers on a regular 3D grid, but "
            "detector calochallenge-1-pions (cylindrical, 533 voxels (irregular))",
        ),
    ],
)
def test_a_projection_the_detector_lacks_is_refused_at_load(data, message) -> None:
    with pytest.raises(ConfigError) as error:
        _regressor(**data)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"kernel": 11},
            "model.kernel must not exceed the input size 9x45 (calochallenge-2 (cylindrical, "
            "9x16x45) summed over alpha), got 11; use model.kernel: 9 or less",
        ),
        (
            {"kernel": 5, "pool": 6},
            "model.pool must not exceed the convolution output 5x41 (input 9x45 "
            "(calochallenge-2 (cylindrical, 9x16x45) summed over alpha), kernel 5), got 6; "
            "use model.pool: 5 or less, or a smaller model.kernel",
        ),
    ],
)
def test_a_network_larger_than_the_image_is_refused_at_load(model, message) -> None:
    raw = {"task": "regressor", "data": {"detector": "calochallenge-2"}, "model": model}
    with pytest.raises(ConfigError) as error:
        validate(RegressorConfig, raw)
    assert str(error.value) == message
    fits = {**raw, "model": {"kernel": 9, "pool": 1}}
    assert validate(RegressorConfig, fits).model.kernel == 9


def test_a_gan_config_keeps_its_data_section_whatever_the_projection() -> None:
    """Only the regressor has an image: the shared data section does not refuse."""
    data = DataConfig(detector="calochallenge-1-photons", projection_axis="x")
    assert data.projection_axis == "x"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "data.projection_axis=y",
            "evogan: error: data.projection_axis = y does not fit detector calochallenge-2",
        ),
        ("model.kernel=10", "evogan: error: model.kernel must not exceed the input size 9x45"),
    ],
)
def test_the_cli_refuses_in_one_line_and_leaves_no_run(
    tmp_path, monkeypatch, override, message
) -> None:
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path / "cache"))
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY_DS2))
    for command in ("evolve", "train"):
        target = tmp_path / f"{command}-run"
        done = evogan_here(command, str(config), "--set", override, "--run-dir", str(target))
        assert done.returncode == EXIT_USER_ERROR
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(message), done.stderr
        assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yaml"]  # no data made either


@pytest.fixture(scope="module")
def ds2_runs(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A GA and an RMSprop run on synthetic dataset-2 showers, through the CLI."""
    config = write_config(tmp_path_factory, "ds2_runs", TINY_DS2)
    root = config.parent
    for command, name in (("evolve", "ga"), ("train", "rmsprop")):
        done = evogan_here(command, str(config), "--run-dir", str(root / name))
        assert done.returncode == 0, done.stderr
    return config, root / "ga", root / "rmsprop"


@pytest.mark.parametrize("method", ["ga", "rmsprop"])
@pytest.mark.slow
def test_ga_and_rmsprop_learn_on_dataset_2_showers(ds2_runs, method) -> None:
    config, *runs = ds2_runs
    run = dict(zip(("ga", "rmsprop"), runs, strict=True))[method]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["method"] == method
    assert (summary["detector"], summary["projection_axis"]) == (DS2.describe(), "alpha")
    assert summary["image"] == [9, 45] and summary["params"] == 8 * 25 + 8 + 8 * 2 * 20 + 1
    epochs = read_metrics(run / "metrics.jsonl", "epoch")
    assert len(epochs) == 2
    # the fitted readout starts far below the 100% of a drawn one and training keeps it there
    assert 0 < summary["test_mape"] < 0.3 and 0 < summary["best_fitness"] < 0.3
    net = load_regressor(run / "best_model.h5")
    assert net.layout.input_shape == (1, 9, 45)
    _, test = load_regressor_data(load_config(config).data, announce=lambda line: None)
    with torch.no_grad():
        prediction = net(torch.from_numpy(test.x))
    measured = float(mape(prediction, torch.from_numpy(test.y)))
    assert measured == pytest.approx(summary["test_mape"], rel=1e-4)


@pytest.mark.slow
def test_compare_names_the_detector_of_the_runs(ds2_runs, tmp_path) -> None:
    _, ga, rmsprop = ds2_runs
    records = [RunRecord.load(ga), RunRecord.load(rmsprop)]
    assert [record.image for record in records] == [DS2_IMAGE, DS2_IMAGE]
    assert images_caption(records) == DS2_IMAGE
    done = evogan_here("compare", str(ga), str(rmsprop), "--out", str(tmp_path / "figures"))
    assert done.returncode == 0, done.stderr
    assert f"Images: {DS2_IMAGE}\n" in (tmp_path / "figures" / "summary.md").read_text()
    other = RunRecord("clic", "ga", {}, [], image="clic-ecal (cartesian, 51x51x25), summed over y")
    assert images_caption([*records, other]) == (
        f"{DS2_IMAGE} (ga, rmsprop); clic-ecal (cartesian, 51x51x25), summed over y (clic)"
    )


def test_a_run_written_before_summaries_named_the_detector_is_named_from_its_config(
    ds2_runs, tmp_path
) -> None:
    _, ga, _ = ds2_runs
    old = tmp_path / "old"
    old.mkdir()
    summary = json.loads((ga / "summary.json").read_text())
    for key in ("detector", "projection_axis", "image"):
        del summary[key]
    (old / "summary.json").write_text(json.dumps(summary))
    (old / "metrics.jsonl").write_text((ga / "metrics.jsonl").read_text())
    (old / "config.yaml").write_text(yaml.safe_dump({"task": "regressor", "data": {}}))
    assert RunRecord.load(old).image == "clic-ecal (cartesian, 51x51x25), summed over y"


@pytest.mark.slow
def test_ga_islands_on_dataset_2_showers_under_mpirun(ds2_runs, tmp_path) -> None:
    """Two islands exchange migrants on the 9x45 images; a projection the detector lacks ends
    both ranks with the one line and writes nothing."""
    config, _, _ = ds2_runs
    run = tmp_path / "islands"
    done = mpirun(2, ["-m", "evogan", "evolve", str(config), "--run-dir", str(run)], timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["islands"], summary["ranks"]) == (2, 2)
    assert summary["migrations_received"] > 0 and summary["detector"] == DS2.describe()
    assert 0 < summary["test_mape"] < 0.3
    for island in (0, 1):
        records = read_metrics(run / f"islands/island-{island:04d}/metrics.jsonl", "epoch")
        assert len(records) == 2
    refused = tmp_path / "refused"
    args = ["-m", "evogan", "evolve", str(config), "--set", "data.projection_axis=x"]
    done = mpirun(2, [*args, "--run-dir", str(refused)], timeout=60)
    assert done.returncode == EXIT_USER_ERROR
    lines = [line for line in done.stderr.splitlines() if line.startswith("evogan:")]
    assert lines == [
        "evogan: error: data.projection_axis = x does not fit detector calochallenge-2 "
        "(cylindrical, 9x16x45), whose grid axes are (radial, alpha, layer); use alpha, or "
        "auto (alpha)"
    ]
    assert "Traceback" not in done.stderr and not refused.exists()
