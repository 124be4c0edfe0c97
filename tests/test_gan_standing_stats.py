"""Standing batch-norm statistics: the running statistics become the mean batch statistics of
training-sized batches at the current weights."""

from __future__ import annotations

import numpy as np
import torch

from evogan.gan3d.model.networks import build_models, make_latent
from evogan.gan3d.training.standing_stats import batch_norms, standing_statistics
from tests.gan_fixtures import tiny_spec


def test_running_statistics_become_the_mean_of_the_batch_statistics() -> None:
    spec = tiny_spec()
    generator, _ = build_models(spec, torch.Generator().manual_seed(0))
    norms = batch_norms(generator)
    assert norms, "the tiny spec's generator has batch norm"
    energy = np.linspace(10.0, 200.0, 30)
    theta = np.full(30, np.pi / 2) if spec.conditioning.angle else None
    generator.eval()
    standing_statistics(spec, generator, energy, theta, 6, 4, torch.Generator().manual_seed(1))
    assert not generator.training
    assert all(m.momentum is not None for m in norms)
    assert int(norms[0].num_batches_tracked) == 6

    # Replay the same draws and record each batch's statistics at the first batch norm.
    seen: list[torch.Tensor] = []
    hook = norms[0].register_forward_hook(
        lambda _m, args, _out: seen.append(args[0].mean(dim=(0, 2, 3, 4)))
    )
    replay = torch.Generator().manual_seed(1)
    energy_t = torch.as_tensor(energy, dtype=torch.float32)
    theta_t = None if theta is None else torch.as_tensor(theta, dtype=torch.float32)
    trained = generator.training
    with torch.no_grad():
        generator.train()
        saved = [(m.running_mean.clone(), m.running_var.clone()) for m in norms]
        for _ in range(6):
            pick = torch.randint(30, (4,), generator=replay)
            angle = None if theta_t is None else theta_t[pick]
            generator(make_latent(spec, energy_t[pick], angle, replay))
        for m, (mean, var) in zip(norms, saved, strict=True):
            m.running_mean.copy_(mean)
            m.running_var.copy_(var)
    generator.train(trained)
    hook.remove()
    expected = torch.stack(seen).mean(dim=0)
    assert torch.allclose(norms[0].running_mean, expected, atol=1e-5)


def test_zero_batches_keeps_the_running_statistics() -> None:
    spec = tiny_spec()
    generator, _ = build_models(spec, torch.Generator().manual_seed(0))
    before = [b.clone() for b in generator.buffers()]
    theta = np.full(3, np.pi / 2) if spec.conditioning.angle else None
    standing_statistics(
        spec, generator, np.full(3, 50.0), theta, 0, 4, torch.Generator().manual_seed(1)
    )
    assert all(torch.equal(a, b) for a, b in zip(before, generator.buffers(), strict=True))
