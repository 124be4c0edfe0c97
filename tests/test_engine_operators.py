"""Mutation operators, schedules and seeded streams of the evolution engine."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evogan.engine import (
    make_schedule,
    mutated_count,
    mutation_mask,
    operators,
    point_mutation,
    replace_mutation,
)
from evogan.engine.operators import splitmix
from evogan.errors import ConfigError
from evogan.seeding import derive_seed, torch_generator


def _seed(step: int = 0) -> int:
    """A 64-bit step seed, as islands derive them (splitmix of stream key and generation)."""
    return splitmix(12345, step)


def test_point_mutation_changes_expected_fraction_with_expected_magnitude() -> None:
    size, rate, power, count = 10_000, 0.1, 0.5, 8
    parent = torch.randn(size)
    children = point_mutation(parent, count, rate, power, _seed())
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
    mask = mutation_mask(50, 10, seed=1, children=range(4000))
    assert mask.shape == (4000, 50) and (mask.sum(axis=1) == 10).all()
    frequency = mask.mean(axis=0)
    assert np.all(np.abs(frequency - 0.2) < 0.03)
    assert mutated_count(2049, 0.001) == 2  # round(2.049)
    assert mutated_count(100, 0.001) == 1  # a child always changes
    assert mutated_count(10, 1.0) == 10
    with pytest.raises(ValueError, match="mutation rate"):
        mutated_count(10, 0.0)


@pytest.mark.parametrize("rate", [1.0, 0.1, 0.001])
@pytest.mark.parametrize("operator", [point_mutation, replace_mutation])
def test_one_child_alone_equals_its_row_of_the_whole_draw(operator, rate) -> None:
    parent = torch.randn(777)
    children = operator(parent, 6, rate, 0.3, _seed(4))
    for child in (0, 5):
        alone = operator(parent, 6, rate, 0.3, _seed(4), only=child)
        assert torch.equal(alone[0], children[child])
    with pytest.raises(ValueError, match="child 6 does not exist"):
        operator(parent, 6, rate, 0.3, _seed(4), only=6)


@pytest.mark.parametrize("rate", [1.0, 0.05, 0.001])
def test_point_mutation_kernel_and_numpy_twin_agree_bit_for_bit(rate, monkeypatch) -> None:
    if operators.kernel() is None:
        pytest.skip("no C compiler: only the numpy path exists here")
    parent = torch.randn(3001)
    compiled = point_mutation(parent, 9, rate, 0.7, _seed(8))
    monkeypatch.setattr(operators, "kernel", lambda: None)
    assert torch.equal(point_mutation(parent, 9, rate, 0.7, _seed(8)), compiled)


def test_replace_mutation_draws_fresh_normal_weights() -> None:
    parent = torch.full((20_000,), 7.0)
    children = replace_mutation(parent, 4, 0.25, 0.3, _seed(2))
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


@pytest.mark.parametrize("native", [True, False])
def test_point_replay_equals_one_child_per_step(native, monkeypatch) -> None:
    if not native:
        monkeypatch.setattr(operators, "kernel", lambda: None)
    elif operators.kernel() is None:
        pytest.skip("no C compiler: only the numpy path exists here")
    draws = [(5, 1.0, 0.2), (3, 0.1, 0.5), (6, 0.01, 0.1), (1, 0.3, 0.05)]
    parent = torch.randn(401)
    expected = [parent]
    for step, (only, rate, power) in enumerate(draws):
        expected.append(point_mutation(expected[-1], 8, rate, power, _seed(step), only)[0])
    steps = [(_seed(step), 8, only, rate, power) for step, (only, rate, power) in enumerate(draws)]
    (final,) = operators.point_replay(parent, steps)
    assert torch.equal(final, expected[-1])
    kept = operators.point_replay(parent, steps, keep=[1, 3])  # and the genomes on the way
    assert all(torch.equal(a, b) for a, b in zip(kept, [*expected[1::2], final], strict=True))
    with pytest.raises(ValueError, match="child 8 does not exist"):
        operators.point_replay(parent, [(_seed(), 8, 8, 0.1, 0.1)])
    with pytest.raises(ValueError, match="ascending step counts"):
        operators.point_replay(parent, steps, keep=[3, 1])
