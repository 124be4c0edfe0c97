"""Random draws under torch.compile: seeded dropout's masks and the generator's per-cell
noise from a counter hash, in one graph (evogan.gan3d.model.blocks: CountedDraws, counter_uniform,
counter_normal)."""

from __future__ import annotations

import random

import pytest
import torch

from evogan.gan3d.model.blocks import (
    MASK32,
    NoiseInjection,
    SeededDropout,
    _times,
    counter_normal,
    counter_uniform,
    mark_compiled,
)
from evogan.gan3d.model.networks import build_models, noise_source
from evogan.gan3d.model.spec import GanSpec, load_spec
from evogan.gan3d.training.step import GanStep
from tests.conftest import REPO
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
    module.reseed(module.generator)
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


@pytest.mark.slow
def test_a_compiled_step_reseeds_its_masks_from_the_step_stream() -> None:
    """The whole compiled discriminator is one graph; two steps from the same seeds and weights
    match, and each new pass draws new keys from the step's stream."""
    spec = tiny_spec()
    ecal, energy, theta = (torch.from_numpy(a) for a in toy_showers(4, 0))
    steps = []
    for _ in range(2):
        generator, discriminator = build_models(spec, torch.Generator().manual_seed(0))
        mark_compiled(discriminator)
        discriminator.compile(backend="aot_eager", fullgraph=True)
        steps.append(GanStep(spec, generator, discriminator, torch.Generator().manual_seed(1)))
    losses = [s.discriminator_grads(ecal, energy, theta) for s in steps]
    assert losses[0] == losses[1]
    dropouts = [m for m in steps[0].discriminator.modules() if isinstance(m, SeededDropout)]
    assert dropouts and all(m.counter[1].item() == 2 for m in dropouts)  # real and fake passes
    keys = [m.counter[0].item() for m in dropouts]
    steps[0].generator_grads(4, energy, theta)
    assert [m.counter[0].item() for m in dropouts] != keys
    assert all(m.counter[1].item() == 1 for m in dropouts)


def test_counter_normals_are_standard_normal_and_a_rank_gets_its_rows_of_the_batch() -> None:
    key, shape = torch.tensor(11), torch.Size((40, 1, 30, 30, 20))
    whole = counter_normal(key, shape, torch.device("cpu"))
    n = shape.numel()
    assert abs(whole.mean().item()) < 5 / n**0.5
    assert abs(whole.var().item() - 1.0) < 5 * (2 / n) ** 0.5
    assert abs((whole.abs() > 2).float().mean().item() - 0.0455) < 0.002  # two-sided 2 sigma
    block = counter_normal(key, torch.Size((10, *shape[1:])), torch.device("cpu"), first_row=20)
    assert torch.equal(block, whole[20:30])


def _noisy_layer() -> NoiseInjection:
    layer = NoiseInjection(2)
    with torch.no_grad():
        layer.scale.copy_(torch.tensor([1.0, 3.0]))
    mark_compiled(layer)
    return layer


@pytest.mark.slow
def test_compiled_noise_is_one_graph_sharded_like_one_process_and_seeded_by_the_stream() -> None:
    layer = _noisy_layer()
    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    whole_batch = torch.zeros(4, 2, 6, 5, 4)
    with noise_source(layer, torch.Generator().manual_seed(1)):
        expected = compiled(whole_batch)
    assert torch.equal(expected[:, 1], 3 * expected[:, 0])  # one draw per cell, scaled
    for rank in (0, 1):
        with noise_source(layer, torch.Generator().manual_seed(1), shard=(rank, 2)):
            got = compiled(whole_batch[:2])
        assert torch.equal(got, expected[2 * rank : 2 * rank + 2])
    with noise_source(layer, torch.Generator().manual_seed(2)):
        assert not torch.equal(compiled(whole_batch), expected)
    assert layer.source == (None, (0, 1))


@pytest.mark.slow
def test_shipped_networks_with_dropout_and_noise_compile_without_a_graph_break() -> None:
    raw = load_spec(REPO / "configs" / "gan3d.yaml").model_dump()
    for block in raw["generator"]:
        block["noise"] = True
    spec = GanSpec.model_validate(raw)
    generator, discriminator = build_models(spec, torch.Generator().manual_seed(0))
    for network in (generator, discriminator):
        mark_compiled(network)
    discriminator.set_dropout_generator(torch.Generator().manual_seed(1))
    discriminator.reseed_dropout()
    latent = torch.randn(2, spec.latent_size)
    with noise_source(generator, torch.Generator().manual_seed(2)):
        graphs = torch._dynamo.explain(generator)(latent)
    assert (graphs.graph_count, graphs.graph_break_count) == (1, 0)
    image = torch.rand(2, 1, *spec.output_shape)
    graphs = torch._dynamo.explain(discriminator)(image, torch.full((2,), 50.0))
    assert (graphs.graph_count, graphs.graph_break_count) == (1, 0)
