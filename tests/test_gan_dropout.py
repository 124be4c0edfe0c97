"""Seeded dropout under torch.compile: masks from a counter hash, no graph break
(evogan.gan3d.blocks.SeededDropout, counter_uniform)."""

from __future__ import annotations

import random

import torch

from evogan.gan3d.blocks import MASK32, SeededDropout, _times, counter_uniform
from evogan.gan3d.networks import build_models
from evogan.gan3d.precision import ForwardOptions
from evogan.gan3d.step import GanStep
from tests.gan_fixtures import tiny_spec, toy_showers

P = 0.2


def test_products_are_exact_modulo_two_to_the_32() -> None:
    rng = random.Random(0)
    values = [0, 1, MASK32, MASK32 - 1, 1 << 31] + [rng.getrandbits(32) for _ in range(1000)]
    for multiplier in (0x7FEB352D, 0x846CA68B):
        got = _times(torch.tensor(values, dtype=torch.int64), multiplier).tolist()
        assert got == [v * multiplier % (1 << 32) for v in values]


def test_counter_uniforms_are_uniform_independent_and_keyed() -> None:
    shape = torch.Size((64, 8, 20, 20, 10))  # 2 million cells, a 5-D activation
    first = counter_uniform(torch.tensor(7), shape, torch.device("cpu"))
    n = shape.numel()
    assert first.dtype == torch.float32 and first.min() >= 0.0 and first.max() < 1.0
    sigma = (P * (1 - P) / n) ** 0.5
    assert abs((first < P).float().mean().item() - P) < 5 * sigma
    for axis in range(1, 5):  # no lattice pattern along any axis: every slice keeps ~1 - P
        dims = tuple(d for d in range(5) if d != axis)
        kept = (first >= P).float().mean(dim=dims)
        slice_sigma = (P * (1 - P) * shape[axis] / n) ** 0.5
        assert (kept - (1 - P)).abs().max() < 6 * slice_sigma, axis
    flat = first.flatten() - 0.5
    assert abs((flat[1:] * flat[:-1]).mean().item() / flat.var().item()) < 5 / n**0.5
    second = counter_uniform(torch.tensor(8), shape, torch.device("cpu"))
    assert abs(torch.corrcoef(torch.stack([first.flatten(), second.flatten()]))[0, 1]) < 5 / n**0.5
    assert torch.equal(first, counter_uniform(torch.tensor(7), shape, torch.device("cpu")))


def _compiled_dropout(seed: int) -> tuple[SeededDropout, torch.nn.Module]:
    module = SeededDropout(P)
    module.generator = torch.Generator().manual_seed(seed)
    module.reseed()
    return module, torch.compile(module, backend="aot_eager", fullgraph=True)


def test_compiled_dropout_is_one_graph_reproducible_and_fresh_every_call() -> None:
    module, compiled = _compiled_dropout(3)
    x = torch.ones(4, 8, 10, 10, 5, requires_grad=True)
    first, second = compiled(x), compiled(x)  # fullgraph: a graph break would raise
    assert set(first.unique().tolist()) == {0.0, 1.0 / (1 - P)}
    assert abs((first == 0).float().mean().item() - P) < 0.03
    assert not torch.equal(first, second)  # each call of a step gets its own mask
    first.sum().backward()
    assert torch.equal(x.grad, first.detach())  # gradient: the same mask, scaled
    _, compiled_again = _compiled_dropout(3)
    assert torch.equal(compiled_again(x), first)
    _, compiled_other = _compiled_dropout(4)
    assert not torch.equal(compiled_other(x), first)
    module.eval()
    assert torch.equal(compiled(x), x)


def test_a_compiled_step_reseeds_its_masks_from_the_step_stream() -> None:
    """The whole compiled discriminator is one graph; two steps from the same seeds and weights
    match, and each new pass draws new keys from the step's stream."""
    spec = tiny_spec()
    ecal, energy, theta = (torch.from_numpy(a) for a in toy_showers(4, 0))
    steps = []
    for _ in range(2):
        generator, discriminator = build_models(spec, torch.Generator().manual_seed(0))
        discriminator.compile(backend="aot_eager", fullgraph=True)
        step = GanStep(spec, generator, discriminator, torch.Generator().manual_seed(1))
        step.forward = ForwardOptions(compile=True)
        steps.append(step)
    losses = [s.discriminator_grads(ecal, energy, theta) for s in steps]
    assert losses[0] == losses[1]
    dropouts = [m for m in steps[0].discriminator.modules() if isinstance(m, SeededDropout)]
    assert dropouts and all(m.counter[1].item() == 2 for m in dropouts)  # real and fake passes
    keys = [m.counter[0].item() for m in dropouts]
    steps[0].generator_grads(4, energy, theta)
    assert [m.counter[0].item() for m in dropouts] != keys
    assert all(m.counter[1].item() == 1 for m in dropouts)
