"""One scoring path: the same showers score the same whichever way they arrive.

A tiny generator's showers hold cells below the 1e-6 GeV threshold (its final activation's
dust, about 0.2% of the cells), which a file loses as it is read. They are scored as
``evogan validate`` scores a generator (alone and as an ensemble member), as it scores the
file ``evogan generate`` writes of the same showers, as a search candidate's fitness scores
them, and as validation during training does: every score, metric and separation is equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from evogan.cli import main
from evogan.config.base import validate
from evogan.config.data import DataConfig
from evogan.config.search import SearchConfig
from evogan.data.reader import ShowerDataset, open_files
from evogan.data.synthetic import generate_showers
from evogan.data.writer import ShowerWriter
from evogan.gan3d.model.generate import generate_showers as generated_showers
from evogan.gan3d.model.model_file import load_generator
from evogan.physics import Reference
from evogan.search import resolve_base
from evogan.search.scoring import SCORE_SEED, Scorer
from evogan.seeding import torch_generator
from tests.gan_fixtures import REPO, TINY, save_tiny_generator

EVENTS, BINS = 60, 3


def _showers(path: Path, events: int, seed: int) -> Path:
    """Synthetic showers at 10-100 GeV and 80-100 deg (angles that vary, as the
    angle-conditioned tiny spec's reference needs)."""
    rng = np.random.default_rng(seed)
    energy = rng.uniform(10.0, 100.0, events).astype(np.float32)
    theta = rng.uniform(np.radians(80.0), np.radians(100.0), events).astype(np.float32)
    ecal = generate_showers(energy, rng, theta=theta)
    with ShowerWriter(path, ecal.shape[1:]) as writer:
        writer.append(ecal, energy, theta)
    return path


def _validate(capsys: pytest.CaptureFixture, *args: str) -> dict:
    assert main(["validate", *args, "--json", "--no-figures", "--bins", str(BINS)]) == 0
    return json.loads(capsys.readouterr().out)


def _search_config(train: Path, test: Path) -> SearchConfig:
    raw = yaml.safe_load((REPO / "configs" / "arch_search_tiny.yaml").read_text())
    raw["base"] = str(TINY)
    raw["data"] = {"files": [str(train)], "test_files": [str(test)]}
    raw["fitness"] = {"members": 1, "test_events": EVENTS, "energy_bins": BINS}
    return resolve_base(validate(SearchConfig, raw, source="test"))


def _scored_from_a_file(showers: np.ndarray, ref: Path, seed: int, tmp_path: Path) -> float:
    """``showers`` (made for the reference's conditions) written, read back and scored
    against the reference as ``evogan validate`` reads and scores files."""
    reference = ShowerDataset.from_files(open_files([str(ref)])).read()
    with ShowerWriter(tmp_path / "written.h5", showers.shape[1:]) as writer:
        writer.append(showers, reference.energy, reference.theta)
    read = ShowerDataset.from_files(open_files([str(tmp_path / "written.h5")])).read()
    scorer = Reference.from_showers(
        reference.ecal,
        reference.energy,
        cell_threshold=DataConfig().cell_threshold,
        bins=BINS,
        seed=seed,
        theta=reference.theta,
    )
    return scorer.score(read.ecal, read.energy, read.theta).score


@pytest.mark.slow
def test_the_same_showers_score_alike_through_every_path(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    ref = _showers(tmp_path / "ref.h5", EVENTS, seed=1)
    train = _showers(tmp_path / "train.h5", 40, seed=2)
    model = save_tiny_generator(tmp_path / "g1.h5", seed=1)
    other = save_tiny_generator(tmp_path / "g2.h5", seed=2)
    seed = str(SCORE_SEED)  # the search's noise and metric seed, so every path draws alike

    by_model = _validate(capsys, str(model), str(ref), "--seed", seed, "--ensemble", str(other))
    assert main(["generate", str(model), "--conditions-from", str(ref), "--seed", seed,
                 "--out", str(tmp_path / "gen.h5")]) == 0  # fmt: skip
    capsys.readouterr()
    by_file = _validate(capsys, str(tmp_path / "gen.h5"), str(ref), "--seed", seed)
    member = by_model["ensemble"]["member_scores"][0]
    assert by_file["score"] == member and by_file["metrics"] == by_model["metrics"]
    assert by_file["separation"] == by_model["separation"]

    spec, generator, _ = load_generator(model)
    energy, theta = ShowerDataset.from_files(open_files([str(ref)])).conditions()
    showers = generated_showers(spec, generator, energy, theta, torch.Generator().manual_seed(1))
    assert ((showers > 0) & (showers < DataConfig().cell_threshold)).any()  # dust to lose
    assert Scorer(_search_config(train, ref)).score(model) == member

    from mpi4py import MPI

    from evogan.gan3d.training.validation import TrainingValidation, ValidationPlan
    from evogan.store import RunDir

    held_out = ShowerDataset.from_files(open_files([str(ref)]))
    plan = ValidationPlan(spec, 5, BINS, replicas=False, standing=(0, 8))
    training = TrainingValidation(plan, MPI.COMM_WORLD, held_out)
    record = training.validate(
        generator, RunDir.create("gan3d", path=tmp_path / "run"), None, {"epoch": 1}
    )
    showers = generated_showers(
        spec, generator, energy, theta, torch_generator(5, "gan3d", "validation")
    )
    assert record["score"] == _scored_from_a_file(showers, ref, 5, tmp_path)


def test_every_reference_takes_the_data_configs_cell_threshold(tmp_path: Path) -> None:
    ref = _showers(tmp_path / "ref.h5", 40, seed=1)
    config = _search_config(_showers(tmp_path / "train.h5", 20, seed=2), ref)
    data = config.data.model_copy(update={"cell_threshold": 1e-4})
    scorer = Scorer(config.model_copy(update={"data": data}))
    assert scorer.reference.cell_threshold == scorer.reference.table.cell_threshold == 1e-4

    from mpi4py import MPI

    from evogan.gan3d.training.validation import TrainingValidation, ValidationPlan

    held_out = ShowerDataset.from_files(open_files([str(ref)]), cell_threshold=1e-4)
    plan = ValidationPlan(config.spec, 5, BINS, replicas=False, standing=(0, 8))
    training = TrainingValidation(plan, MPI.COMM_WORLD, held_out)
    assert training.reference.cell_threshold == 1e-4
