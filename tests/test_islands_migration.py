"""Migration topologies, immigration policies and the island's use of immigrants (one process)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from evogan.config import load_config
from evogan.errors import ConfigError
from evogan.islands.migration import (
    count_matrix,
    fully_connected,
    make_topology,
    random_neighbour,
    replace_worst,
    ring,
)


def test_topologies_name_neighbours_and_counts() -> None:
    rng = np.random.default_rng(0)
    assert ring(3, 4, rng, k=2) == {0: 2}
    assert ring(0, 1, rng) == {}
    assert fully_connected(1, 3, rng) == {0: 1, 2: 1}
    draws = {next(iter(random_neighbour(2, 5, rng))) for _ in range(200)}
    assert draws == {0, 1, 3, 4}
    table = count_matrix(make_topology("ring", 3), 4, rng)
    assert table.tolist() == [[0, 3, 0, 0], [0, 0, 3, 0], [0, 0, 0, 3], [3, 0, 0, 0]]
    explicit = [[0, 2, 0], [1, 0, 0], [0, 4, 0]]
    assert count_matrix(make_topology("matrix", matrix=explicit), 3, rng).tolist() == explicit


def test_random_matrix_is_the_same_for_the_same_generator_state() -> None:
    topology = make_topology("random", 1)
    first = count_matrix(topology, 6, np.random.default_rng(4))
    second = count_matrix(topology, 6, np.random.default_rng(4))
    assert np.array_equal(first, second) and (first.sum(axis=1) == 1).all()
    assert not np.diag(first).any()


@pytest.mark.parametrize(
    ("kind", "matrix", "message"),
    [
        ("matrix", [[0, 1], [1]], "must be square"),
        ("matrix", [[1, 0], [0, 0]], "diagonal must be 0"),
        ("matrix", None, "needs migration.matrix"),
        ("star", None, "topology = 'star' is not allowed"),
    ],
)
def test_bad_topologies_are_one_line_config_errors(kind, matrix, message) -> None:
    with pytest.raises(ConfigError, match=message):
        make_topology(kind, 1, matrix)


def test_matrix_of_the_wrong_island_count_is_refused() -> None:
    topology = make_topology("matrix", matrix=[[0, 1], [1, 0]])
    with pytest.raises(ConfigError, match="give an 3 x 3 matrix"):
        topology(0, 3, np.random.default_rng())


def test_replace_worst_keeps_the_best_and_the_size() -> None:
    population, fitness = replace_worst(
        ["a", "b", "c", "d"], [0.3, 0.9, 0.1, 0.5], ["x", "y"], [0.2, 0.4]
    )
    assert population == ["a", "c", "x", "y"] and fitness == [0.3, 0.1, 0.2, 0.4]


def test_config_sections_have_defaults_and_check_matrix(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("task: regressor\n")
    cfg = load_config(path)
    assert (cfg.migration.topology, cfg.migration.mode, cfg.migration.policy) == (
        "ring",
        "async",
        "compete",
    )
    assert cfg.islands.ranks_per_island == 1 and cfg.checkpoint.every > 0
    with pytest.raises(ConfigError, match="needs matrix"):
        load_config(path, ["migration.topology=matrix"])


@pytest.mark.parametrize("policy", ["compete", "replace_worst"])
def test_immigrants_join_the_next_generation(policy) -> None:
    from evogan.engine import PlusLambda, Streams
    from evogan.islands.island import Island
    from evogan.islands.migration import make_policy
    from tests.test_lineage import _problem

    problem = _problem()
    strategy = PlusLambda(
        problem, children=4, initial_parents=2, epochs=1, streams=Streams.derive(0)
    )
    island = Island(strategy, policy=make_policy(policy))
    ranked = iter([torch.arange(2, dtype=torch.float64)])

    def evaluate(genomes, batch):
        return next(ranked)

    problem.evaluate = evaluate  # the first generation: fitness by row
    strategy.step(None, 0)
    stranger = torch.zeros(problem.layout.size)
    island.immigrants = [(stranger, None), (stranger + 1, None)]
    seen = []

    def last_wins(genomes, batch):
        seen.append(genomes)
        fitness = torch.ones(genomes.shape[0], dtype=torch.float64)
        fitness[-1] = 0.0
        return fitness

    problem.evaluate = last_wins
    elite = strategy.elite
    strategy.step(None, 0)
    (candidates,) = seen
    assert candidates.shape[0] == (5 if policy == "replace_worst" else 7)
    assert torch.equal(candidates[0], elite)
    assert torch.equal(candidates[-2], stranger) and island.immigrants_used == 2
    assert torch.equal(strategy.elite, stranger + 1) and island.immigrant_wins == 1


def _refusal(path, overrides) -> str:
    with pytest.raises(ConfigError) as error:
        load_config(path, overrides)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_one_migration_shape_names_the_new_key_of_an_old_one(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("task: regressor\n")
    assert "unknown key migration.interval; it is now migration.every;" in _refusal(
        path, ["migration.interval=2"]
    )
    assert "unknown key migration.k; it is now migration.migrants;" in _refusal(
        path, ["migration.k=2"]
    )
    assert "migration.migrants = 0 is not allowed" in _refusal(path, ["migration.migrants=0"])
    cfg = load_config(path, ["migration.every=3", "migration.migrants=2"])
    assert (cfg.migration.every, cfg.migration.migrants) == (3, 2)


SEARCH = Path(__file__).parents[1] / "configs" / "arch_search_tiny.yaml"


def test_the_architecture_ga_keeps_its_defaults_and_refuses_what_it_cannot_use() -> None:
    cfg = load_config(SEARCH, ["ga.migration={topology: random}"])
    assert (cfg.ga.migration.every, cfg.ga.migration.policy) == (1, "replace_worst")
    assert cfg.ga.migration.migrants == 1
    for key, value in [
        ("topology", "matrix"),
        ("policy", "compete"),
        ("mode", "sync"),
        ("send", "weights"),
    ]:
        extra = ["ga.migration.matrix=[[0, 1], [1, 0]]"] if value == "matrix" else []
        message = _refusal(SEARCH, [f"ga.migration.{key}={value}", *extra])
        assert message.startswith(f"ga.migration.{key} = {value!r} is not allowed"), message
