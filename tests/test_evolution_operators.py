"""Mutation operators, schedules and seeded streams of the evolution engine."""

from __future__ import annotations

import pytest
import torch

from evogan.errors import ConfigError
from evogan.evolution import (
    derive_seed,
    make_schedule,
    mutated_count,
    mutation_mask,
    point_mutation,
    replace_mutation,
    torch_generator,
)


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_point_mutation_changes_expected_fraction_with_expected_magnitude() -> None:
    size, rate, power, count = 10_000, 0.1, 0.5, 8
    parent = torch.randn(size)
    children = point_mutation(parent, count, rate, power, _generator())
    delta = children - parent
    changed = delta != 0
    assert children.shape == (count, size)
    assert changed.sum(dim=1).tolist() == [1000] * count
    moved = delta[changed]
    assert moved.abs().max() <= power + 1e-6
    # |U(-mp, mp)| has mean mp/2 and the sign is symmetric
    assert moved.abs().mean().item() == pytest.approx(power / 2, rel=0.05)
    assert abs(moved.mean().item()) < 0.02
    # unchanged weights are bit-identical to the parent
    assert torch.equal(children[~changed], parent.expand(count, -1)[~changed])


def test_mutation_positions_are_uniform_and_never_zero() -> None:
    mask = mutation_mask(4000, 50, 0.2, _generator(1))
    frequency = mask.float().mean(dim=0)
    assert torch.all((frequency - 0.2).abs() < 0.03)
    assert mutated_count(2049, 0.001) == 2  # round(2.049)
    assert mutated_count(100, 0.001) == 1  # a child always changes
    assert mutated_count(10, 1.0) == 10
    with pytest.raises(ValueError, match="mutation rate"):
        mutated_count(10, 0.0)


def test_replace_mutation_draws_fresh_normal_weights() -> None:
    parent = torch.full((20_000,), 7.0)
    children = replace_mutation(parent, 4, 0.25, 0.3, _generator(2))
    fresh = children[children != 7.0]
    assert fresh.numel() == 4 * 5000
    assert fresh.mean().item() == pytest.approx(0.0, abs=0.01)
    assert fresh.std().item() == pytest.approx(0.3, rel=0.03)


def test_schedules_follow_the_ga_study() -> None:
    step = make_schedule("step", 0.1, [10, 20], factor=0.1)
    assert [step(e) for e in (0, 9, 10, 19, 20, 29)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01, 0.001, 0.001]
    )
    assert make_schedule("constant", 0.3)(25) == 0.3
    assert make_schedule("exponential", 1.0, gamma=0.5)(3) == pytest.approx(0.125)
    with pytest.raises(ConfigError, match="strictly increasing"):
        make_schedule("step", 0.1, [20, 10])


def test_streams_depend_on_every_key_and_only_on_them() -> None:
    assert derive_seed(0, "island", 0, "init") == derive_seed(0, "island", 0, "init")
    seeds = {derive_seed(r, "island", i, s) for r in (0, 1) for i in (0, 1) for s in ("a", "b")}
    assert len(seeds) == 8
    a = torch.rand(5, generator=torch_generator(3, "island", 1, "mutation"))
    b = torch.rand(5, generator=torch_generator(3, "island", 1, "mutation"))
    assert torch.equal(a, b)
