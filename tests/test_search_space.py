"""Search space: genomes, conditional per-block genes, repair of invalid shapes, Optuna suggest."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import optuna
import pytest

from evogan.config import load_config
from evogan.config.search import GeneConfig, SearchConfig
from evogan.errors import ConfigError
from evogan.search import Space, resolve_base, weight_count
from evogan.search.fitness import memory_estimate_mb, precheck
from evogan.search.journal import trial_params
from tests.test_search_campaign import WINDOW_KERNEL

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "arch_search_tiny.yaml"


@pytest.fixture
def config() -> SearchConfig:
    return resolve_base(load_config(TINY), TINY)


@pytest.fixture
def space(config: SearchConfig) -> Space:
    return Space(config.space, config.spec)


@pytest.fixture
def bad_space(config: SearchConfig) -> Space:
    """The tiny space with a gene one of whose values cannot make the spec's window."""
    return Space([*config.space, GeneConfig(**WINDOW_KERNEL)], config.spec)


def test_default_genome_rebuilds_the_base_spec(space: Space, config: SearchConfig) -> None:
    spec = space.spec(space.default())
    assert spec.model_dump(exclude={"name"}) == config.spec.model_dump(exclude={"name"})


def test_blocks_gene_repeats_the_template_with_per_block_values(space: Space) -> None:
    genome = space.default()
    genome.update(d_blocks=2, d_filters=[3, 5], d_dropout=[0.1, 0.25])
    spec = space.spec(genome)
    assert [b.filters for b in spec.discriminator] == [3, 5]
    assert [b.dropout for b in spec.discriminator] == [0.1, 0.25]
    genome["d_blocks"] = 1  # the second block's genes become inactive, not lost
    assert space.active(genome)["d_filters"] == [3]
    assert genome["d_filters"] == [3, 5]
    assert len(space.spec(genome).discriminator) == 1


def test_invalid_shape_is_found_and_repaired_to_the_nearest_valid_genome(
    bad_space: Space,
) -> None:
    genome = bad_space.default()
    genome.update(g_filters=6, latent_size=24, g_last_kernel=[3, 3, 3])
    reason = bad_space.check(genome)
    assert reason is not None and "generator block 2 of 2" in reason
    fixed = bad_space.repair(genome)
    assert fixed is not None and bad_space.check(fixed) is None
    assert fixed["g_last_kernel"] == [1, 1, 1]
    assert (fixed["g_filters"], fixed["latent_size"]) == (6, 24)  # only the culprit was reset


def test_samples_and_mutations_stay_in_range(space: Space, bad_space: Space) -> None:
    rng = np.random.default_rng(3)
    genomes = [space.sample(rng) for _ in range(50)]
    genomes += [space.mutate(g, rng, 0.3) for g in genomes]
    for genome in genomes:
        assert genome["latent_size"] in (8, 16, 24)
        assert 1e-4 <= genome["g_lr"] <= 1e-2
        assert genome["d_blocks"] in (1, 2)
        assert all(2 <= f <= 6 for f in genome["d_filters"])
    assert all(space.check(g) is None for g in genomes)  # no gene changes the window's shape
    assert any(bad_space.check(bad_space.sample(rng)) is not None for _ in range(20))
    mutated = space.mutate(genomes[0], rng, 0.0)
    assert mutated != genomes[0]  # at least one gene always moves


def test_crossover_keeps_block_counts_with_their_values(space: Space) -> None:
    rng = np.random.default_rng(0)
    a, b = space.default(), space.default()
    a.update(d_blocks=1, d_filters=[2, 2])
    b.update(d_blocks=2, d_filters=[6, 6])
    for _ in range(20):
        child, other = space.crossover(a, b, rng)
        for genome in (child, other):
            assert genome["d_filters"] == ([2, 2] if genome["d_blocks"] == 1 else [6, 6])


def test_optuna_suggest_is_define_by_run(space: Space) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen_blocks = set()
    for _ in range(12):
        trial = study.ask()
        genome = space.suggest(trial)
        blocks = genome["d_blocks"]
        seen_blocks.add(blocks)
        per_block = {k for k in trial.params if k.startswith("d_filters_")}
        assert per_block == {f"d_filters_{k}" for k in range(blocks)}
        assert isinstance(genome["g_kernel"], list)
        study.tell(trial, 1.0)
    assert seen_blocks == {1, 2}


def test_the_base_genome_is_the_base_spec_and_an_optuna_trial_asks_it_back(
    space: Space, config: SearchConfig
) -> None:
    base = space.base_genome()
    spec = space.spec(base)
    assert spec.model_dump(exclude={"name"}) == config.spec.model_dump(exclude={"name"})
    params, _ = trial_params(space.active(base), space)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    study.enqueue_trial(params)
    assert space.active(space.suggest(study.ask())) == space.active(base)


def test_a_base_value_a_gene_cannot_hold_is_refused_in_one_line(config: SearchConfig) -> None:
    narrow = [g if g.name != "g_lr" else g.model_copy(update={"low": 0.01}) for g in config.space]
    assert config.spec.g_lr < 0.01
    with pytest.raises(ConfigError) as caught:
        Space(narrow, config.spec).base_genome()
    assert str(caught.value) == (
        f"start_from_base: gene g_lr cannot hold the base spec's g_lr = {config.spec.g_lr} (its "
        f"range [0.01, {narrow[[g.name for g in narrow].index('g_lr')].high}]); add the value "
        "to the gene or set start_from_base: false"
    )
    assert Space(narrow, config.spec).default()["g_lr"] == 0.01  # repair's nearest, not the base


def test_sizes_and_memory_precheck(config: SearchConfig, space: Space) -> None:
    spec = space.spec(space.default())
    assert weight_count(spec) > 1000
    assert memory_estimate_mb(spec, 8) > 0
    assert precheck(config, spec) is None
    tight = config.model_copy(
        update={"budget": config.budget.model_copy(update={"max_memory_mb": 1e-3})}
    )
    refused = precheck(tight, spec)
    assert refused is not None and refused.status == "memory" and math.isinf(refused.fitness)


@pytest.mark.parametrize(
    ("gene", "message"),
    [
        ({"name": "x", "type": "int", "path": "latent_size", "low": 9, "high": 3}, "low <= high"),
        ({"name": "x", "type": "float", "path": "nope.key", "low": 1, "high": 2}, "path must"),
        (
            {
                "name": "x",
                "type": "int",
                "per_block": "zz",
                "field": "filters",
                "low": 1,
                "high": 2,
            },
            "per_block must name a blocks gene",
        ),
    ],
)
def test_bad_genes_fail_with_one_line(config: SearchConfig, gene: dict, message: str) -> None:
    from evogan.config.base import validate

    raw = config.model_dump(mode="json")
    raw["space"] = [gene]
    with pytest.raises(ConfigError, match=message):
        checked = validate(SearchConfig, raw)
        Space(checked.space, checked.spec)
