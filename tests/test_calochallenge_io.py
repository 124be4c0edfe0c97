"""CaloChallenge files in and out: layout detection, MeV to GeV, the voxel order, round trips
in both geometries (and the CLIC ECAL unchanged), globs, shards, gzip, and each bad input as
one line with nothing half-written."""

from __future__ import annotations

import logging

import h5py
import numpy as np
import pytest

from evogan.config.base import validate
from evogan.config.data import DataConfig
from evogan.data.file_detector import cartesian_detector
from evogan.data.reader import ShowerDataset, open_dataset, open_file, open_files
from evogan.data.writer import ShowerWriter
from evogan.detectors import detector_for
from evogan.errors import ConfigError, DataError
from tests.conftest import evogan_here
from tests.data_fixtures import write_layout

DS2 = detector_for("calochallenge-2")  # 9 radial x 16 angular x 45 layers
DS1 = detector_for("calochallenge-1-photons")  # 368 voxels, irregular


def write_calochallenge(
    path, events: int = 10, voxels: int = DS2.voxels, *, first: int = 0, chunks=None, **attrs
):
    """A file as the challenge ships them: MeV, (N, 1) energies, gzip; event ``i`` has
    ``(first + i + 1) * 1000`` MeV and cell ``v`` holds ``(v % 97 + 1) * (i + 1)`` keV-ish MeV."""
    energy = ((first + np.arange(events) + 1) * 1000.0).reshape(-1, 1).astype(np.float32)
    cells = ((np.arange(voxels) % 97 + 1)[None, :] * (np.arange(events)[:, None] + 1)) * 0.01
    with h5py.File(path, "w") as f:
        f["incident_energies"] = energy
        f.create_dataset(
            "showers", data=cells.astype(np.float32), compression="gzip", chunks=chunks
        )
        f.attrs.update(attrs)
    return path


def read(path, **options):
    return ShowerDataset.from_files(open_files(path, **options))


def test_layout_detected_from_the_keys_and_detector_from_the_row_length(tmp_path):
    ds2 = read(write_calochallenge(tmp_path / "ds2.h5"))
    assert ds2.layout == "calochallenge"
    assert ds2.detector.name == "calochallenge-2"
    assert ds2.shape == (9, 16, 45)
    ds1 = read(write_calochallenge(tmp_path / "ds1.h5", voxels=368))
    assert ds1.detector.name == "calochallenge-1-photons"
    assert ds1.shape == (368,)
    assert ds1.read().ecal.shape == (10, 368)


def test_mev_to_gev(tmp_path):
    path = write_calochallenge(tmp_path / "a.h5", 4)
    chunk = read(path).read()
    assert chunk.energy.tolist() == [1.0, 2.0, 3.0, 4.0]  # 1000 MeV is exactly 1 GeV
    with h5py.File(path) as f:
        stored = f["showers"][...]
    flat = DS2.geometry.to_flat(chunk.ecal)
    np.testing.assert_array_equal(flat, stored / np.float32(1000))  # nearest float32 of x/1000


def test_voxel_order_radial_fastest_then_angular_then_layer(tmp_path):
    """Voxel (layer l, angle a, radius r) of the file lands at grid[r, a, l]."""
    flat = np.zeros((2, DS2.voxels), dtype=np.float32)
    value = {}
    for n, (layer, angle, radius) in enumerate([(0, 0, 0), (3, 5, 7), (44, 15, 8), (10, 0, 2)]):
        index = layer * 16 * 9 + angle * 9 + radius
        flat[:, index] = 1000.0 * (n + 1)
        value[(radius, angle, layer)] = float(n + 1)
    with h5py.File(tmp_path / "order.h5", "w") as f:
        f["incident_energies"] = np.full((2, 1), 50_000.0, dtype=np.float32)
        f["showers"] = flat
    grid = read(tmp_path / "order.h5").read().ecal
    assert grid.shape == (2, 9, 16, 45)
    for (r, a, layer), gev in value.items():
        assert grid[1, r, a, layer] == gev
    assert np.count_nonzero(grid[1]) == len(value)


def _showers(shape, events=7, seed=0):
    rng = np.random.default_rng(seed)
    cells = rng.exponential(0.01, (events, *shape)) * (rng.random((events, *shape)) < 0.3)
    return cells.astype(np.float32), rng.uniform(1, 100, events).astype(np.float32)


