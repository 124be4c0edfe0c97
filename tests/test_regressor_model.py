"""The regressor network: batched evaluation of many genomes equals the module, one by one."""

from __future__ import annotations

import pytest
import torch

from evogan.config.regressor import RegressorModelConfig
from evogan.engine import GenerationContext
from evogan.errors import ConfigError
from evogan.regressor.data import RegressorData, epoch_indices, mape
from evogan.regressor.network import (
    RegressorLayout,
    RegressorNet,
    batched_predict,
    functional_forward,
    initial_weights,
    load_regressor,
    unflatten,
)
from evogan.regressor.problem import RegressorProblem
from evogan.store import save_weights


def _layout(**kwargs) -> RegressorLayout:
    return RegressorLayout.from_config(RegressorModelConfig(**kwargs), (1, 51, 25))


@pytest.mark.parametrize(
    "options",
    [{}, {"bias": False}, {"pooling": "max"}, {"pool": 3, "kernel": 3, "filters": 4}],
)
def test_batched_predict_matches_each_network(options) -> None:
    layout = _layout(**options)
    generator = torch.Generator().manual_seed(0)
    genomes = torch.randn(5, layout.size, generator=generator) * 0.1
    x = torch.rand(11, 1, 51, 25, generator=generator)
    batched = batched_predict(layout, genomes, x, chunk=4)
    for genome, row in zip(genomes, batched, strict=True):
        net = RegressorNet.from_genome(layout, genome)
        torch.testing.assert_close(row, net(x).detach(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(functional_forward(layout, genome, x), net(x))
        assert torch.equal(net.genome(), genome)


@pytest.mark.parametrize("options", [{}, {"bias": False}, {"pool": 3, "kernel": 3, "filters": 4}])
def test_folded_average_pooling_gives_the_layers_outputs_and_gradients(options) -> None:
    """The forward runs average pooling and the linear layer as one folded product; values
    and gradients are those of Conv2d -> ReLU -> AvgPool2d -> Linear, cropped rows included."""
    layout = _layout(**options)
    generator = torch.Generator().manual_seed(3)
    genome = (torch.randn(layout.size, generator=generator) * 0.1).requires_grad_()
    x = torch.rand(6, 1, 51, 25, generator=generator)
    y = torch.rand(6, generator=generator) + 0.5
    views = {name: view[0] for name, view in unflatten(layout, genome.reshape(1, -1)).items()}
    hidden = torch.relu(torch.conv2d(x, views["conv.weight"], views.get("conv.bias")))
    pooled = torch.nn.functional.avg_pool2d(hidden, layout.pool).flatten(1)
    layers = torch.nn.functional.linear(pooled, views["linear.weight"], views.get("linear.bias"))
    (expected,) = torch.autograd.grad(mape(layers.squeeze(1), y), genome)
    prediction = functional_forward(layout, genome, x)
    (gradient,) = torch.autograd.grad(mape(prediction, y), genome)
    torch.testing.assert_close(prediction, layers.squeeze(1).detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gradient, expected, rtol=1e-5, atol=1e-7)


def test_default_network_matches_the_ga_study() -> None:
    layout = _layout()
    assert layout.shapes["conv.weight"] == (8, 1, 5, 5)
    assert layout.pooled_shape == (23, 10)
    assert layout.size == 8 * 25 + 8 + 8 * 23 * 10 + 1
    assert layout.flops_per_sample() == 2 * 8 * 25 * 47 * 21 + 2 * 8 * 23 * 10


@pytest.mark.parametrize(
    ("options", "message"),
    [({"kernel": 30}, "model.kernel must not exceed"), ({"pool": 30}, "model.pool must not")],
)
def test_networks_that_do_not_fit_the_input_are_config_errors(options, message) -> None:
    with pytest.raises(ConfigError, match=message):
        _layout(**options)


def _summed_energy_problem(events: int, generator: torch.Generator) -> RegressorProblem:
    """Random images whose target is their summed intensity, batch 16."""
    x = torch.rand(events, 1, 51, 25, generator=generator)
    y = x.sum(dim=(1, 2, 3)) / 300
    return RegressorProblem(_layout(), RegressorData(x, y, y * 100), batch_size=16)


def test_problem_scores_all_candidates_in_one_call_and_mutates(tmp_path) -> None:
    generator = torch.Generator().manual_seed(1)
    problem = _summed_energy_problem(40, generator)
    layout, x, y = problem.layout, problem.train.x, problem.train.y
    genomes = problem.initial_genomes(6, generator)
    assert torch.all(genomes[:, 200:208] == 0)  # conv biases start at 0 (Table 1)
    fitness = problem.evaluate(genomes, (x, y))
    expected = torch.stack([mape(RegressorNet.from_genome(layout, g)(x), y) for g in genomes])
    torch.testing.assert_close(fitness, expected.detach(), rtol=1e-4, atol=1e-6)
    batches = list(problem.batches(0, generator))
    assert len(batches) == 2 and all(next(iter(b)).shape == (16, 1, 51, 25) for b in batches)
    for batch in batches:  # the kernel reads the events in place: same as the gathered copy
        torch.testing.assert_close(
            problem.evaluate(genomes, batch), problem.evaluate(genomes, tuple(batch))
        )
    children = problem.mutate(genomes[0], 3, 77, GenerationContext(0, 0, 0.01, 0.1))
    assert ((children != genomes[0]).sum(dim=1) == round(0.01 * layout.size)).all()


def test_example_losses_are_the_fitness_event_by_event() -> None:
    """A staged re-evaluation scores parts of one sample: the parts' per-event errors are the
    network's, and their mean over the whole sample is the fitness, bit for bit."""
    generator = torch.Generator().manual_seed(2)
    problem = _summed_energy_problem(60, generator)
    layout, x, y = problem.layout, problem.train.x, problem.train.y
    genomes = problem.initial_genomes(2, generator)
    sample = problem.sample(40, generator)
    parts = [problem.example_losses(genomes, sample, a, b) for a, b in ((0, 10), (10, 40))]
    assert [p.shape for p in parts] == [(2, 10), (2, 30)]
    whole = torch.cat(parts, dim=1)
    assert torch.equal(whole.mean(dim=1), problem.evaluate(genomes, sample))
    nets = [RegressorNet.from_genome(layout, g) for g in genomes]
    x_sample, y_sample = sample
    with torch.no_grad():
        expected = torch.stack([(net(x_sample) - y_sample).abs() / y_sample for net in nets])
    torch.testing.assert_close(whole, expected, rtol=1e-4, atol=1e-6)
    head = problem.example_losses(genomes, (x, y), 0, 5)
    torch.testing.assert_close(head, problem.example_losses(genomes, (x[:5], y[:5]), 0, 5))


def test_saved_model_loads_without_code_and_predicts_the_same(tmp_path) -> None:
    layout = _layout()
    net = RegressorNet.from_genome(layout, torch.randn(layout.size) * 0.05)
    path = save_weights(tmp_path / "m.h5", net.state_dict(), {"model": layout.to_meta()})
    loaded = load_regressor(path)
    x = torch.rand(3, 1, 51, 25)
    assert torch.equal(loaded(x), net(x))


def test_rmsprop_starts_from_the_ga_initialisation_and_sees_the_ga_batches() -> None:
    layout = _layout()
    train = RegressorData(torch.rand(50, 1, 51, 25), torch.rand(50) + 0.5, torch.rand(50))
    problem = RegressorProblem(layout, train, batch_size=16)
    first, second = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(initial_weights(layout, 2, first), problem.initial_genomes(2, second))
    indices = list(epoch_indices(len(train), 16, first))
    batches = list(problem.batches(0, second))
    assert len(indices) == len(batches) == 3
    assert all(torch.equal(i, b.index) for i, b in zip(indices, batches, strict=True))
