"""The least-squares readout start: exact on linear targets, keeps the convolution, the same
bits on any thread count (island ranks rebuild initial draws from seeds)."""

from __future__ import annotations

import pytest
import torch

from evogan.config.regressor import RegressorModelConfig
from evogan.engine import Streams
from evogan.regressor.data import RegressorData, mape
from evogan.regressor.network import RegressorLayout, batched_predict, initial_weights, unflatten
from evogan.regressor.problem import RegressorProblem
from evogan.regressor.readout import ReadoutStart, fit_readouts, relative_ridge
from evogan.regressor.rmsprop import train_rmsprop


@pytest.mark.parametrize(
    ("events", "width"),  # fewer events than features (dual), more (primal); Gram matrices of
    [(12, 30), (200, 30), (150, 400), (400, 150)],  # one and of several blocks
)
def test_relative_ridge_fits_a_linear_target_exactly(events: int, width: int) -> None:
    generator = torch.Generator().manual_seed(1)
    features = torch.rand(events, width, generator=generator, dtype=torch.float64)
    truth = torch.rand(width, generator=generator, dtype=torch.float64)
    target = features @ truth
    kept = features.clone()
    weights = relative_ridge(features, target, ridge=1e-12)
    assert torch.equal(features, kept)
    torch.testing.assert_close(features @ weights, target, rtol=1e-6, atol=0)
    if events > width:
        torch.testing.assert_close(weights, truth, rtol=1e-5, atol=1e-6)


def test_relative_ridge_gives_dead_features_zero_weights() -> None:
    weights = relative_ridge(torch.zeros(5, 7), torch.ones(5), ridge=1e-4)
    assert torch.equal(weights, torch.zeros(7, dtype=torch.float64))


def _data(events: int = 96) -> RegressorData:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(events, 1, 14, 10, generator=generator) ** 3
    energy = 2 + 200 * x.sum(dim=(1, 2, 3)) / x[0].numel()
    return RegressorData(x, energy / 100, energy)


@pytest.mark.parametrize("options", [{}, {"bias": False}, {"pooling": "max"}])
def test_fitted_readouts_keep_the_convolution_and_predict_far_better(options) -> None:
    layout = RegressorLayout.from_config(
        RegressorModelConfig(filters=4, kernel=3, **options), (1, 14, 10)
    )
    data = _data()
    drawn = initial_weights(layout, 3, torch.Generator().manual_seed(2))
    fitted = fit_readouts(layout, drawn, data.x, data.y, ridge=1e-6)
    before, after = unflatten(layout, drawn), unflatten(layout, fitted)
    for name in before:
        assert torch.equal(before[name], after[name]) == name.startswith("conv.")
    errors = [mape(batched_predict(layout, g, data.x), data.y) for g in (drawn, fitted)]
    assert (errors[0] > 0.9).all() and (errors[1] < 0.1).all(), errors


def test_networks_fitted_together_get_the_bits_they_get_alone() -> None:
    """Ten networks span two feature batches; each network's fit depends on it alone."""
    layout = RegressorLayout.from_config(RegressorModelConfig(filters=4, kernel=3), (1, 14, 10))
    data = _data()
    drawn = initial_weights(layout, 10, torch.Generator().manual_seed(5))
    together = fit_readouts(layout, drawn, data.x, data.y, ridge=1e-4)
    for row in (0, 7, 8, 9):
        alone = fit_readouts(layout, drawn[row : row + 1], data.x, data.y, ridge=1e-4)
        assert torch.equal(alone[0], together[row])


@pytest.mark.slow
def test_the_fit_is_the_same_on_any_thread_count_and_restores_it() -> None:
    layout = RegressorLayout.from_config(RegressorModelConfig(), (1, 51, 25))  # the shipped one
    generator = torch.Generator().manual_seed(4)
    x = torch.rand(2000, 1, 51, 25, generator=generator) ** 3  # more events than features:
    # the primal solve of 1,841 unknowns, whose bits change with MKL's thread count
    data = RegressorData(x, x.mean(dim=(1, 2, 3)), x.mean(dim=(1, 2, 3)))
    drawn = initial_weights(layout, 2, generator)
    threads = torch.get_num_threads()
    fits = []
    for count in (1, 2):
        torch.set_num_threads(count)
        fits.append(fit_readouts(layout, drawn, data.x, data.y, ridge=1e-4))
        assert torch.get_num_threads() == count
    torch.set_num_threads(threads)
    assert torch.equal(fits[0], fits[1])


def test_problem_fits_its_initial_draw_on_a_sample_of_the_training_set() -> None:
    layout = RegressorLayout.from_config(RegressorModelConfig(filters=4, kernel=3), (1, 14, 10))
    data = _data()
    plain = RegressorProblem(layout, data, batch_size=16)
    fitted = RegressorProblem(layout, data, batch_size=16, readout=ReadoutStart(48, 1e-6))
    draws = [
        problem.initial_genomes(4, torch.Generator().manual_seed(7))
        for problem in (plain, fitted, fitted)
    ]
    assert torch.equal(draws[1], draws[2])  # the seed decides the sample and the fit
    conv = layout.shapes["conv.weight"]
    width = conv[0] * conv[1] * conv[2] * conv[3]
    assert torch.equal(draws[0][:, :width], draws[1][:, :width])
    scores = [plain.reference_fitness(draw) for draw in draws[:2]]
    assert (scores[1] < 0.1 * scores[0]).all(), scores


def test_rmsprop_starts_from_the_fitted_readout() -> None:
    layout = RegressorLayout.from_config(RegressorModelConfig(filters=4, kernel=3), (1, 14, 10))
    data = _data()
    start = ReadoutStart(48, 1e-6)
    result = train_rmsprop(
        layout, data, batch_size=16, epochs=1, lr=1e-12, streams=Streams.derive(5), readout=start
    )
    init = Streams.derive(5).init
    expected = start.apply(layout, initial_weights(layout, 1, init), data, init)[0]
    torch.testing.assert_close(result.net.genome(), expected, rtol=0, atol=1e-6)
    assert result.epochs[0]["reference_fitness"] < 0.1