@pytest.mark.parametrize("name", ["calochallenge-2", "calochallenge-1-photons"])
def test_round_trip_cylindrical(tmp_path, name):
    detector = detector_for(name)
    shape = detector.grid_shape or (detector.voxels,)
    cells, energy = _showers(shape)
    out = tmp_path / "out.h5"
    with ShowerWriter(out, shape, detector=detector, attrs={"seed": 3}) as writer:
        writer.append(cells[:3], energy[:3])
        writer.append(cells[3:], energy[3:], np.pi / 2)
    with h5py.File(out) as f:
        assert sorted(f) == ["incident_energies", "showers"]
        assert f["incident_energies"].shape == (7, 1)
        assert f["showers"].shape == (7, detector.voxels)
        assert f["showers"].dtype == np.float32
        assert f["showers"].compression == "gzip"
        assert f.attrs["detector"] == name and f.attrs["seed"] == 3
        flat = cells if detector.grid_shape is None else detector.geometry.to_flat(cells)
        np.testing.assert_allclose(f["showers"][...], flat * 1000, rtol=1e-6)  # MeV
        np.testing.assert_allclose(f["incident_energies"][:, 0], energy * 1000, rtol=1e-6)
    back = read(out).read()
    cells[cells < 1e-6] = 0
    np.testing.assert_allclose(back.ecal, cells, rtol=2e-7, atol=0)  # x1000 then /1000
    np.testing.assert_allclose(back.energy, energy, rtol=1e-7)
    assert read(out).detector.name == name


def test_round_trip_clic_unchanged_but_the_detector_attribute(tmp_path):
    clic = detector_for("clic-ecal")
    cells, energy = _showers(clic.grid_shape, events=3)
    plain, named = tmp_path / "plain.h5", tmp_path / "named.h5"
    for path, detector in ((plain, None), (named, clic)):
        with ShowerWriter(path, clic.grid_shape, detector=detector) as writer:
            writer.append(cells, energy)
    with h5py.File(plain) as a, h5py.File(named) as b:
        assert sorted(a) == sorted(b) == ["ECAL", "energy", "sum", "theta"]
        assert "detector" not in a.attrs and b.attrs["detector"] == "clic-ecal"
        assert b.attrs["ecal_units"] == "GeV"
        for key in a:
            np.testing.assert_array_equal(a[key][...], b[key][...])
            assert a[key].chunks == b[key].chunks
    cells[cells < 1e-6] = 0
    back = read(named)
    assert back.layout == "evogan" and back.detector.name == "clic-ecal"
    np.testing.assert_array_equal(back.read().ecal, cells)


def test_globs_several_files_and_splits(tmp_path):
    for i in range(3):
        write_calochallenge(tmp_path / f"part{i}.h5", 5, first=10 * i)
    data = read(str(tmp_path / "part*.h5"))
    assert len(data) == 15 and len(data.files) == 3
    expected = [1 + 10 * i + k for i in range(3) for k in range(5)]
    assert data.energies().tolist() == expected
    cfg = DataConfig(files=[str(tmp_path / "part*.h5")], detector="calochallenge-2")
    train, test = open_dataset(cfg, announce=lambda _: None)
    assert (len(train), len(test)) == (12, 3)
    assert test.energies().tolist() == [5.0, 15.0, 25.0]
    assert train.read().ecal.shape == (12, 9, 16, 45)


def test_shards_and_unaligned_gzip_chunks(tmp_path):
    path = write_calochallenge(tmp_path / "a.h5", 11, chunks=(3, DS2.voxels))
    data = read(path)
    whole = data.read()
    parts = [data.shard(rank, 3) for rank in range(3)]
    assert sorted(len(p) for p in parts) == [3, 4, 4]
    joined = np.concatenate([p.read().energy for p in parts])
    assert sorted(joined.tolist()) == whole.energy.tolist()
    streamed = list(data.iter_chunks(4))
    assert all(len(c) % 3 == 0 for c in streamed[:-1])  # whole HDF5 chunks per slice
    np.testing.assert_array_equal(np.concatenate([c.ecal for c in streamed]), whole.ecal)


def test_cartesian_detector_of_a_generator_window():
    assert cartesian_detector((51, 51, 25)).name == "clic-ecal"
    assert cartesian_detector((25, 25, 25)).name == "clic-ecal-25"
    assert cartesian_detector((8, 8, 6)) is None


# Bad input: one line each.


def test_row_length_that_does_not_match_the_detector(tmp_path):
    path = write_calochallenge(tmp_path / "a.h5", 3)
    with pytest.raises(DataError) as info:
        open_file(path, detector="calochallenge-3")
    message = str(info.value)
    assert "6480" in message and "40500" in message and "calochallenge-3" in message
    assert "set data.detector: calochallenge-2" in message and "\n" not in message
    odd = write_calochallenge(tmp_path / "odd.h5", 3, voxels=100)
    with pytest.raises(DataError, match="rows of 100 voxels match no shipped detector"):
        open_file(odd)


def test_recorded_detector_that_differs_from_the_configured_one(tmp_path):
    path = write_calochallenge(tmp_path / "a.h5", 3, detector="calochallenge-2")
    with pytest.raises(DataError) as info:
        open_file(path, detector="calochallenge-3")
    assert str(info.value).count("calochallenge-") == 3  # both named, and the fix
    clic = write_layout(tmp_path / "clic.h5", "evogan", 3)
    with pytest.raises(DataError, match=r"data\.detector is calochallenge-2"):
        open_file(clic, detector="calochallenge-2")
    assert open_file(clic, detector="clic-ecal").detector.name == "clic-ecal"


