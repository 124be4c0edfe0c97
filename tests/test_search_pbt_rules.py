"""Population Based Training without MPI: the config's bad input, the tails of the population,
the exploit/explore rule, the perturbation and the lineage."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from evogan.config.base import validate
from evogan.config.search import PbtConfig, SearchConfig
from evogan.errors import ConfigError
from evogan.search import Space, resolve_base
from evogan.search.pbt import (
    exploit_explore,
    lineage,
    perturb,
    quantile_count,
    segment_count,
)
from tests.conftest import REPO

TINY = REPO / "configs" / "arch_search_tiny.yaml"
GENES = [
    {"name": "g_lr", "type": "float", "path": "g_lr", "low": 1e-4, "high": 1e-2, "log": True},
    {"name": "d_lr", "type": "float", "path": "d_lr", "low": 1e-4, "high": 1e-2, "log": True},
    {"name": "batch", "type": "int", "path": "batch_size", "low": 2, "high": 16, "step": 2},
    {"name": "steps", "type": "categorical", "path": "generator_steps", "choices": [1, 2, 3]},
    {"name": "energy", "type": "float", "path": "loss_weights.energy", "low": 0.01, "high": 1.0},
]


def _config(**changes) -> SearchConfig:
    raw = yaml.safe_load(TINY.read_text())
    raw.update(backend="pbt", space=GENES, base=str(REPO / "configs" / "gan3d_tiny.yaml"))
    raw["budget"] = {"kind": "steps", "amount": 4}
    raw["pbt"] = {"interval": 2}
    for key, value in changes.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return validate(SearchConfig, raw, source="search.yaml")


def _error(**changes) -> str:
    with pytest.raises(ConfigError) as info:
        _config(**changes)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_bad_pbt_input_is_refused_in_one_line_naming_key_and_value() -> None:
    assert segment_count(_config()) == 2
    message = _error(pbt={"interval": 3})
    assert "pbt.interval = 3" in message and "divide budget.amount = 4 (steps)" in message
    message = _error(pbt={"interval": 8})
    assert "pbt.interval = 8" in message
    message = _error(pbt={"quantile": 0.7})
    assert "pbt.quantile = 0.7" in message and "0.5" in message
    message = _error(pbt={"factors": [0.8, -1.0]})
    assert "pbt.factors = [0.8, -1.0]" in message and "> 0" in message
    message = _error(pbt={"perturb": ["g_lr", "latent"]})
    assert "pbt.perturb = ['g_lr', 'latent']" in message and "'latent' is no gene" in message
    message = _error(pruning={"kind": "successive_halving"})
    assert "pruning.kind = 'successive_halving'" in message and "use none" in message
    architecture = [*GENES, {"name": "latent", "type": "int", "path": "latent_size", "low": 8}]
    architecture[-1]["high"] = 24
    message = _error(space=architecture)
    assert "space gene latent (path = 'latent_size')" in message and "g_lr, d_lr" in message


def test_a_population_of_one_rank_group_is_refused() -> None:
    config = _config(ranks_per_group=2)
    config.check_ranks(4)  # two groups: fine
    with pytest.raises(ConfigError) as info:
        config.check_ranks(2)
    message = str(info.value)
    assert "\n" not in message
    assert "ranks_per_group = 2 on 2 rank(s) gives 1" in message and "at least 2" in message
    assert "mpirun -n 4" in message


def test_tails_hold_the_quantile_rounded_up_but_at_most_half() -> None:
    assert quantile_count(2, 0.25) == 1
    assert quantile_count(4, 0.25) == 1
    assert quantile_count(8, 0.25) == 2
    assert quantile_count(3, 0.5) == 1
    assert quantile_count(10, 0.5) == 5


def _space(config: SearchConfig) -> Space:
    resolved = resolve_base(config)
    return Space(resolved.space, resolved.spec)


def test_the_worst_and_the_failed_copy_one_of_the_best() -> None:
    config = _config()
    space = _space(config)
    genomes = [space.sample(np.random.default_rng(w)) for w in range(8)]
    fitness = [5.0, 1.0, 7.0, 2.0, 6.0, 8.0, 3.0, 4.0]
    exploits = exploit_explore(fitness, genomes, space, config.pbt, np.random.default_rng(0))
    assert set(exploits) == {2, 5}  # the worst quarter (2 of 8)
    assert all(e.source in (1, 3) for e in exploits.values())  # from the best quarter
    assert exploits == exploit_explore(
        fitness, genomes, space, config.pbt, np.random.default_rng(0)
    )  # the same stream decides the same on every group leader
    fitness = [math.inf, math.inf, 3.0, 4.0]  # the failed copy, also beyond the worst quarter
    exploits = exploit_explore(fitness, genomes[:4], space, config.pbt, np.random.default_rng(1))
    assert set(exploits) == {0, 1} and {e.source for e in exploits.values()} == {2}
    nothing = exploit_explore(
        [math.inf] * 4, genomes[:4], space, config.pbt, np.random.default_rng()
    )
    assert nothing is None  # no worker to copy from


def test_perturbation_scales_within_bounds_or_redraws() -> None:
    config = _config()
    space = _space(config)
    genome = {"g_lr": 1e-3, "d_lr": 9e-3, "batch": 8, "steps": 2, "energy": 0.5}
    up = PbtConfig(factors=[1.2], resample_probability=0.0)
    child, moves = perturb(genome, space, up, np.random.default_rng(0))
    assert moves == {name: 1.2 for name in genome}
    assert child["g_lr"] == pytest.approx(1.2e-3) and child["d_lr"] == 1e-2  # clipped at high
    assert child["batch"] == 10  # 9.6 on the step of 2
    assert child["steps"] == 3 and child["energy"] == pytest.approx(0.6)  # next choice up
    down = PbtConfig(factors=[0.8], resample_probability=0.0, perturb=["batch", "steps"])
    child, moves = perturb({**genome, "batch": 2}, space, down, np.random.default_rng(0))
    assert set(moves) == {"batch", "steps"} and child["g_lr"] == genome["g_lr"]
    assert child["batch"] == 2 and child["steps"] == 1
    child, moves = perturb({**genome, "batch": 4}, space, down, np.random.default_rng(0))
    assert child["batch"] == 2  # 3.2 rounds back to 4 on the step: an integer moves a step
    redraw = PbtConfig(resample_probability=1.0)
    child, moves = perturb(genome, space, redraw, np.random.default_rng(3))
    assert set(moves.values()) == {"resample"}
    assert space.check(child) is None and 1e-4 <= child["g_lr"] <= 1e-2


def test_lineage_lists_every_copy_by_worker() -> None:
    copy = {"from": "w00s000", "from_worker": 0, "perturbation": {"g_lr": 0.8}}
    rows = [
        {"id": "w00s000", "worker": 0, "segment": 0, "exploit": None},
        {"id": "w01s001", "worker": 1, "segment": 1, "exploit": copy},
        {"id": "w01s000", "worker": 1, "segment": 0, "exploit": None},
        {"id": "i00g000c00"},  # another backend's row
    ]
    assert lineage(rows) == {"w00": [], "w01": [{"segment": 1, **copy}]}
