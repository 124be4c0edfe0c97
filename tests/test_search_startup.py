"""How ``evogan search`` refuses what would fail every candidate: bad data or settings end the
command at start with one line and exit 2 and leave no campaign directory, and a resume never
shrinks ``candidates`` (through the CLI's own ``main`` in this process, a world of one rank);
under real ``mpirun -n 2`` (one group of 2 ranks) such a refusal, made on rank 0 alone, ends
every rank, and bad data met inside a training ends the campaign (never one candidate) on every
rank without a hang."""

from __future__ import annotations

import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from evogan.config.base import validate
from evogan.config.search import SearchConfig
from evogan.data.synthetic import write_synthetic
from evogan.errors import EvoganError
from evogan.search import Campaign, resolve_base
from tests.conftest import REPO, evogan_here, kill_job, launch
from tests.data_fixtures import write_layout

TINY = REPO / "configs" / "arch_search_tiny.yaml"
HANG_S = 120  # a start-up refusal takes about 10 s here; a hung job never ends


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 good showers (32 train, 8 test), broken copies of them and 40 of another window."""
    folder = tmp_path_factory.mktemp("startup-data")
    good = write_synthetic(folder / "good.h5", 40, (10.0, 100.0), 1)
    write_synthetic(folder / "five.h5", 5, (10.0, 100.0), 1)
    (folder / "not_hdf5.txt").write_text("not a shower file\n")
    write_layout(folder / "EleEscan_1_1.h5", "fixed25", 40)  # the public 25x25x25 window
    for name in ("nan_energy.h5", "nan_cells.h5"):
        (folder / name).write_bytes(good.read_bytes())
    with h5py.File(folder / "nan_energy.h5", "r+") as f:  # event 0: the first rank's share
        f["energy"][0] = np.nan
    with h5py.File(folder / "nan_cells.h5", "r+") as f:
        cells = f["ECAL"][0]
        cells[10, 10, 10] = np.nan
        f["ECAL"][0] = cells
    return folder


def _config(folder: Path, data_file: Path, ranks_per_group: int = 2) -> Path:
    """The tiny search on ``data_file``, 2 steps per candidate, in ``folder``."""
    raw = yaml.safe_load(TINY.read_text())
    raw["base"] = str(REPO / "configs" / "gan3d_tiny.yaml")
    raw["budget"] = {"kind": "steps", "amount": 2}
    raw["fitness"] = {"members": 1, "beta": 0.5, "test_events": 20, "energy_bins": 2}
    raw["data"] = {"files": [str(data_file)]}
    raw["ranks_per_group"] = ranks_per_group
    path = folder / "search.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _search(*args: str) -> subprocess.CompletedProcess[str]:
    """``mpirun -n 2 evogan search ARGS``; fails the test (ranks killed) if it hangs."""
    process = launch(2, ["-m", "evogan", "search", *args])
    try:
        out, err = process.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        kill_job(process)
        pytest.fail(f"evogan search hung for {HANG_S} s: {args}")
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _one_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``evogan: error:`` line of a job that exited 2."""
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "evogan: error:" in line]
    assert len(errors) == 1, result.stderr[-3000:]
    return errors[0]


@pytest.mark.parametrize(
    ("data_file", "setting", "expected"),
    [
        ("not_hdf5.txt", None, "not_hdf5.txt is not an HDF5 file"),
        ("five.h5", None, "the test split holds 1 event(s), fewer than the 8"),
        (
            "EleEscan_1_1.h5",
            None,
            "the data (EleEscan_1_1.h5) hold showers of 25x25x25 cells but spec.output_shape "
            "is 51x51x25; give data.files of the spec's window, or a spec with output_shape "
            "[25, 25, 25]",
        ),
        ("good.h5", "fitness.energy_bins=100", "fitness.energy_bins = 100 needs"),
        ("good.h5", "fitness.test_events=3", "fitness.test_events = 3 is not allowed"),
    ],
)
def test_a_start_that_fails_leaves_no_campaign(
    tmp_path: Path,
    data: Path,
    data_file: str,
    setting: str | None,
    expected: str,
) -> None:
    config = _config(tmp_path, data / data_file, ranks_per_group=1)
    out = tmp_path / "campaign"
    extra = ["--set", setting] if setting else []
    line = _one_error(evogan_here("search", str(config), "--run-dir", str(out), *extra))
    assert expected in line
    assert "--bins" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["search.yaml"]  # no dir, no temp file


@pytest.mark.slow
def test_a_start_refused_on_rank_0_ends_every_rank(tmp_path: Path, data: Path) -> None:
    """The data are checked on rank 0 alone (event 0 is its share): its refusal must reach the
    other rank, so that the job ends at once with rank 0's one line and no directory."""
    config = _config(tmp_path, data / "nan_energy.h5")
    line = _one_error(_search(str(config), "--run-dir", str(tmp_path / "campaign")))
    assert "nan_energy.h5: energy of event 0 is nan" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["search.yaml"]


@pytest.mark.slow
def test_bad_cells_inside_training_end_every_rank(tmp_path: Path, data: Path, monkeypatch) -> None:
    """Only the first rank reads the bad event: it must not make a failed candidate of it while
    its partner waits in the gradient all-reduce (and never reports: end after 2 s)."""
    monkeypatch.setenv("EVOGAN_AGREE_SECONDS", "2")
    config = _config(tmp_path, data / "nan_cells.h5")
    line = _one_error(_search(str(config), "--run-dir", str(tmp_path / "campaign")))
    assert "nan_cells.h5: ECAL of event 0 holds NaN or inf" in line


def test_resume_refuses_fewer_candidates_than_trained(tmp_path: Path, data: Path) -> None:
    raw = yaml.safe_load(_config(tmp_path, data / "good.h5", ranks_per_group=1).read_text())
    config = resolve_base(validate(SearchConfig, raw, source="test"))
    campaign = Campaign.create(config, 1, tmp_path / "campaign")
    for number in range(4):
        campaign.append("island-0", {"id": f"t{number:05d}", "status": "ok", "fitness": 1.0})
    stored = (campaign.path / "config.yaml").read_text()
    args = ["--resume", str(campaign.path), "--force", "--set", "candidates=2"]
    line = _one_error(evogan_here("search", *args))
    assert "candidates = 2 is not allowed" in line and "4 trained" in line
    assert (campaign.path / "config.yaml").read_text() == stored


def test_a_campaign_stored_before_a_nested_key_was_added_resumes(tmp_path: Path) -> None:
    """A key added to a section since the campaign was stored counts as its default: a campaign
    that stored ``ga.migration`` with three keys opens under today's five-key section, and a
    changed value is still refused."""
    raw = yaml.safe_load((REPO / "configs" / "arch_search_tiny.yaml").read_text())
    config = resolve_base(validate(SearchConfig, raw, source="test"), REPO / "configs" / "x.yaml")
    campaign = Campaign.create(config, 2, tmp_path / "campaign")
    stored = yaml.safe_load((campaign.path / "config.yaml").read_text())
    stored["ga"]["migration"] = {"topology": "ring", "every": 1, "migrants": 1}
    (campaign.path / "config.yaml").write_text(yaml.safe_dump(stored))
    Campaign.open(campaign.path, config, 2)
    changed = config.model_copy(update={"ga": config.ga.model_copy(update={"tournament": 3})})
    with pytest.raises(EvoganError, match="was started with a different ga"):
        Campaign.open(campaign.path, changed, 2)
