"""Pruning without MPI: the config's bad input, the rung points, the successive-halving rule,
an island's rung history, and Optuna's pruners made from the config."""

from __future__ import annotations

import math

import optuna
import pytest
import yaml

from evogan.config.base import validate
from evogan.config.search import SearchConfig
from evogan.errors import ConfigError
from evogan.search.optuna_backend import make_pruner
from evogan.search.rungs import RungHistory, prune_reason, rung_key, rung_plan
from tests.conftest import REPO

TINY = REPO / "configs" / "arch_search_tiny.yaml"


def _config(pruning: dict, budget: dict | None = None) -> SearchConfig:
    raw = yaml.safe_load(TINY.read_text())
    raw["pruning"] = pruning
    if budget is not None:
        raw["budget"] = budget
    return validate(SearchConfig, raw, source="search.yaml")


def test_bad_reduction_factor_and_min_budget_are_one_line_errors() -> None:
    with pytest.raises(ConfigError) as info:
        _config({"kind": "successive_halving", "reduction_factor": 1})
    message = str(info.value)
    assert "\n" not in message
    assert "pruning.reduction_factor = 1" in message and "greater than or equal to 2" in message
    with pytest.raises(ConfigError) as info:
        _config({"kind": "hyperband", "min_budget": 10}, {"kind": "steps", "amount": 4})
    message = str(info.value)
    assert "\n" not in message
    assert "pruning.min_budget = 10" in message and "<= budget.amount = 4" in message


def test_rung_points_grow_by_the_factor_up_to_the_budget() -> None:
    assert rung_plan(_config({"kind": "none"})) is None
    plan = rung_plan(
        _config(
            {"kind": "successive_halving", "min_budget": 1, "reduction_factor": 2},
            {"kind": "steps", "amount": 8},
        )
    )
    assert plan.points == (1, 2, 4, 8) and plan.rungs == (1, 2, 4) and plan.unit == 1
    plan = rung_plan(
        _config(
            {"kind": "successive_halving", "min_budget": 2, "reduction_factor": 2},
            {"kind": "steps", "amount": 6},
        )
    )
    assert plan.points == (2, 4, 6) and plan.unit == 2  # epochs of 2 steps: rungs at ends
    plan = rung_plan(_config({"kind": "hyperband"}, {"kind": "epochs", "amount": 9}))
    assert plan.points == (1, 3, 9)  # default min_budget: amount / factor^2
    plan = rung_plan(
        _config(
            {"kind": "successive_halving", "min_budget": 0.5, "reduction_factor": 2},
            {"kind": "seconds", "amount": 3},
        )
    )
    assert plan.points == (0.5, 1.0, 2.0, 3.0)
    assert [rung_key(p) for p in plan.points] == ["0.5", "1", "2", "3"]


def test_only_the_best_fraction_of_a_rung_survives() -> None:
    assert prune_reason(1.0, [], 3, 0, 1, "steps") is None  # the first always goes on
    assert prune_reason(2.0, [1.0], 3, 0, 1, "steps") is not None  # 1 of 2 survives
    assert prune_reason(0.5, [1.0], 3, 0, 1, "steps") is None
    # six earlier scores and this one: the best 7 // 3 = 2 survive
    earlier = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert prune_reason(1.5, earlier, 3, 0, 1, "steps") is None
    reason = prune_reason(2.5, earlier, 3, 1, 4, "epochs")
    assert reason.startswith("pruned at rung 1 (4 epochs): score 2.5000")
    assert prune_reason(math.nan, [1.0], 2, 0, 1, "steps") is not None


def test_island_history_records_every_candidate_but_prunes_children_only() -> None:
    history = RungHistory(2, "steps")
    history.add_row({"intermediate": {"1": 1.0, "4": 0.5}})  # from the table on resume
    parent = history.decider(prunable=False)
    assert parent(0, 1.0, 9.0) is None  # a first-generation candidate is never pruned
    child = history.decider(prunable=True)
    assert child(0, 1.0, 5.0) is not None  # scores at "1": 1.0, 9.0 and 5.0: one survives
    assert child(0, 1.0, 0.1) is None
    assert history.scores["1"] == [1.0, 9.0, 5.0, 0.1]


def test_optuna_pruners_follow_the_config() -> None:
    steps = {"kind": "steps", "amount": 8}
    none = make_pruner(_config({"kind": "none"}, steps))
    assert isinstance(none, optuna.pruners.NopPruner)
    sha = make_pruner(
        _config({"kind": "successive_halving", "min_budget": 2, "reduction_factor": 2}, steps)
    )
    assert isinstance(sha, optuna.pruners.SuccessiveHalvingPruner)
    assert sha._min_resource == 2 and sha._reduction_factor == 2
    hyperband = make_pruner(_config({"kind": "hyperband", "min_budget": 1}, steps))
    assert isinstance(hyperband, optuna.pruners.HyperbandPruner)
    assert hyperband._max_resource == 8 and hyperband._reduction_factor == 3
