"""Standing batch-norm statistics: the generator's running means and variances recomputed at
its current weights before it is scored or saved.

A generator trains in train mode, normalising each layer by the statistics of its own small
batch, but is scored and used in eval mode with the running averages, which trail the weights
by the last few dozen steps; on the small spec that gap alone moved the mean sampling fraction
by +5% to +10% (docs/history/benchmarks.md, "A 3DGAN that learns"). Averaging the batch
statistics of many training-sized batches at the final weights (BigGAN's "standing statistics")
closes most of it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from evogan.gan3d.model.networks import Generator, sample
from evogan.gan3d.model.spec import GanSpec


def batch_norms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def standing_statistics(
    spec: GanSpec,
    generator: Generator,
    energy: np.ndarray,
    theta: np.ndarray | None,
    batches: int,
    batch_size: int,
    rng: torch.Generator,
) -> None:
    """Replace ``generator``'s batch-norm running statistics (in place) by the mean of the
    batch statistics of ``batches`` batches of ``batch_size`` conditions drawn with
    replacement from ``energy`` (GeV) and ``theta`` (rad); no-op without batch norm."""
    norms = batch_norms(generator)
    if not norms or batches == 0:
        return
    momenta = [m.momentum for m in norms]
    was_training = generator.training
    device = next(generator.parameters()).device
    energy_t = torch.as_tensor(np.asarray(energy, dtype=np.float32))
    theta_t = None if theta is None else torch.as_tensor(np.asarray(theta, dtype=np.float32))
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the batches below
    generator.train()
    try:
        with torch.no_grad():
            for _ in range(batches):
                pick = torch.randint(len(energy_t), (batch_size,), generator=rng, device=rng.device)
                pick = pick.cpu()
                angle = None if theta_t is None else theta_t[pick].to(device)
                sample(spec, generator, energy_t[pick].to(device), angle, rng)
    finally:
        for m, momentum in zip(norms, momenta, strict=True):
            m.momentum = momentum
        generator.train(was_training)
