"""Layout detection, overrides, streaming, splitting and sharding of shower files."""

from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest

from evogan.config.data import DataConfig
from evogan.data.layouts import particle_from_name
from evogan.data.reader import ShowerDataset, open_dataset, open_file, open_files
from evogan.data.writer import ShowerWriter
from evogan.errors import DataError
from tests.conftest import mpirun
from tests.data_fixtures import energies, expected_cells, write_layout

LAYOUTS = ["fixed25", "raw51", "processed51", "evogan"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_detects_layout_and_reads_cells_in_gev(tmp_path, layout):
    path = write_layout(tmp_path / f"Ele_{layout}.h5", layout, events=6)
    source = open_file(path)
    assert source.layout.name == layout
    assert source.events == 6
    assert source.particle == "Ele"
    data = ShowerDataset.from_files([source]).read()
    assert data.ecal.dtype == np.float32 and data.ecal.shape == (6, *source.shape)
    np.testing.assert_array_equal(data.ecal, expected_cells(layout, 6))
    np.testing.assert_array_equal(data.energy, energies(6))  # fixed25: target[:, 1]
    if layout == "fixed25":
        np.testing.assert_allclose(data.theta, math.pi / 2)
    else:
        np.testing.assert_allclose(data.theta, np.linspace(1.2, 1.9, 6), rtol=1e-6)


def test_evogan_written_files_of_any_shape(tmp_path):
    cells = np.zeros((3, 25, 25, 25), dtype=np.float32)
    cells[:, 12, 12, 5] = [1.0, 2.0, 3.0]
    with ShowerWriter(tmp_path / "gan_samples.h5", (25, 25, 25)) as writer:
        writer.append(cells, np.array([100.0, 200.0, 300.0]), theta=1.0)
    data = ShowerDataset.from_files([open_file(tmp_path / "gan_samples.h5")])
    assert data.layout == "evogan" and data.shape == (25, 25, 25)
    chunk = data.read()
    np.testing.assert_array_equal(chunk.ecal, cells)
    np.testing.assert_allclose(chunk.theta, 1.0)


def test_raw_cells_are_divided_by_50_unless_the_file_declares_gev(tmp_path):
    raw = ShowerDataset.from_files([open_file(write_layout(tmp_path / "r.h5", "raw51", 3))])
    with h5py.File(tmp_path / "r.h5") as f:
        stored = f["ECAL"][:]
    kept = stored >= 50e-6  # 1e-6 GeV threshold in stored units
    np.testing.assert_allclose(raw.read().ecal[kept], stored[kept] / 50, rtol=1e-6)
    assert raw.read().ecal[~kept].max() == 0


def test_overrides_layout_keys_and_scale(tmp_path):
    path = tmp_path / "renamed.h5"
    cells = np.full((4, 51, 51, 25), 2.0, dtype=np.float32)
    with h5py.File(path, "w") as f:
        f["cells"] = cells
        f["E"] = np.array([20, 30, 40, 50], dtype=np.float32)
    with pytest.raises(DataError, match="missing dataset 'ECAL'; keys present: E, cells"):
        open_file(path)
    source = open_file(path, layout="raw51", ecal_key="cells", energy_key="E", ecal_scale=0.5)
    data = ShowerDataset.from_files([source]).read()
    assert source.layout.name == "raw51" and source.layout.theta_key is None
    np.testing.assert_array_equal(data.ecal, 1.0)
    np.testing.assert_array_equal(data.energy, [20, 30, 40, 50])
    # Forcing a layout changes the default scale; ecal_scale beats the file's ecal_units.
    synth = write_layout(tmp_path / "s.h5", "evogan", 2)
    assert open_file(synth).layout.ecal_scale == 1.0
    assert open_file(synth, ecal_scale=0.02).layout.ecal_scale == pytest.approx(0.02)
    assert open_file(synth, layout="processed51").layout.ecal_scale == 1.0  # declared GeV wins


def test_theta_in_degrees_is_converted(tmp_path):
    path = write_layout(tmp_path / "deg.h5", "raw51", 4, theta_degrees=True)
    theta = ShowerDataset.from_files([open_file(path)]).read().theta
    np.testing.assert_allclose(theta, np.linspace(1.2, 1.9, 4), rtol=1e-5)


def test_particle_from_file_name():
    assert particle_from_name("/d/EleEscan_1_2.h5") == "Ele"
    assert particle_from_name("EleEscan_RandomAngle_1_MERGED.h5") == "Ele"
    assert particle_from_name("ChPiEscan_3.h5") == "ChPi"
    assert particle_from_name("Ele_VarAngleMeas_100_200_005.h5") == "Ele"
    assert particle_from_name("synthetic_6000ev.h5") == ""


def test_globs_several_files_and_order(tmp_path):
    write_layout(tmp_path / "EleEscan_1.h5", "raw51", 5, first=0)
    write_layout(tmp_path / "EleEscan_2.h5", "raw51", 7, first=5)
    write_layout(tmp_path / "other.h5", "processed51", 4, first=12)
    files = open_files(
        [str(tmp_path / "EleEscan_*.h5"), tmp_path / "EleEscan_1.h5", tmp_path / "other.h5"]
    )
    assert [f.path.name for f in files] == ["EleEscan_1.h5", "EleEscan_2.h5", "other.h5"]
    data = ShowerDataset.from_files(files)
    assert len(data) == 16 and data.layout == "raw51+processed51"
    np.testing.assert_array_equal(data.read().energy, energies(16))
    with pytest.raises(DataError, match="matched no files"):
        open_files([str(tmp_path / "nothing_*.h5")])


@pytest.mark.parametrize("chunk_events", [1, 4, 7, 100])
def test_streaming_equals_bulk_read(tmp_path, chunk_events):
    # HDF5 chunks of 3 events: reads are aligned to them and never span two files.
    a = write_layout(tmp_path / "a.h5", "raw51", 10, first=0, chunks=(3, 51, 51, 25))
    b = write_layout(tmp_path / "b.h5", "raw51", 5, first=10)
    data = ShowerDataset.from_files(open_files([a, b]))
    chunks = list(data.iter_chunks(chunk_events))
    assert all(len(c) <= max(chunk_events, 3) for c in chunks)
    ecal = np.concatenate([c.ecal for c in chunks])
    expected = np.concatenate([expected_cells("raw51", 10), expected_cells("raw51", 5, 10)])
    np.testing.assert_array_equal(ecal, expected)
    np.testing.assert_array_equal(np.concatenate([c.energy for c in chunks]), energies(15))
    part = data.select(3, 12).read()
    np.testing.assert_array_equal(part.ecal, expected[3:12])
    np.testing.assert_array_equal(data.take(4).energies(), np.r_[energies(3), energies(1, 10)])
    np.testing.assert_array_equal(data.take(20).energies(), energies(15))


@pytest.mark.parametrize("n", [1, 2, 5, 9, 10, 11, 29])
def test_take_spans_every_file_in_proportion(tmp_path, n):
    """Three files of 10, 3 and 17 events: ``n`` in all, each file's share within one event
    of its proportion, each file's first events, in file order."""
    sizes, paths, first = (10, 3, 17), [], 0
    for index, size in enumerate(sizes):
        paths.append(write_layout(tmp_path / f"f{index}.h5", "fixed25", size, first=first))
        first += size
    taken = ShowerDataset.from_files(open_files(paths)).take(n)
    ranges = {path: (start, stop) for path, start, stop in taken.ranges}
    counts = [ranges.get(path, (0, 0))[1] for path in paths]
    assert sum(counts) == n and all(start == 0 for start, _ in ranges.values())
    assert all(abs(k - n * size / sum(sizes)) < 1 for k, size in zip(counts, sizes, strict=True))
    offsets = np.cumsum((0, *sizes[:-1]))
    expected = [energies(k, offset) for k, offset in zip(counts, offsets, strict=True)]
    np.testing.assert_array_equal(taken.energies(), np.concatenate(expected))


def test_split_by_fraction_and_limits(tmp_path):
    write_layout(tmp_path / "EleEscan_1.h5", "fixed25", 12, first=0)
    write_layout(tmp_path / "EleEscan_2.h5", "fixed25", 8, first=12)
    files = [str(tmp_path / "EleEscan_*.h5")]
    said: list[str] = []
    train, test = open_dataset(DataConfig(files=files, test_fraction=0.25), announce=said.append)
    # the last quarter of each file: files often hold one energy range each
    np.testing.assert_array_equal(train.energies(), np.r_[energies(9), energies(6, 12)])
    np.testing.assert_array_equal(test.energies(), np.r_[energies(3, 9), energies(2, 18)])
    assert "15 training / 5 test events" in said[-1]
    # Limits take from every file in proportion (12 of 12 + 8: 7 + 5), the first of each, so
    # a limited set still spans every file's range; the train/test split follows per file.
    cfg = DataConfig(files=files, test_fraction=0.25, max_events=12, train_events=4, test_events=50)
    train, test = open_dataset(cfg, announce=said.append)
    np.testing.assert_array_equal(train.energies(), np.r_[energies(2), energies(2, 12)])
    np.testing.assert_array_equal(test.energies(), np.r_[energies(2, 5), energies(1, 16)])
    assert any("data.test_events = 50 but only 3" in line for line in said)
    said.clear()
    cfg = DataConfig(files=files, test_fraction=0.25, max_events=99)
    assert len(open_dataset(cfg, announce=said.append)[0]) == 15
    assert "data: data.max_events = 99 but only 20 are available; using 20" in said
    with pytest.raises(DataError, match=r"1 event\(s\) cannot be split"):
        open_dataset(DataConfig(files=files, max_events=1), announce=said.append)


def test_split_by_file(tmp_path):
    train_path = write_layout(tmp_path / "train.h5", "processed51", 9, first=0)
    test_path = write_layout(tmp_path / "test.h5", "processed51", 3, first=9)
    cfg = DataConfig(files=[str(train_path)], test_files=[str(test_path)])
    train, test = open_dataset(cfg, announce=lambda _: None)
    assert train.files == [train_path] and test.files == [test_path]
    np.testing.assert_array_equal(test.energies(), energies(3, 9))
    with pytest.raises(DataError, match="must not repeat"):
        open_dataset(DataConfig(files=[str(train_path)], test_files=[str(train_path)]))


def test_shard_is_disjoint_complete_and_balanced(tmp_path):
    write_layout(tmp_path / "a.h5", "fixed25", 7, first=0)
    write_layout(tmp_path / "b.h5", "fixed25", 6, first=7)
    data = ShowerDataset.from_files(open_files([str(tmp_path / "*.h5")])).select(1, 13)
    for size in (1, 2, 3, 5, 12, 15):
        seen = [data.shard(rank, size).energies().tolist() for rank in range(size)]
        flat = sorted(e for part in seen for e in part)
        assert flat == energies(12, 1).tolist(), size  # disjoint and complete
        assert all(part == sorted(part) for part in seen)  # each file's block in order
        assert max(map(len, seen)) - min(map(len, seen)) <= 1
        if size <= 6:  # every rank reads both files (6 events of a.h5, 6 of b.h5)
            assert all(min(part) < 17 <= max(part) for part in seen), (size, seen)
    with pytest.raises(DataError, match="rank 2 of 2"):
        data.shard(2, 2)


@pytest.mark.mpi
@pytest.mark.slow
def test_shards_under_mpirun(tmp_path):
    write_layout(tmp_path / "EleEscan_1.h5", "raw51", 9, first=0)
    write_layout(tmp_path / "EleEscan_2.h5", "raw51", 7, first=9)
    out = tmp_path / "out"
    out.mkdir()
    result = mpirun(
        2,
        [
            "tests/mpi_scripts/shard_check.py",
            "--files",
            str(tmp_path / "EleEscan_*.h5"),
            "--out",
            str(out),
        ],
    )
    assert result.returncode == 0, result.stderr
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["size"] for r in reports] == [2, 2]
    assert reports[0]["train_events"] == 12  # the last quarter of each file is the test set
    first, second = reports[0]["events"], reports[1]["events"]
    assert not set(first) & set(second)
    assert sorted(first + second) == [*range(7), *range(9, 14)]
    assert len(first) == len(second) == 6
    assert all(min(r) < 9 <= max(r) for r in (first, second))  # both read both files
