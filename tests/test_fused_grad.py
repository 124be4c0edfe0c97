"""The fused gradient path gives torch's layers' values and gradients, and steps aside where it
does not apply."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from evogan import native
from evogan.config.regressor import RegressorModelConfig
from evogan.regressor import fused_eval, fused_grad
from evogan.regressor.data import mape
from evogan.regressor.network import RegressorLayout, RegressorNet, functional_forward, unflatten

needs_compiler = pytest.mark.skipif(native.compiler() is None, reason="no C compiler ($CC or cc)")
LAYOUTS = [  # filters that fill a vector, padded rows, no biases, other pooling, two channels
    ((1, 51, 25), {}),
    ((1, 51, 25), {"bias": False}),
    ((1, 51, 25), {"pool": 3, "kernel": 3, "filters": 4}),
    ((2, 19, 14), {"pool": 4, "kernel": 4, "filters": 11}),
    ((1, 9, 45), {}),  # a CaloChallenge dataset-2 image: 9 radial bins x 45 layers
]


@pytest.fixture
def fresh_kernels():
    """Forget the loaded kernels before and after, so environment changes take effect."""
    fused_eval.kernel.cache_clear()
    fused_grad.kernel.cache_clear()
    yield
    fused_eval.kernel.cache_clear()
    fused_grad.kernel.cache_clear()


def _layout(input_shape, **options) -> RegressorLayout:
    return RegressorLayout.from_config(RegressorModelConfig(**options), input_shape)


def _draw(layout: RegressorLayout, events: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    genome = torch.randn(layout.size, generator=generator) * 0.1
    x = torch.rand(events, *layout.input_shape, generator=generator) ** 4 * 3
    y = torch.rand(events, generator=generator) + 0.5
    return genome, x, y


def _layers(layout: RegressorLayout, genome: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    views = {name: view[0] for name, view in unflatten(layout, genome.reshape(1, -1)).items()}
    hidden = F.relu(F.conv2d(x, views["conv.weight"], views.get("conv.bias")))
    pooled = F.avg_pool2d(hidden, layout.pool).flatten(1)
    return F.linear(pooled, views["linear.weight"], views.get("linear.bias")).squeeze(1)


@needs_compiler
@pytest.mark.parametrize(("input_shape", "options"), LAYOUTS)
def test_values_and_gradients_are_the_layers(input_shape, options) -> None:
    layout = _layout(input_shape, **options)
    genome, x, y = _draw(layout, 37, seed=1)
    genome.requires_grad_()
    assert fused_grad.applies(layout.pooling, x, genome)
    expected = _layers(layout, genome, x)
    (expected_grad,) = torch.autograd.grad(mape(expected, y), genome)
    prediction = functional_forward(layout, genome, x)
    (gradient,) = torch.autograd.grad(mape(prediction, y), genome)
    torch.testing.assert_close(prediction, expected.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gradient, expected_grad, rtol=1e-4, atol=1e-7)


@needs_compiler
def test_module_parameters_get_the_layers_gradients() -> None:
    """RMSprop trains the module: each parameter's gradient, and only the asked ones."""
    layout = _layout((1, 51, 25))
    genome, x, y = _draw(layout, 20, seed=2)
    net = RegressorNet.from_genome(layout, genome)
    net.linear.weight.requires_grad_(False)
    mape(net(x), y).backward()
    reference = RegressorNet.from_genome(layout, genome)
    hidden = F.relu(reference.conv(x))
    pooled = F.avg_pool2d(hidden, layout.pool).flatten(1)
    mape(reference.linear(pooled).squeeze(1), y).backward()
    assert net.linear.weight.grad is None
    for name in ("conv.weight", "conv.bias", "linear.bias"):
        torch.testing.assert_close(
            net.get_parameter(name).grad,
            reference.get_parameter(name).grad,
            rtol=1e-4,
            atol=1e-7,
        )


