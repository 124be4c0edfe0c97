"""ShowerWriter round trip and atomicity; ``evogan data synth`` as a user runs it."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest

from evogan import __version__
from evogan.data.synthetic import write_synthetic
from evogan.data.writer import STREAMING, ShowerWriter, stored_bytes
from evogan.errors import EXIT_USER_ERROR, DataError
from tests.conftest import evogan_here
from tests.gan_fixtures import toy_showers

SHAPE = (4, 3, 5)


def _batch(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ecal = rng.exponential(1.0, (n, *SHAPE)).astype(np.float32)
    ecal[ecal < 0.7] = 0.0
    return ecal, rng.uniform(2, 500, n).astype(np.float32), rng.uniform(1, 2, n).astype(np.float32)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_round_trip_and_attributes(tmp_path: Path) -> None:
    first, second = _batch(3, seed=0), _batch(5, seed=1)
    path = tmp_path / "showers.h5"
    with ShowerWriter(path, SHAPE, attrs={"seed": 7, "energy_range_gev": [2.0, 500.0]}) as w:
        w.append(*first)
        w.append(second[0], second[1])  # theta defaults to perpendicular incidence
        assert not path.exists()  # nothing visible until the block ends
    assert w.events == 8
    assert _leftovers(tmp_path) == ["showers.h5"]
    with h5py.File(path) as f:
        np.testing.assert_array_equal(f["ECAL"][:], np.concatenate([first[0], second[0]]))
        np.testing.assert_array_equal(f["energy"][:], np.concatenate([first[1], second[1]]))
        np.testing.assert_allclose(f["theta"][3:], np.pi / 2)
        np.testing.assert_array_equal(f["theta"][:3], first[2])
        np.testing.assert_allclose(f["sum"][:], f["ECAL"][:].sum(axis=(1, 2, 3)), rtol=1e-6)
        assert all(f[k].dtype == np.float32 for k in ("ECAL", "energy", "theta", "sum"))
        assert f["ECAL"].chunks == (1, *SHAPE)
        assert f["ECAL"].compression == "gzip"
        assert f.attrs["producer"] == "evogan"
        assert f.attrs["ecal_units"] == "GeV"
        assert f.attrs["evogan_version"] == __version__
        assert f.attrs["seed"] == 7
        np.testing.assert_array_equal(f.attrs["energy_range_gev"], [2.0, 500.0])


def test_a_numbered_streaming_file_holds_event_numbers_and_its_size_is_foreseen(
    tmp_path: Path,
) -> None:
    """``evogan generate``'s files: an ``event`` column, HDF5 1.10's format, and a size that
    :func:`stored_bytes` of a first batch foresees (what the disk check multiplies)."""
    path = tmp_path / "numbered.h5"
    ecal, energy, theta = toy_showers(48, seed=3)
    with ShowerWriter(path, (51, 51, 25), numbered=True, libver=STREAMING) as writer:
        writer.append(ecal[:16], energy[:16], theta[:16], np.arange(100, 116))
        with pytest.raises(ValueError, match="numbered ShowerWriter takes event numbers"):
            writer.append(ecal[16:], energy[16:], theta[16:])
        writer.append(ecal[16:], energy[16:], theta[16:], np.arange(116, 148))
    with h5py.File(path, "r") as handle:
        np.testing.assert_array_equal(handle["event"][:], np.arange(100, 148))
        assert handle.id.get_create_plist().get_version()[0] >= 2  # superblock of 1.10
    foreseen = stored_bytes(ecal[:16]) * 48
    assert 0.8 < path.stat().st_size / foreseen < 1.25, (path.stat().st_size, foreseen)


def test_exception_mid_write_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "showers.h5"
    with pytest.raises(RuntimeError, match="boom"), ShowerWriter(path, SHAPE) as writer:
        writer.append(*_batch(2, seed=0))
        raise RuntimeError("boom")
    assert _leftovers(tmp_path) == []


def test_failed_rewrite_keeps_the_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "showers.h5"
    with ShowerWriter(path, SHAPE) as writer:
        writer.append(*_batch(2, seed=0))
    before = path.read_bytes()
    with pytest.raises(DataError, match="finite"), ShowerWriter(path, SHAPE) as writer:
        writer.append(*_batch(4, seed=1))
        bad = _batch(1, seed=2)
        bad[0][0, 0, 0, 0] = np.nan
        writer.append(*bad)
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == ["showers.h5"]


def test_batch_shape_is_checked(tmp_path: Path) -> None:
    ecal, energy, theta = _batch(3, seed=0)
    with (
        pytest.raises(DataError, match=r"shape \(2, 4, 3, 5\)"),
        ShowerWriter(tmp_path / "x.h5", SHAPE) as writer,
    ):
        writer.append(ecal, energy[:2], theta[:2])
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("target", "message"),
    [("missing/out.h5", "must exist"), (".", "is a directory"), ("afile/out.h5", "must exist")],
)
def test_unwritable_path_is_one_line_error(tmp_path: Path, target: str, message: str) -> None:
    (tmp_path / "afile").write_text("not a directory")
    with pytest.raises(DataError, match=message) as info:
        ShowerWriter(tmp_path / target, SHAPE)
    assert "\n" not in str(info.value)
    # The synthetic writer checks the path before generating anything.
    with pytest.raises(DataError, match=message):
        write_synthetic(tmp_path / target, 10**6)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(DataError, match="writable"):
        ShowerWriter(locked / "out.h5", SHAPE)


def test_cli_synth_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "synth.h5"
    result = evogan_here(
        "data",
        "synth",
        "--out",
        str(out),
        "--events",
        "5",
        "--seed",
        "3",
        "--energy-range",
        "50",
        "60",
    )
    assert result.returncode == 0, result.stderr
    assert "wrote 5 synthetic showers" in result.stdout
    with h5py.File(out) as f:
        assert f["ECAL"].shape == (5, 51, 51, 25)
        assert np.all((f["energy"][:] >= 50) & (f["energy"][:] <= 60))
        assert f.attrs["seed"] == 3 and f.attrs["ecal_units"] == "GeV"
        assert np.all(f["sum"][:] > 0)
    assert _leftovers(tmp_path) == ["synth.h5"]


def test_cli_synth_says_when_it_replaces_a_file(tmp_path: Path) -> None:
    out = tmp_path / "synth.h5"
    args = ("data", "synth", "--out", str(out), "--events", "5")
    assert "replacing" not in evogan_here(*args, "--seed", "1").stdout
    result = evogan_here(*args, "--seed", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(f"to {out} (replacing the file that was there)")
    with h5py.File(out) as f:
        assert f.attrs["seed"] == 2
    assert _leftovers(tmp_path) == ["synth.h5"]


@pytest.mark.parametrize(
    ("out_name", "args"),
    [
        ("synth.h5", ["--events", "0"]),
        ("synth.h5", ["--events", "5", "--energy-range", "500", "2"]),
        ("missing/synth.h5", ["--events", "5"]),
        (".", ["--events", "5"]),
        ("synth.h5", ["--events", "5", "--seed", "-1"]),
    ],
    ids=["no-events", "reversed-range", "missing-dir", "out-is-dir", "negative-seed"],
)
def test_cli_synth_bad_input_is_one_clean_line(
    tmp_path: Path, out_name: str, args: list[str]
) -> None:
    result = evogan_here("data", "synth", "--out", str(tmp_path / out_name), *args)
    assert result.returncode == EXIT_USER_ERROR
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evogan: error:"), result.stderr
    assert "Traceback" not in result.stderr
    assert _leftovers(tmp_path) == []
