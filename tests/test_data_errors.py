"""Bad input files give one clear line and exit 2, never a traceback, through the CLI: in this
process (``evogan.cli.main``), and for one case as a user runs it, in a process of its own."""

from __future__ import annotations

import re

import h5py
import numpy as np
import pytest
import torch

from evogan.config.data import DataConfig
from evogan.data.reader import open_dataset
from evogan.errors import DataError
from evogan.store import save_weights
from tests.conftest import evogan, evogan_here
from tests.data_fixtures import write_layout
from tests.gan_fixtures import save_tiny_generator


def _nan_cell(path):
    write_layout(path, "raw51", 6)
    with h5py.File(path, "r+") as f:
        f["ECAL"][4, 10, 11, 12] = np.nan


def _inf_energy(path):
    write_layout(path, "processed51", 5)
    with h5py.File(path, "r+") as f:
        f["energy"][3] = np.inf


def _flat_ecal(path):
    with h5py.File(path, "w") as f:
        f["ECAL"] = np.zeros((3, 51 * 51 * 25), dtype=np.float32)
        f["energy"] = np.ones(3, dtype=np.float32)


def _short_energy(path):
    with h5py.File(path, "w") as f:
        f["ECAL"] = np.zeros((4, 25, 25, 25), dtype=np.float32)
        f["target"] = np.ones((3, 2), dtype=np.float32)


def _no_events(path):
    with h5py.File(path, "w") as f:
        f["ECAL"] = np.zeros((0, 51, 51, 25), dtype=np.float32)
        f["energy"] = np.zeros(0, dtype=np.float32)


def _wrong_keys(path):
    with h5py.File(path, "w") as f:
        f["images"] = np.zeros((2, 4), dtype=np.float32)
        f["labels"] = np.zeros(2, dtype=np.float32)


def _discriminator(path):
    save_weights(path, {"w": torch.zeros(2)}, {"kind": "gan3d-discriminator"})


CASES = {
    "missing": (None, r"data file .*absent\.h5 does not exist"),
    "text": (lambda p: p.write_text("ECAL,energy\n1,2\n"), "is not an HDF5 file"),
    "keys": (_wrong_keys, r"missing dataset 'ECAL'; keys present: images, labels"),
    "flat": (_flat_ecal, r"ECAL must be 4-D .* got shape \(3, 65025\)"),
    "short": (_short_energy, "target has 3 entries but ECAL has 4 events"),
    "empty": (_no_events, "ECAL holds zero events"),
    "nan": (_nan_cell, r"bad\.h5: ECAL of event 4 holds NaN or inf"),
    "inf": (_inf_energy, r"bad\.h5: energy of event 3 is inf"),
    "generator": (
        lambda p: save_tiny_generator(p, seed=0),
        r"bad\.h5 holds evogan gan3d-generator weights, not showers; pass shower files here "
        r"\(a generator goes to evogan generate, or as evogan validate's first argument\)$",
    ),
    "discriminator": (_discriminator, r"holds evogan gan3d-discriminator weights, not showers"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_file_gives_one_line(tmp_path, case):
    make, pattern = CASES[case]
    path = tmp_path / ("absent.h5" if make is None else "bad.h5")
    if make is not None:
        make(path)
    result = evogan_here("data", "inspect", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evogan: error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert re.search(pattern, lines[0]), lines[0]


@pytest.mark.slow
def test_a_bad_file_is_one_line_from_a_process_of_its_own(tmp_path):
    """As a user runs it: nothing that loads on the way (torch, MPI, h5py) adds a line."""
    text = tmp_path / "bad.h5"
    text.write_text("ECAL,energy\n1,2\n")
    result = evogan("data", "inspect", str(text))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"evogan: error: data file {text} is not an HDF5 file; expected a 3DGAN or "
        "CaloChallenge .h5 shower file"
    ], result.stderr


def test_forced_layout_that_does_not_fit(tmp_path):
    path = write_layout(tmp_path / "s.h5", "evogan", 2)
    result = evogan_here("data", "inspect", str(path), "--set", "data.layout=fixed25")
    assert result.returncode == 2
    assert "missing dataset 'target'; keys present: ECAL, energy, eta, sum, theta" in result.stderr
    assert "Traceback" not in result.stderr


def _renamed_ecal(path):
    write_layout(path, "evogan", 6)
    with h5py.File(path, "r+") as f:
        f.move("ECAL", "HCAL")
    return path


def test_the_advised_setting_reads_a_file_with_other_keys(tmp_path):
    """The "set data.ecal_key" that an error advises is a setting inspect and validate take,
    and messages about the cells then name the file's own key."""
    path = _renamed_ecal(tmp_path / "hcal.h5")
    refused = evogan_here("data", "inspect", str(path))
    assert refused.returncode == 2
    assert "missing dataset 'ECAL'; keys present: HCAL, energy" in refused.stderr
    assert "set data.ecal_key to the right key" in refused.stderr
    read = evogan_here("data", "inspect", str(path), "--json", "--set", "data.ecal_key=HCAL")
    assert read.returncode == 0, read.stderr
    assert '"events": 6' in read.stdout
    with h5py.File(path, "r+") as f:
        f["HCAL"][4, 10, 11, 12] = np.nan
    bad = evogan_here("data", "inspect", str(path), "--set", "data.ecal_key=HCAL")
    assert bad.returncode == 2
    assert "hcal.h5: HCAL of event 4 holds NaN or inf" in bad.stderr


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("data.train_events=5", "--set data.train_events is not a read setting; allowed here: "),
        ("run.seed=5", "--set run is not a read setting"),
        ("data.ecal_scale=-1", "--set: data.ecal_scale = -1 is not allowed"),
        ("data.layout=raw", "--set: data.layout = 'raw' is not allowed"),
    ],
)
def test_read_settings_are_checked(tmp_path, setting, message):
    path = write_layout(tmp_path / "s.h5", "evogan", 2)
    result = evogan_here("data", "inspect", str(path), "--set", setting)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_directory_and_unmatched_glob(tmp_path):
    with pytest.raises(DataError, match="is a directory"):
        open_dataset(DataConfig(files=[str(tmp_path)]))
    with pytest.raises(DataError, match=r"data pattern '.*run_\*\.h5' matched no files"):
        open_dataset(DataConfig(files=[str(tmp_path / "run_*.h5")]))


def test_validate_reads_a_reference_with_other_keys(tmp_path):
    """validate reads the reference with the --set read settings: it gets past the key to
    the reference's size, refused before any scoring."""
    generated = write_layout(tmp_path / "generated.h5", "evogan", 40)
    reference = _renamed_ecal(tmp_path / "hcal.h5")
    few = evogan_here("validate", str(generated), str(reference), "--set", "data.ecal_key=HCAL")
    assert few.returncode == 2, few.stderr
    assert few.stderr.strip().splitlines() == [
        "evogan: error: the floor compares two halves of the reference and needs at least 8 "
        "events, got 6; pass more reference events"
    ]
    assert not (tmp_path / "validation").exists()
