"""A candidate whose generators make empty showers scores worst-class for them and says so:
the scorer counts the empty showers, the candidate's reason names them, and the campaign's
line for it shows that reason beside its fitness."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evogan.gan3d.model.model_file import save_generator
from evogan.physics import WORST_SCORE
from evogan.search.evaluation import Evaluation
from evogan.search.fitness import _add_scores
from evogan.search.follow import Tally
from evogan.search.scoring import MemberScore, Scorer
from tests.gan_fixtures import tiny_generator, tiny_spec
from tests.test_score_paths import EVENTS, _search_config, _showers


def _empty_generator(path: Path) -> Path:
    """A tiny generator whose last convolution outputs below zero, so its ReLU gives empty
    showers."""
    generator = tiny_generator(1)
    last = generator.blocks[-1][1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(-1.0)
    return save_generator(path, tiny_spec(), generator, {"seed": 1})


@pytest.mark.slow
def test_the_scorer_counts_empty_showers(tmp_path: Path) -> None:
    ref = _showers(tmp_path / "ref.h5", EVENTS, seed=1)
    train = _showers(tmp_path / "train.h5", 40, seed=2)
    scorer = Scorer(_search_config(train, ref))
    assert scorer.measure(_empty_generator(tmp_path / "empty.h5")) == MemberScore(
        WORST_SCORE, EVENTS, EVENTS
    )


def test_a_candidate_with_empty_showers_says_so_in_its_line() -> None:
    result = Evaluation("ok", float("inf"))
    _add_scores(result, [MemberScore(100.0, 40, 40), MemberScore(12.0, 0, 40)], beta=0.0)
    assert result.status == "ok" and result.fitness == 56.0
    assert result.reason == "generator made empty showers: 40 of 40 in member 0"
    row = {**result.as_row(), "id": "i00g000c01", "ranks": [0, 1], "wall_s": 2.0}
    line = Tally(4, []).line(row, eta=0.0)
    assert "ok, fitness 56.0000 (generator made empty showers: 40 of 40 in member 0) in" in line
    fine = Evaluation("ok", float("inf"))
    _add_scores(fine, [MemberScore(12.0, 0, 40)], beta=0.0)
    assert fine.reason == ""
    row = {**fine.as_row(), "id": "i00g000c00", "ranks": [0], "wall_s": 2.0}
    assert "ok, fitness 12.0000 in 2.0 s" in Tally(4, []).line(row, eta=0.0)