@needs_compiler
def test_threads_split_events_and_repeat_their_bits() -> None:
    layout = _layout((1, 51, 25))
    genome, x, y = _draw(layout, 50, seed=4)
    genome.requires_grad_()
    threads = torch.get_num_threads()
    gradients = {}
    try:
        for count in (1, 3, 3):
            torch.set_num_threads(count)
            (gradient,) = torch.autograd.grad(
                mape(functional_forward(layout, genome, x), y), genome
            )
            gradients.setdefault(count, []).append(gradient)
    finally:
        torch.set_num_threads(threads)
    scale = float(gradients[1][0].abs().max())  # the sums' order differs: rounding of the sum
    torch.testing.assert_close(gradients[3][0], gradients[1][0], rtol=1e-4, atol=1e-6 * scale)
    assert torch.equal(gradients[3][0], gradients[3][1])


@pytest.mark.parametrize(
    ("pooling", "dtype", "input_grad", "native_switch"),
    [("max", torch.float32, False, "1"), ("avg", torch.float64, False, "1"),
     ("avg", torch.float32, True, "1"), ("avg", torch.float32, False, "0")],
)  # fmt: skip
def test_torch_layers_serve_what_the_kernels_do_not(
    pooling, dtype, input_grad, native_switch, fresh_kernels, monkeypatch
) -> None:
    monkeypatch.setenv("EVOGAN_NATIVE", native_switch)
    layout = _layout((1, 51, 25), pooling=pooling)
    genome, x, y = _draw(layout, 9, seed=5)
    genome, x = genome.to(dtype).requires_grad_(), x.to(dtype).requires_grad_(input_grad)
    assert not fused_grad.applies(layout.pooling, x, genome)
    prediction = functional_forward(layout, genome, x)
    assert prediction.grad_fn.name() != "_FusedForwardBackward"
    mape(prediction, y.to(dtype)).backward()
    assert genome.grad is not None and bool(genome.grad.abs().sum() > 0)


@needs_compiler
def test_the_passes_refuse_shapes_that_do_not_fit() -> None:
    layout = _layout((1, 51, 25))
    genome, x, _ = _draw(layout, 4, seed=6)
    views = {name: view[0] for name, view in unflatten(layout, genome.reshape(1, -1)).items()}
    conv, bias, linear = views["conv.weight"], views["conv.bias"], views["linear.weight"]
    with pytest.raises(ValueError, match="do not fit together"):
        fused_grad.forward_pass(x[:, :, 0], conv, bias, linear, layout.pool)
    with pytest.raises(ValueError, match="do not fit together"):
        fused_grad.forward_pass(x.repeat(1, 2, 1, 1), conv, bias, linear, layout.pool)
    with pytest.raises(ValueError, match="the linear layer must have 1840 weights"):
        fused_grad.forward_pass(x, conv, bias, linear[:, :-1], layout.pool)
    step = fused_grad.forward_pass(x, conv, bias, linear, layout.pool)
    with pytest.raises(ValueError, match=r"grad must be \(4,\), one value per event"):
        fused_grad.conv_gradients(step, torch.ones(5))


@needs_compiler
def test_a_vmapped_population_keeps_torch_layers_and_vectorises() -> None:
    """ModuleProblem scores a population of RegressorNet weights under ``vmap``, which the
    C kernels cannot serve: the layers run there, vectorised, and agree with the module."""
    from evogan.engine import ModuleProblem

    layout = _layout((1, 12, 12), filters=4, kernel=3)
    generator = torch.Generator().manual_seed(7)
    x = torch.rand(32, 1, 12, 12, generator=generator)
    y = torch.rand(32, generator=generator) + 0.5
    problem = ModuleProblem(RegressorNet(layout), x, y, loss=mape)
    genomes = problem.initial_genomes(5, generator)
    fitness = problem.evaluate(genomes, (x, y))
    assert problem.vectorised
    for genome, value in zip(genomes, fitness, strict=True):
        net = RegressorNet.from_genome(layout, genome)
        torch.testing.assert_close(value, mape(net(x), y).detach(), rtol=1e-5, atol=1e-7)


@needs_compiler
def test_weights_changed_in_place_before_backward_are_an_error() -> None:
    """As with torch's layers: the backward would otherwise use the new weights silently."""
    layout = _layout((1, 51, 25))
    genome, x, y = _draw(layout, 8, seed=8)
    net = RegressorNet.from_genome(layout, genome)
    loss = mape(net(x), y)
    with torch.no_grad():
        net.conv.weight.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
