"""2D projections, cell scaling, energy targets and the regressor's streamed arrays."""

from __future__ import annotations

import numpy as np
import pytest

from evogan.config.data import DataConfig
from evogan.data.reader import ShowerDataset, open_dataset, open_files
from evogan.data.transforms import (
    LOG_UNIT_GEV,
    energy_targets,
    load_regressor_data,
    project_2d,
    regressor_arrays,
    scale_cells,
)
from evogan.errors import DataError
from tests.data_fixtures import energies, expected_cells, write_layout


def test_project_2d_sums_one_transverse_axis_and_keeps_depth():
    ecal = np.zeros((2, 4, 3, 5), dtype=np.float32)
    ecal[0, 1, 2, 4] = 1.5
    ecal[0, 1, 0, 4] = 0.5
    ecal[1, 3, 1, 0] = 2.0
    over_y = project_2d(ecal, "y")
    over_x = project_2d(ecal, "x")
    assert over_y.shape == (2, 4, 5) and over_x.shape == (2, 3, 5)
    assert over_y[0, 1, 4] == 2.0 and over_y[1, 3, 0] == 2.0
    assert over_x[0, 2, 4] == 1.5 and over_x[0, 0, 4] == 0.5
    np.testing.assert_allclose(over_y.sum(axis=(1, 2)), ecal.sum(axis=(1, 2, 3)))
    with pytest.raises(DataError, match="must be one of x, y, alpha, got 'z'"):
        project_2d(ecal, "z")


def test_scale_cells_modes_keep_zero_at_zero():
    x = np.array([0.0, 1e-3, 0.5, 4.0], dtype=np.float32)
    assert scale_cells(x, "none") is x
    log = scale_cells(x, "log")
    np.testing.assert_allclose(log, np.log1p(x / LOG_UNIT_GEV), rtol=1e-6)
    assert log[0] == 0 and log[1] == pytest.approx(np.log(2.0))
    assert np.all(np.diff(log) > 0)
    power = scale_cells(x, "power", 0.85)
    np.testing.assert_allclose(power, x**0.85, rtol=1e-6)
    assert log.dtype == power.dtype == np.float32
    with pytest.raises(DataError, match="none, log, power"):
        scale_cells(x, "sqrt")


def test_energy_targets():
    np.testing.assert_allclose(energy_targets(np.array([2.0, 500.0])), [0.02, 5.0])
    assert energy_targets(np.array([50.0]), scale=50.0).dtype == np.float32


@pytest.mark.parametrize("axis", ["x", "y"])
def test_regressor_arrays_match_projections_of_the_full_read(tmp_path, axis):
    write_layout(tmp_path / "a.h5", "processed51", 7, first=0)
    write_layout(tmp_path / "b.h5", "processed51", 4, first=7)
    cfg = DataConfig(
        files=[str(tmp_path / "*.h5")], projection_axis=axis, cell_scale="power", chunk_events=3
    )
    data = ShowerDataset.from_files(open_files(cfg.files))
    arrays = regressor_arrays(cfg, data)
    cells = np.concatenate([expected_cells("processed51", 7), expected_cells("processed51", 4, 7)])
    summed = cells.sum(axis=2 if axis == "y" else 1)
    assert arrays.x.shape == (11, 1, 51, 25) and arrays.x.dtype == np.float32
    np.testing.assert_allclose(arrays.x[:, 0], summed**0.85, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(arrays.energy, energies(11))
    np.testing.assert_allclose(arrays.y, energies(11) / 100.0, rtol=1e-6)


def test_load_regressor_data_shards_training_events(tmp_path):
    write_layout(tmp_path / "EleEscan_1.h5", "fixed25", 10)
    cfg = DataConfig(files=[str(tmp_path / "EleEscan_1.h5")], test_fraction=0.3)
    quiet = dict(announce=lambda _: None)
    parts = [load_regressor_data(cfg, rank=r, size=3, **quiet) for r in range(3)]
    train_energy = np.concatenate([train.energy for train, _ in parts])
    np.testing.assert_array_equal(train_energy, energies(7))
    for _, test in parts:
        np.testing.assert_array_equal(test.energy, energies(3, 7))
        assert test.x.shape == (3, 1, 25, 25)
    full_train, _ = open_dataset(cfg, **quiet)
    assert len(full_train) == 7
    with pytest.raises(DataError, match="rank 7 of 8 gets no training events"):
        load_regressor_data(cfg, rank=7, size=8, **quiet)  # 7 events: ranks 0-6 get one each
