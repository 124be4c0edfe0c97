"""Refusals that need the data's size or shape come from the files' metadata (or the synthetic
set's settings) before torch and MPI load: a missing file, a batch larger than a rank's share
of the training events, a spec or network that does not fit the showers, a test split too
small to score; one line, exit 2, on every rank of an mpirun job. The views they are made
from are the ones the trainers open."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evogan.config.data import DataConfig
from evogan.data.plan import planned_dataset
from evogan.data.reader import open_dataset
from evogan.data.synthetic import write_synthetic
from evogan.detectors import detector_for
from evogan.errors import EvoganError
from tests.conftest import REPO, mpirun

TINY = "configs/gan3d_tiny.yaml"
SEARCH = ["search", "configs/arch_search_tiny.yaml", "--set", "ranks_per_group=1"]
CHECK = (
    "import json, sys\nfrom evogan.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print(json.dumps([code, 'torch' in sys.modules or 'mpi4py.MPI' in sys.modules]))\n"
    "sys.exit(code)"
)
"""``evogan ARGV`` in a fresh process that says its exit code and whether torch or MPI had
loaded by the end (a lone process loads neither to report an error)."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """40 and 20 showers in the 51x51x25 window, 40 in the 25x25x25 one."""
    folder = tmp_path_factory.mktemp("files")
    made = {}
    for name, events, detector in (
        ("w51", 40, "clic-ecal"),
        ("w51b", 20, "clic-ecal"),
        ("w25", 40, "clic-ecal-25"),
    ):
        made[name] = folder / f"{name}.h5"
        write_synthetic(made[name], events, (10.0, 100.0), 1, detector=detector_for(detector))
    return made


def _refused(*argv: str) -> str:
    """The one line ``evogan ARGV`` is refused with, checked to come before torch and MPI."""
    done = subprocess.run(
        [sys.executable, "-c", CHECK, *argv], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    code, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == done.returncode == 2, done.stderr
    assert not loaded, "refused after torch or MPI loaded"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("evogan: error: ")
    return lines[0].removeprefix("evogan: error: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["train", TINY],
        ["evolve", "configs/regressor_ga.yaml"],
        ["train", "configs/regressor_rmsprop.yaml"],
        SEARCH,
    ],
)
def test_a_missing_data_file_is_refused_before_torch(tmp_path: Path, argv: list[str]) -> None:
    missing = tmp_path / "nope.h5"
    line = _refused(*argv, "--set", f"data.files=[{missing}]")
    assert line == f"data file {missing} does not exist"


def test_a_batch_larger_than_a_rank_shard_is_refused_before_torch(files: dict[str, Path]) -> None:
    line = _refused("train", TINY, "--set", "spec.batch_size=321")  # synthetic: 320 to train
    assert line == (
        "every rank needs at least one batch of trainer.batch_size = 321 showers, but a rank "
        "holds 320; use more events, fewer ranks or a smaller batch"
    )
    line = _refused("train", TINY, "--set", f"data.files=[{files['w51']}]", "trainer.batch_size=33")
    assert "trainer.batch_size = 33 showers, but a rank holds 32;" in line  # 40 less 8 held out


def test_a_held_out_set_smaller_than_a_validation_is_refused_before_torch() -> None:
    settings = ["trainer.validate_every=1", "trainer.validation_events=4"]
    line = _refused("train", TINY, "--set", *settings)
    assert line.startswith("the held-out validation set has 4 showers, fewer than 8 (one batch")


def test_a_spec_of_another_window_than_the_files_is_refused_before_torch(
    files: dict[str, Path],
) -> None:
    data = [f"data.files=[{files['w25']}]", "data.detector=clic-ecal-25"]
    line = _refused("train", TINY, "--set", *data)
    assert line.startswith(
        "the data (w25.h5) hold showers of 25x25x25 cells but spec.output_shape is 51x51x25;"
    )
    line = _refused(*SEARCH, "--set", *data)
    assert "hold showers of 25x25x25 cells but spec.output_shape is 51x51x25" in line


def test_regressor_batches_and_files_that_do_not_fit_are_refused_before_torch(
    files: dict[str, Path],
) -> None:
    line = _refused("evolve", "configs/regressor_ga.yaml", "--set", "ga.batch_size=5001")
    assert line.startswith("ga.batch_size must not exceed the 5000 training events, got 5001;")
    line = _refused("train", "configs/regressor_rmsprop.yaml", "--set", "train.batch_size=9000")
    assert line.startswith("train.batch_size must not exceed the")
    line = _refused("evolve", "configs/regressor_ga.yaml", "--set", f"data.files=[{files['w25']}]")
    assert line.endswith(
        "records detector clic-ecal-25 but data.detector is clic-ecal; set "
        "data.detector: clic-ecal-25, or leave the file out"
    )


def test_a_test_split_too_small_to_score_is_refused_before_torch() -> None:
    line = _refused(*SEARCH, "--set", "data.test_events=4")
    assert line.startswith("the test split holds 4 event(s), fewer than the 8 the fitness score")


def test_every_rank_of_an_mpirun_job_refuses_with_one_line() -> None:
    """2 ranks share 320 training showers: 160 each, fewer than a batch of 200 that one rank
    would hold. Every rank ends with exit code 2 and without torch (MPI loads after the
    refusal, for the ranks to agree on who says it)."""
    check = CHECK.replace(
        "'torch' in sys.modules or 'mpi4py.MPI' in sys.modules", "'torch' in sys.modules"
    )
    done = mpirun(2, ["-c", check, "train", TINY, "--set", "spec.batch_size=200"])
    assert done.returncode == 2, done.stderr[-3000:]
    said = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert said == [[2, False], [2, False]]
    errors = [line for line in done.stderr.splitlines() if line.startswith("evogan: error:")]
    assert errors == [
        "evogan: error: every rank needs at least one batch of trainer.batch_size = 200 "
        "showers, but a rank holds 160; use more events, fewer ranks or a smaller batch"
    ]


@pytest.mark.parametrize(
    "settings",
    [
        {"synthetic": {"events": 30, "seed": 3}, "max_events": 25, "test_fraction": 0.3},
        {"detector": "calochallenge-2", "synthetic": {"events": 12, "seed": 3}},
        {"files": ["W51"], "test_files": ["W51B"], "max_events": 30},
        {"files": ["W51"], "test_files": ["W25"], "detector": "clic-ecal"},
        {"files": ["W51", "W25"], "detector": "clic-ecal-25"},
        {"files": ["W51"], "train_events": 9, "test_events": 5},
    ],
)
def test_the_planned_views_are_the_opened_ones(
    files: dict[str, Path], settings: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned and opened alike: the same event ranges of the same files (the synthetic set
    where it will be cached) and cell shape, or the same refusal."""
    monkeypatch.setenv("EVOGAN_CACHE_DIR", str(tmp_path))
    named = {name.upper(): str(path) for name, path in files.items()}
    for key in ("files", "test_files"):
        if key in settings:
            settings = {**settings, key: [named[name] for name in settings[key]]}
    cfg = DataConfig(**settings)
    try:
        planned = planned_dataset(cfg)
    except EvoganError as refused:
        with pytest.raises(type(refused)) as opened:
            open_dataset(cfg, announce=lambda _line: None)
        assert str(opened.value) == str(refused)
        return
    opened = open_dataset(cfg, announce=lambda _line: None)
    for plan, view in zip(planned, opened, strict=True):
        assert plan.ranges == view.ranges
        assert plan.shape == view.shape and plan.detector == view.detector
