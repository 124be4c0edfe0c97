"""Ensembles: the selection quantity (mean + beta x spread of member scores, biases cannot
cancel), SAGIPS equations 7-8 on the observables, worst-scored failures, and which files are
members (content dedup, run directories, one spec and one data set)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from evogan.config.data import DataConfig
from evogan.data.synthetic import synthesize
from evogan.errors import EvoganError
from evogan.gan3d.model.ensemble_members import (
    check_compatible,
    check_origin,
    expand,
    unique_members,
)
from evogan.gan3d.model.generate import score_generator
from evogan.gan3d.model.inference import InferenceGenerator
from evogan.gan3d.model.spec import GanSpec
from evogan.physics import WORST_SCORE, Reference, worst_validation
from evogan.physics.ensemble import combine, ensemble_moments
from tests.gan_fixtures import save_tiny_generator, tiny_generator, tiny_spec, toy_showers

THRESHOLD = DataConfig().cell_threshold  # as the data are read


def test_ensemble_mean_and_std_follow_equations_7_and_8() -> None:
    values = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]])
    mean, std = ensemble_moments(values)
    np.testing.assert_allclose(mean, [3.0, 5.0])
    np.testing.assert_allclose(std, [np.sqrt(8.0 / 3.0), np.sqrt(26.0 / 3.0)])
    mean, std = ensemble_moments(np.array([[1.0, np.nan], [3.0, np.nan], [np.nan, np.nan]]))
    np.testing.assert_allclose(mean, [2.0, np.nan])
    np.testing.assert_allclose(std, [1.0, np.nan])
    with pytest.raises(ValueError, match="member axis"):
        ensemble_moments(np.empty((0, 3)))


@pytest.fixture(scope="module")
def scored() -> dict:
    sets = []
    for seed in (21, 22, 23):
        parts = list(synthesize(200, (10.0, 100.0), seed))
        sets.append((np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])))
    reference = Reference.from_showers(*sets[0], cell_threshold=THRESHOLD, bins=3)
    (a, ea), (b, eb) = sets[1], sets[2]
    return {
        "reference": reference,
        "truth": [reference.score(a, ea), reference.score(b, eb)],
        "biased": [reference.score(a * np.float32(0.9), ea), reference.score(b * 1.1, eb)],
    }


@pytest.mark.slow
def test_opposite_biases_do_not_cancel(scored: dict) -> None:
    edges = scored["reference"].edges
    truth = combine(scored["truth"], edges, beta=1.0)
    biased = combine(scored["biased"], edges, beta=1.0)
    assert biased.score > 3 * truth.score
    scores = biased.scores
    assert biased.score == pytest.approx(scores.mean() + scores.std())
    # The ensemble-mean observable is right (x0.9 and x1.1 average out), its spread is not 0:
    ratio_mean, ratio_truth = biased.mean["energy_ratio"], truth.mean["energy_ratio"]
    np.testing.assert_allclose(ratio_mean, ratio_truth, rtol=0.02)
    np.testing.assert_allclose(biased.std["energy_ratio"], 0.1 * ratio_truth, rtol=0.1)
    assert biased.to_json()["members"] == 2


def test_failed_and_empty_members_score_worst(scored: dict) -> None:
    reference = scored["reference"]
    empty = reference.score(np.zeros((10, 51, 51, 25), np.float32), np.full(10, 50.0))
    failed = worst_validation(10, 10, "generator failed: out of memory")
    result = combine([scored["truth"][0], empty, failed], reference.edges, beta=0.0)
    assert result.scores.tolist()[1:] == [WORST_SCORE, WORST_SCORE]
    assert np.isfinite(result.score)
    assert np.isfinite(result.mean["profile_z"]).all()  # worst members add no observables


@pytest.mark.slow
def test_members_see_the_same_noise_and_a_broken_one_scores_worst(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = tiny_spec()
    ecal, energy, theta = toy_showers(16, seed=1)
    reference = Reference.from_showers(ecal, energy, cell_threshold=THRESHOLD, bins=2)
    one = score_generator(reference, spec, tiny_generator(7), energy, theta, seed=3)
    two = score_generator(reference, spec, tiny_generator(7), energy, theta, seed=3)
    assert one.score == two.score and np.isfinite(one.score)

    def out_of_memory(_form: InferenceGenerator, _latent: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("CUDA out of memory")

    # Generation runs the generator's inference form, so that is where the failure is put.
    monkeypatch.setattr(InferenceGenerator, "forward", out_of_memory)
    result = score_generator(reference, spec, tiny_generator(7), energy, theta, seed=3)
    assert result.score == WORST_SCORE and "out of memory" in result.to_json()["reason"]


def test_members_must_share_the_latent() -> None:
    spec = tiny_spec()
    other = GanSpec.model_validate({**spec.model_dump(), "latent_size": 20, "name": "wide"})
    with pytest.raises(EvoganError, match=r"ensemble member 2 \(wide\) must share latent size"):
        check_compatible([spec, other])


def _run(root: Path, name: str, data: dict, ranks: int = 2) -> Path:
    """A gan3d run directory as the trainer lays it out: config, per-rank generators and a
    best model that is a byte copy of rank 0's."""
    run = root / name
    (run / "generators").mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"task": "gan3d", "data": data}))
    for rank in range(ranks):
        save_tiny_generator(run / "generators" / f"rank-{rank:05d}.h5", seed=rank)
    shutil.copy(run / "generators" / "rank-00000.h5", run / "best_model.h5")
    return run


def test_run_directories_expand_and_duplicates_count_once(tmp_path: Path) -> None:
    run = _run(tmp_path, "a", {"files": ["x.h5"]})
    ranks = expand(run)
    assert [p.name for p in ranks] == ["rank-00000.h5", "rank-00001.h5"]
    members, notes = unique_members([run / "best_model.h5", *ranks])
    assert members == [run / "best_model.h5", ranks[1]]
    assert notes == [f"{ranks[0]} is byte-identical to {run / 'best_model.h5'}: counted once"]
    assert check_origin(members, [tiny_spec()] * 2) == []


def test_mixing_runs_of_other_data_or_specs_is_refused(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {"files": ["x.h5"]})
    b = _run(tmp_path, "b", {"files": ["x.h5"]}, ranks=1)
    c = _run(tmp_path, "c", {"files": ["other.h5"]}, ranks=1)
    spec = tiny_spec()
    files = [a / "generators" / "rank-00001.h5", b / "generators" / "rank-00000.h5"]
    (note,) = check_origin(files, [spec, spec])
    assert note.startswith("ensemble mixes 2 runs of spec")
    with pytest.raises(EvoganError, match="must be trained on the same data"):
        check_origin([files[0], c / "generators" / "rank-00000.h5"], [spec, spec])
    other = GanSpec.model_validate({**spec.model_dump(), "name": "renamed"})
    with pytest.raises(EvoganError, match="must share one spec"):
        check_origin(files, [spec, other])