def test_nan_in_showers_names_the_event(tmp_path):
    path = write_calochallenge(tmp_path / "a.h5", 6)
    with h5py.File(path, "r+") as f:
        f["showers"][4, 17] = np.nan
    with pytest.raises(DataError, match="showers of event 4 holds NaN or inf"):
        read(path).read()


def _records(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "evogan.data"]


def test_energies_that_look_like_the_other_unit_warn_once(tmp_path, caplog):
    gev = tmp_path / "gev.h5"
    write_calochallenge(gev, 4)
    with h5py.File(gev, "r+") as f:
        f["incident_energies"][...] = f["incident_energies"][...] / 1000  # GeV in a MeV file
    with caplog.at_level(logging.WARNING, logger="evogan.data"):
        open_file(gev)
        open_file(gev)
    said = _records(caplog)
    assert len(said) == len(set(said))  # once per file
    assert sum("energies look 1000x too small" in m and "below 100 MeV" in m for m in said) == 1
    assert any("cells look 1000x too large" in m for m in said)  # now beside 1000x less
    caplog.clear()
    clic = write_layout(tmp_path / "mev.h5", "evogan", 3)
    with h5py.File(clic, "r+") as f:
        f["energy"][...] = f["energy"][...] * 1000  # MeV in a GeV file
    with caplog.at_level(logging.WARNING, logger="evogan.data"):
        open_file(clic)
    assert any("1000x too large" in m and "above 10 TeV" in m for m in _records(caplog))


def test_cells_in_another_unit_than_the_energies_warn(tmp_path, caplog):
    path = tmp_path / "cells.h5"
    with h5py.File(path, "w") as f:
        f["incident_energies"] = np.full((4, 1), 10_000.0, dtype=np.float32)  # 10 GeV
        f["showers"] = np.full((4, 368), 0.5, dtype=np.float32)  # 0.18 GeV: 2% of 10 GeV
    with caplog.at_level(logging.WARNING, logger="evogan.data"):
        open_file(path)
    assert not _records(caplog)
    with h5py.File(path, "r+") as f:
        f["showers"][...] = 0.0005  # the same in GeV: 1000x too small
    with caplog.at_level(logging.WARNING, logger="evogan.data"):
        open_file(path)
    assert any("cells look 1000x too small" in m for m in _records(caplog))


def test_detector_config_names_and_paths():
    assert DataConfig().detector == "clic-ecal"
    assert validate(DataConfig, {"detector": "calochallenge-3"}).detector == "calochallenge-3"
    with pytest.raises(ConfigError) as info:
        validate(DataConfig, {"detector": "atlas"})
    assert "calochallenge-2" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"binning file /nowhere/b\.xml does not exist"):
        validate(DataConfig, {"detector": "/nowhere/b.xml"})


def test_writer_leaves_nothing_on_failure(tmp_path):
    out = tmp_path / "out.h5"
    cells, energy = _showers(DS2.grid_shape, events=4)
    cells[2, 0, 0, 0] = np.nan
    with (
        pytest.raises(DataError, match="finite"),
        ShowerWriter(out, DS2.grid_shape, detector=DS2) as writer,
    ):
        writer.append(cells[:2], energy[:2])
        writer.append(cells[2:], energy[2:])
    with (
        pytest.raises(DataError, match="holds no angle"),
        ShowerWriter(out, DS2.grid_shape, detector=DS2) as writer,
    ):
        writer.append(cells[:2], energy[:2], 1.0)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="have shape"):
        ShowerWriter(out, (51, 51, 25), detector=DS2)


@pytest.mark.slow
def test_cli_inspect_names_the_detector_and_refuses_a_wrong_one(tmp_path):
    path = write_calochallenge(tmp_path / "a.h5", 4)
    shown = evogan_here("data", "inspect", str(path))
    assert shown.returncode == 0, shown.stderr
    assert "calochallenge-2 (cylindrical, 9x16x45)" in shown.stdout.splitlines()[1]
    wrong = evogan_here("data", "inspect", str(path), "--set", "data.detector=calochallenge-3")
    assert wrong.returncode == 2
    assert wrong.stderr.strip().count("\n") == 0 and "40500" in wrong.stderr


def test_cli_synth_refuses_an_unknown_detector_and_writes_nothing(tmp_path):
    out = tmp_path / "s.h5"
    result = evogan_here("data", "synth", "--out", str(out), "--events", "3", "--detector", "nope")
    assert result.returncode == 2
    assert "unknown detector 'nope'" in result.stderr and "calochallenge-2" in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_cli_validate_refuses_showers_of_another_detector(tmp_path):
    generated = write_calochallenge(tmp_path / "ds2.h5", 12)
    photons = detector_for("calochallenge-1-photons")
    reference = write_calochallenge(tmp_path / "ds1.h5", 12, photons.voxels)
    result = evogan_here("validate", str(generated), str(reference), "--out", str(tmp_path / "v"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert "calochallenge-2" in result.stderr and "calochallenge-1-photons" in result.stderr
    assert not (tmp_path / "v").exists()
