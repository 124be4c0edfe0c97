"""Per-cell noise inputs of the generator (``noise: true`` on a generator block): off by
default, drawn from the stream they are given, sharded like the latent noise, and trained."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evogan.gan3d.model.blocks import NoiseInjection
from evogan.gan3d.model.generate import generate_showers
from evogan.gan3d.model.networks import build_models, noise_source
from evogan.gan3d.model.spec import GanSpec
from evogan.gan3d.training.step import GanStep
from tests.gan_fixtures import tiny_spec, toy_showers


def _noisy_spec() -> GanSpec:
    raw = tiny_spec().model_dump()
    for block in raw["generator"]:
        block["noise"] = True
    return GanSpec.model_validate(raw)


def test_blocks_have_no_noise_unless_asked() -> None:
    plain, _ = build_models(tiny_spec(), torch.Generator().manual_seed(0))
    noisy, _ = build_models(_noisy_spec(), torch.Generator().manual_seed(0))
    assert not any(isinstance(m, NoiseInjection) for m in plain.modules())
    layers = [m for m in noisy.modules() if isinstance(m, NoiseInjection)]
    assert [m.scale.shape[0] for m in layers] == [b.filters for b in _noisy_spec().generator]
    # the scales start at 0: the noisy generator starts as the plain one
    assert all(float(m.scale.detach().abs().sum()) == 0 for m in layers)


def test_noise_is_per_cell_scaled_per_channel_and_drawn_from_the_given_stream() -> None:
    layer = NoiseInjection(3)
    with torch.no_grad():
        layer.scale.copy_(torch.tensor([0.0, 1.0, 2.0]))
    x = torch.zeros(2, 3, 4, 5, 6)
    with noise_source(layer, torch.Generator().manual_seed(7)):
        out = layer(x)
    draw = torch.randn((2, 1, 4, 5, 6), generator=torch.Generator().manual_seed(7))
    assert torch.equal(out[:, 0], torch.zeros(2, 4, 5, 6))
    assert torch.equal(out[:, 1:2], draw) and torch.equal(out[:, 2:3], 2 * draw)
    assert layer.source == (None, (0, 1))  # restored after the block


def test_two_ranks_draw_the_noise_one_process_draws_for_the_whole_batch() -> None:
    layer = NoiseInjection(1)
    with torch.no_grad():
        layer.scale.fill_(1.0)
    whole_batch = torch.zeros(4, 1, 3, 3, 3)
    with noise_source(layer, torch.Generator().manual_seed(1)):
        expected = layer(whole_batch)
    for rank in (0, 1):
        with noise_source(layer, torch.Generator().manual_seed(1), shard=(rank, 2)):
            got = layer(whole_batch[:2])
        assert torch.equal(got, expected[2 * rank : 2 * rank + 2])


@pytest.mark.slow
def test_a_noisy_generator_trains_its_noise_scales_and_generates_reproducibly() -> None:
    spec = _noisy_spec()
    generator, discriminator = build_models(spec, torch.Generator().manual_seed(0))
    step = GanStep(spec, generator, discriminator, torch.Generator().manual_seed(1))
    ecal, energy, theta = (torch.from_numpy(a) for a in toy_showers(8))
    for _ in range(2):
        step.train_step(ecal, energy, theta)
    scales = [m.scale for m in generator.modules() if isinstance(m, NoiseInjection)]
    assert all(float(s.detach().abs().sum()) > 0 for s in scales)

    def showers(seed: int) -> np.ndarray:
        rng = torch.Generator().manual_seed(seed)
        return generate_showers(spec, generator, energy.numpy(), theta.numpy(), rng)

    assert np.array_equal(showers(5), showers(5))
    assert not np.array_equal(showers(5), showers(6))
