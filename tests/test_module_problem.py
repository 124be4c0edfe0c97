"""ModuleProblem: the engine's strategies on any torch module and one's own arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from evogan.engine import GenerationContext, Hybrid, PlusLambda, Streams
from evogan.engine.module_problem import ModuleProblem


def _data(samples: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(samples, 3))
    return x, x @ np.array([1.0, -2.0, 0.5]) + 0.3


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1), nn.Flatten(0))


def test_all_candidates_are_scored_in_one_vmapped_call_equal_to_each_module() -> None:
    x, y = _data()
    problem = ModuleProblem(_mlp(), x, y)
    genomes = problem.initial_genomes(5, torch.Generator().manual_seed(1))
    assert genomes.shape == (5, problem.size) == (5, 3 * 8 + 8 + 8 + 1)
    fitness = problem.evaluate(genomes, (problem.x, problem.y))
    assert problem.vectorised and fitness.shape == (5,)
    for genome, value in zip(genomes, fitness, strict=True):
        module = problem.to_module(genome)
        expected = F.mse_loss(module(torch.as_tensor(x, dtype=torch.float32)), problem.y)
        torch.testing.assert_close(value, expected.detach())
        assert torch.equal(problem.genome(module), genome)


def test_plus_lambda_fits_numpy_arrays_and_the_hybrid_takes_gradient_steps() -> None:
    x, y = _data()
    for strategy, options in ((PlusLambda, {}), (Hybrid, {"steps": 2, "lr": 1e-2})):
        problem = ModuleProblem(_mlp(), x, y, batch_size=16)
        start = float(problem.reference_fitness(problem.initial_genomes(1, Streams.derive(0).init)))
        evolution = strategy(problem, epochs=6, streams=Streams.derive(0), **options)
        result = evolution.run()
        assert result.generations == 6 * 4 and result.best_fitness < 0.5 * start
        assert float(problem.reference_fitness(result.best.unsqueeze(0))) == pytest.approx(
            result.best_fitness
        )
    assert evolution.gradient_steps == 2 * 24


def test_noise_aware_acceptance_and_step_adaptation_run_on_a_module() -> None:
    """The documented ``PlusLambda(..., reevaluation_events=..., adaptation=SuccessRule())``
    on a ModuleProblem: its re-evaluation batches come from :meth:`ModuleProblem.sample`."""
    from evogan import Reevaluation, SuccessRule

    x, y = _data()
    problem = ModuleProblem(_mlp(), x, y, batch_size=16)
    drawn = problem.sample(10, torch.Generator().manual_seed(2))
    assert drawn[0].shape == (10, 3) and len(torch.unique(drawn[1])) == 10
    assert problem.sample(100, torch.Generator())[0].shape == (64, 3)  # all, when fewer
    start = float(problem.reference_fitness(problem.initial_genomes(1, Streams.derive(0).init)))
    evolution = PlusLambda(
        problem,
        epochs=6,
        streams=Streams.derive(0),
        reevaluation_events=32,
        adaptation=SuccessRule(),
    )
    result = evolution.run()
    assert result.best_fitness < 0.5 * start
    assert isinstance(evolution.acceptance, Reevaluation)


class _ItemInForward(nn.Module):
    """A forward that vmap cannot run (a Python float from a tensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = 1.0 + 0.0 * self.linear.bias.sum().item()
        return self.linear(x).squeeze(1) * scale


def test_a_module_vmap_cannot_run_is_scored_in_a_loop_with_the_same_result() -> None:
    x, y = _data()
    problem = ModuleProblem(_ItemInForward(), x, y)
    genomes = problem.initial_genomes(3, torch.Generator().manual_seed(2))
    fitness = problem.evaluate(genomes, (problem.x, problem.y))
    assert not problem.vectorised
    for genome, value in zip(genomes, fitness, strict=True):
        module = problem.to_module(genome)
        torch.testing.assert_close(value, F.mse_loss(module(problem.x), problem.y).detach())


def test_integer_targets_and_a_custom_loss_and_mutation_and_batches() -> None:
    rng = np.random.default_rng(0)
    x, labels = rng.normal(size=(30, 4)).astype(np.float32), rng.integers(0, 3, 30)
    torch.manual_seed(0)
    problem = ModuleProblem(nn.Linear(4, 3), x, labels, loss=F.cross_entropy, batch_size=8)
    assert problem.y.dtype == torch.int64 and problem.x.dtype == torch.float32
    batches = list(problem.batches(0, torch.Generator().manual_seed(0)))
    assert [len(b[1]) for b in batches] == [8, 8, 8]  # full batches only
    parent = problem.genome()
    context = GenerationContext(0, 0, 0.2, 0.1)
    children = problem.mutate(parent, 4, 7, context)
    assert ((children != parent).sum(dim=1) == round(0.2 * problem.size)).all()
    assert torch.equal(problem.replay(parent, [(7, 4, 2, 0.2, 0.1)])[-1], children[2])
    assert problem.evaluate(children, batches[0]).shape == (4,)


def test_inconsistent_arguments_are_refused() -> None:
    x, y = _data()
    with pytest.raises(ValueError, match="same number of rows"):
        ModuleProblem(_mlp(), x, y[:10])
    with pytest.raises(ValueError, match="batch_size must be between 1 and the 64 samples"):
        ModuleProblem(_mlp(), x, y, batch_size=65)
    with pytest.raises(ValueError, match="no parameters"):
        ModuleProblem(nn.ReLU(), x, y)
